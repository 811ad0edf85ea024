package mtls_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolmesh/toolmesh/internal/mtls"
	"github.com/toolmesh/toolmesh/internal/testpki"
)

const envoyID = "spiffe://cluster.local/ns/mesh/sa/envoy"

// serve starts a gRPC health server on 127.0.0.1 behind s.
func serve(t *testing.T, s *mtls.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(s.TLSConfig())))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// check makes one health RPC as a client presenting certs.
func check(t *testing.T, addr string, ca *testpki.CA, certs ...tls.Certificate) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.Pool, Certificates: certs, ServerName: "127.0.0.1",
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// setup writes a server certificate and returns its config and a server.
func setup(t *testing.T, allowed ...string) (*testpki.CA, mtls.Config, *mtls.Server) {
	t.Helper()
	ca := testpki.NewCA(t, "mesh")
	srv := ca.Server("toolmesh")
	cfg := mtls.Config{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CertFile, AllowedSANs: allowed}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := mtls.New(cfg, "extproc", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return ca, cfg, s
}

func TestClients(t *testing.T) {
	ca, _, s := setup(t, envoyID, "envoy.mesh.svc")
	addr := serve(t, s)
	other := testpki.NewCA(t, "other")
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{
		{"allowed SPIFFE ID", []tls.Certificate{ca.Client("envoy", envoyID).TLS}, true},
		{"SPIFFE ID outside the allow-list", []tls.Certificate{ca.Client("intruder", "spiffe://cluster.local/ns/app/sa/intruder").TLS}, false},
		{"no URI SAN", []tls.Certificate{ca.Client("anon").TLS}, false},
		{"allowed SPIFFE ID from another CA", []tls.Certificate{other.Client("forged", envoyID).TLS}, false},
		{"no client certificate", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(t, addr, ca, tc.certs...)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// replace writes src over dst the way a rotation does: a new file renamed
// into place.
func replace(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(dst), ".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// serverSerial handshakes with addr and returns the server leaf's serial.
func serverSerial(t *testing.T, addr string, ca *testpki.CA, client tls.Certificate) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{client}, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestRotation(t *testing.T) {
	ca, cfg, s := setup(t, envoyID)
	addr := serve(t, s)
	client := ca.Client("envoy", envoyID)
	first := serverSerial(t, addr, ca, client.TLS)

	next := ca.Server("toolmesh-next")
	// Half-way through a rotation the certificate is new and the key old:
	// the last good pair stays in use.
	replace(t, next.CertFile, cfg.CertFile)
	if got := serverSerial(t, addr, ca, client.TLS); got != first {
		t.Fatalf("mismatched pair served: serial %s, want %s", got, first)
	}
	replace(t, next.KeyFile, cfg.KeyFile)
	want := next.TLS.Leaf.SerialNumber.String()
	if got := serverSerial(t, addr, ca, client.TLS); got != want {
		t.Fatalf("after rotation: serial %s, want %s (first %s)", got, want, first)
	}
	if err := check(t, addr, ca, client.TLS); err != nil {
		t.Fatalf("RPC after rotation: %v", err)
	}

	// A rotated client CA: clients of the old CA are refused, of the new one accepted.
	ca2 := testpki.NewCA(t, "mesh2")
	replace(t, ca2.CertFile, cfg.ClientCAFile)
	if err := check(t, addr, ca, client.TLS); err == nil {
		t.Fatal("client of the replaced CA accepted")
	}
	if err := check(t, addr, ca, ca2.Client("envoy2", envoyID).TLS); err != nil {
		t.Fatalf("client of the new CA refused: %v", err)
	}
}

func TestValidate(t *testing.T) {
	ca := testpki.NewCA(t, "mesh")
	srv := ca.Server("toolmesh")
	for _, tc := range []struct {
		name string
		cfg  mtls.Config
		want []string
	}{
		{"empty", mtls.Config{}, []string{"certFile: must be set", "keyFile: must be set", "clientCAFile: must be set", "allowedSANs: must list"}},
		{"bad SAN", mtls.Config{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CertFile, AllowedSANs: []string{"spiffe:///x", "a b"}},
			[]string{"allowedSANs[0]", "allowedSANs[1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil {
				t.Fatal("valid")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
	// The files are read at start (New); each error names its key.
	for _, tc := range []struct {
		name string
		cfg  mtls.Config
		want []string
	}{
		{"key of another certificate", mtls.Config{CertFile: srv.CertFile, KeyFile: ca.Client("c").KeyFile, ClientCAFile: ca.CertFile, AllowedSANs: []string{envoyID}},
			[]string{"certFile " + srv.CertFile}},
		{"CA file not PEM", mtls.Config{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: srv.KeyFile, AllowedSANs: []string{envoyID}},
			[]string{"clientCAFile"}},
		{"missing file", mtls.Config{CertFile: srv.CertFile + ".gone", KeyFile: srv.KeyFile, ClientCAFile: ca.CertFile, AllowedSANs: []string{envoyID}},
			[]string{"certFile: open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err != nil {
				t.Fatalf("the keys are valid: %v", err)
			}
			_, err := mtls.New(tc.cfg, "extproc", slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
	if err := (*mtls.Config)(nil).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := mtls.Allowed(nil, []string{envoyID}); err == nil {
		t.Fatal("empty chain allowed")
	}
}

// TestClient: the client side accepts a server of the CA carrying one of
// serverSANs, whatever the dialled host, and refuses another SAN or CA.
func TestClient(t *testing.T) {
	ca, _, s := setup(t, envoyID)
	addr := serve(t, s)
	envoy := ca.Client("envoy", envoyID)
	other := testpki.NewCA(t, "other")
	for _, tc := range []struct {
		name   string
		caFile string
		sans   []string
		ok     bool
	}{
		{"server SAN allowed", ca.CertFile, []string{"localhost"}, true},
		{"server SAN not allowed", ca.CertFile, []string{"toolmesh.mesh.svc"}, false},
		{"server of another CA", other.CertFile, []string{"localhost"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := mtls.Client(envoy.CertFile, envoy.KeyFile, tc.caFile, tc.sans)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(c)))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
			if (err == nil) != tc.ok {
				t.Fatalf("health check: %v, want success %v", err, tc.ok)
			}
		})
	}
	if _, err := mtls.Client(envoy.CertFile, envoy.KeyFile, envoy.KeyFile, nil); err == nil || !strings.Contains(err.Error(), "caFile") {
		t.Errorf("CA file without a certificate: %v", err)
	}
}
