package app

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/testpki"
)

// TestRunUpstreamAuthReload runs `toolmesh run` with a Tool Service that
// records its Authorization: the client's token never arrives; the
// credential upstreamAuth names does, and SIGHUP puts a changed entry in
// force, while an invalid one leaves the last good entry in force.
func TestRunUpstreamAuthReload(t *testing.T) {
	var mu sync.Mutex
	var got []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"t","description":"A test tool.","inputSchema":{"type":"object"},"path":"/tools/t"}]}`)
	})
	mux.HandleFunc("POST /tools/t", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	svc := httptest.NewServer(mux)
	t.Cleanup(svc.Close)

	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	if err := os.WriteFile(portal, []byte(`{"routes":[{"key":"r","toolServices":[{"name":"svc","url":"`+svc.URL+`"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "svc-token")
	if err := os.WriteFile(secret, []byte("first-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "toolmesh.yaml")
	writeCfg := func(upstreamAuth string) {
		t.Helper()
		doc := "portal: " + portal + "\ncredentials:\n  svc-token: {file: " + secret + "}\nupstreamAuth:\n" + upstreamAuth
		if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg("  svc: {credential: svc-token, prefix: \"Bearer \"}\n")
	p := startProcess(t, "run", "--config", cfgPath)
	base := "http://" + p.addrs["dataplane"]
	call := func() string {
		t.Helper()
		code, doc := rpc(t, base, "r", callT, map[string]string{"Authorization": "Bearer client-token"})
		if code != 200 || dig(doc, "result", "isError") == true {
			t.Fatalf("tools/call = %d %v", code, doc)
		}
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}
	hangup := func(wantLog string, n int) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); strings.Count(p.logs.String(), wantLog) < n; {
			if time.Now().After(deadline) {
				t.Fatalf("no %q after SIGHUP:\n%s", wantLog, p.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if h := call(); h != "Bearer first-secret|" {
		t.Errorf("Authorization|X-Api-Key = %q, want the credential, never the client's token", h)
	}
	// A rotated secret file is read at the next call, without a reload.
	if err := os.WriteFile(secret, []byte("second-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h := call(); h != "Bearer second-secret|" {
		t.Errorf("after rotation: %q", h)
	}
	writeCfg("  svc: {credential: svc-token, header: X-Api-Key}\n")
	hangup("upstreamAuth reloaded", 1)
	if h := call(); h != "|second-secret" {
		t.Errorf("after the reload: %q, want the credential in X-Api-Key and no Authorization", h)
	}
	writeCfg("  svc: {credential: undefined}\n")
	hangup("keeps its last good configuration", 1)
	if !strings.Contains(p.logs.String(), "upstreamAuth.svc.credential") {
		t.Errorf("the failed reload does not name the key:\n%s", p.logs)
	}
	if h := call(); h != "|second-secret" {
		t.Errorf("after a failed reload: %q, want the last good entry", h)
	}
}

// TestUpstreamAuthConfigInvalid: an invalid upstreamAuth or downstreamTLS
// is a configuration error naming the key.
func TestUpstreamAuthConfigInvalid(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"upstreamAuth:\n  svc: {credential: nope}\n", `upstreamAuth.svc.credential: "nope" is not defined in credentials`},
		{"upstreamAuth:\n  svc: {forwardClaims: {host: sub}}\n", "upstreamAuth.svc.forwardClaims.host"},
		{"downstreamTLS: {certFile: /c, keyFile: /k}\n", "downstreamTLS: options: downstreamTLS.clientCAFile is required"},
	} {
		cfg := defaultConfig()
		if err := parseConfig([]byte(tc.doc), &cfg); err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: Validate() = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// TestRunDownstreamMTLS runs `toolmesh run` with downstreamTLS: the local
// data plane serves mTLS only, and a client certificate's SPIFFE ID is the
// caller the extproc server logs.
func TestRunDownstreamMTLS(t *testing.T) {
	ca := testpki.NewCA(t, "mesh")
	server := ca.Server("envoy")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "toolmesh.yaml")
	doc := "logLevel: debug\ndownstreamTLS: {certFile: " + server.CertFile + ", keyFile: " + server.KeyFile + ", clientCAFile: " + ca.CertFile + "}\n"
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--config", cfgPath)
	cert := ca.Client("a-b", "spiffe://example.org/ns/a/sa/b")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{cert.TLS}}}}
	t.Cleanup(client.CloseIdleConnections)
	req, err := http.NewRequestWithContext(t.Context(), "POST", "https://"+p.addrs["dataplane"]+"/mcp/core",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("tools/list = %d", resp.StatusCode)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.logs.String(), "caller=spiffe://example.org/ns/a/sa/b"); {
		if time.Now().After(deadline) {
			t.Fatalf("no request logged with the SPIFFE ID as caller:\n%s", lastLines(p.logs.String(), 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Plaintext is not served.
	if resp, err := http.Post("http://"+p.addrs["dataplane"]+"/mcp/core", "application/json", strings.NewReader("{}")); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest { // Go's TLS server answers a plaintext request 400 and closes
			t.Errorf("plaintext request got %d", resp.StatusCode)
		}
	}
}
