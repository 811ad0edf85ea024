package app

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolmesh/toolmesh/demo"
	"github.com/toolmesh/toolmesh/internal/mtls"
	"github.com/toolmesh/toolmesh/internal/testpki"
)

const controlClientID = "spiffe://cluster.local/ns/mesh/sa/envoy"

// demoPortal writes the demo Portal of running demo Tool Services.
func demoPortal(t *testing.T) string {
	t.Helper()
	svcs, err := demo.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svcs.Close() })
	portal := filepath.Join(t.TempDir(), "portal.yaml")
	if err := os.WriteFile(portal, demo.Portal(svcs), 0o600); err != nil {
		t.Fatal(err)
	}
	return portal
}

// grpcHealth makes one health check of addr with creds.
func grpcHealth(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// TestControlTLS serves extproc, notifications and xDS with --control-tls-*:
// a client with an allowed SPIFFE ID gets through, one outside the
// allow-list, one without a certificate and a plaintext one do not.
func TestControlTLS(t *testing.T) {
	portal := demoPortal(t)
	ca := testpki.NewCA(t, "mesh")
	srv := ca.Server("toolmesh")
	tlsArgs := []string{"--portal", portal, "--control-tls-cert", srv.CertFile, "--control-tls-key", srv.KeyFile,
		"--control-tls-client-ca", ca.CertFile, "--control-tls-allowed-sans", controlClientID}
	allowed := ca.Client("envoy", controlClientID).TLS
	intruder := ca.Client("intruder", "spiffe://cluster.local/ns/app/sa/intruder").TLS
	clientTLS := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: certs}
	}
	ext := startProcess(t, append([]string{"extproc", "--notifications-listen", "127.0.0.1:0"}, tlsArgs...)...)
	xdsP := startProcess(t, append([]string{"xds"}, tlsArgs...)...)

	for _, addr := range []string{ext.addrs["extproc"], xdsP.addrs["xds"]} {
		if err := grpcHealth(t, addr, credentials.NewTLS(clientTLS(allowed))); err != nil {
			t.Errorf("%s: allowed client refused: %v", addr, err)
		}
		if err := grpcHealth(t, addr, credentials.NewTLS(clientTLS(intruder))); err == nil {
			t.Errorf("%s: client outside the allow-list accepted", addr)
		}
		if err := grpcHealth(t, addr, credentials.NewTLS(clientTLS())); err == nil {
			t.Errorf("%s: client without a certificate accepted", addr)
		}
		if err := grpcHealth(t, addr, insecure.NewCredentials()); err == nil {
			t.Errorf("%s: plaintext client accepted", addr)
		}
	}

	notifyURL := "https://" + ext.addrs["notifications"] + "/"
	get := func(certs ...tls.Certificate) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS(certs...)}, Timeout: 30 * time.Second}
		defer c.CloseIdleConnections()
		resp, err := c.Get(notifyURL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(allowed); err != nil {
		t.Errorf("notifications: allowed client refused: %v", err)
	}
	if err := get(intruder); err == nil {
		t.Error("notifications: client outside the allow-list accepted")
	}
	if err := get(); err == nil {
		t.Error("notifications: client without a certificate accepted")
	}
}

// TestInsecureListeners: a control listener on a non-loopback address
// without TLS refuses to start, naming the listener, its flag and
// --insecure-listeners; loopback, TLS or the flag let it start.
func TestInsecureListeners(t *testing.T) {
	portal := demoPortal(t)
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"extproc", "--extproc-listen", "0.0.0.0:0"},
			[]string{"extproc listener on 0.0.0.0:0 (--extproc-listen, config key extprocListen) is not loopback and has no TLS", "--insecure-listeners"}},
		{[]string{"extproc", "--extproc-listen", "127.0.0.1:0", "--notifications-listen", "[::]:0"},
			[]string{"notifications listener on [::]:0 (--notifications-listen, config key notificationsListen)", "--insecure-listeners"}},
		{[]string{"xds", "--xds-listen", "10.0.0.1:0"},
			[]string{"xds listener on 10.0.0.1:0 (--xds-listen, config key xdsListen)", "--insecure-listeners"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			args := append(tt.args, "--portal", portal, "--admin-listen", "127.0.0.1:0")
			var stdout, stderr lockedBuffer
			if code := execute(t.Context(), args, &stdout, &stderr, hooks{}); code == 0 {
				t.Fatalf("started; stderr:\n%s", stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}

	ca := testpki.NewCA(t, "mesh")
	srv := ca.Server("toolmesh")
	for _, tt := range []struct {
		name, addr string
		cfg        Config
		ok         bool
	}{
		{"extproc", "0.0.0.0:9002", Config{}, false},
		{"xds", "[::]:18000", Config{}, false},
		{"notifications", "10.1.2.3:9003", Config{}, false},
		{"extproc", "127.0.0.1:9002", Config{}, true},
		{"extproc", "127.0.0.2:9002", Config{}, true},
		{"xds", "[::1]:18000", Config{}, true},
		{"xds", "localhost:18000", Config{}, true},
		{"admin", "0.0.0.0:9090", Config{}, true}, // not a control listener: the admin token guards it
		{"dataplane", "0.0.0.0:8080", Config{}, true},
		{"extproc", "0.0.0.0:9002", Config{ListenConfig: ListenConfig{InsecureListeners: true}}, true},
		{"extproc", "0.0.0.0:9002", Config{ListenConfig: ListenConfig{ControlTLS: &mtls.Config{
			CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CertFile, AllowedSANs: []string{controlClientID}}}}, true},
	} {
		a := &app{cfg: tt.cfg}
		if err := a.checkPerimeter(tt.name, tt.addr); (err == nil) != tt.ok {
			t.Errorf("%s on %s (insecure %v, TLS %v): %v", tt.name, tt.addr, tt.cfg.InsecureListeners, tt.cfg.ControlTLS != nil, err)
		}
	}
}

// TestRunControlTLS: run's local data plane presents envoyControlTLS's
// certificate to its own mTLS control listeners, and an MCP call goes
// through; without envoyControlTLS run refuses controlTLS at start.
func TestRunControlTLS(t *testing.T) {
	ca := testpki.NewCA(t, "mesh")
	srv := ca.Server("toolmesh")
	envoyCert := ca.Client("envoy", controlClientID)
	args := []string{"run", "--control-tls-cert", srv.CertFile, "--control-tls-key", srv.KeyFile,
		"--control-tls-client-ca", ca.CertFile, "--control-tls-allowed-sans", controlClientID}
	refused := slices.Clone(args)
	for _, f := range []string{"--listen", "--extproc-listen", "--xds-listen", "--admin-listen"} {
		refused = append(refused, f, "127.0.0.1:0")
	}
	var stdout, stderr lockedBuffer
	if code := execute(t.Context(), refused, &stdout, &stderr, hooks{}); code == 0 || !strings.Contains(stderr.String(), "run's local data plane needs envoyControlTLS") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}

	cfg := filepath.Join(t.TempDir(), "config.yaml")
	// The server certificate names 127.0.0.1 and localhost as DNS and IP
	// SANs; the data plane checks the DNS SAN.
	if err := os.WriteFile(cfg, []byte("envoyControlTLS:\n  certFile: "+envoyCert.CertFile+"\n  keyFile: "+envoyCert.KeyFile+
		"\n  caFile: "+ca.CertFile+"\n  serverSANs: [localhost]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, append(args, "--config", cfg)...)
	code, out := rpc(t, "http://"+p.addrs["dataplane"], "core", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`, nil)
	if code != http.StatusOK || dig(out, "result", "serverInfo", "name") == nil {
		t.Fatalf("initialize through the data plane over mTLS: %d %v", code, out)
	}
	// The listeners stay closed to a client without a certificate.
	if err := grpcHealth(t, p.addrs["extproc"], credentials.NewTLS(&tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})); err == nil {
		t.Error("extproc accepted a client without a certificate")
	}
}
