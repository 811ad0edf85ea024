package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/authtest"
)

// TestAuthThroughTheDataPlane runs `toolmesh run` with a route that needs a
// bearer token from an issuer on 127.0.0.1: each bad request is answered
// by the extproc server through the local data plane with its status and
// challenge, and never reaches the Tool Service; a good token does. The
// protected-resource metadata is served at its well-known URL. SIGHUP
// reloads the auth block, keeping the last good one when the new one is
// invalid.
func TestAuthThroughTheDataPlane(t *testing.T) {
	key := authtest.NewRSAKey(t, "k1")
	issuer := authtest.NewIssuer(t, "/realm", key).URL

	var calls atomic.Int64
	svc := http.NewServeMux()
	svc.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"t","description":"A test tool.","inputSchema":{"type":"object"},"path":"/tools/t"}]}`)
	})
	svc.HandleFunc("POST /tools/t", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":[{"type":"text","text":"done"}]}`)
	})
	svcSrv := httptest.NewServer(svc)
	t.Cleanup(svcSrv.Close)

	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	if err := os.WriteFile(portal, []byte(`{"routes":[{"key":"r","toolServices":[{"name":"svc","url":"`+svcSrv.URL+`"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "toolmesh.yaml")
	writeCfg := func(scopes, mode string) {
		t.Helper()
		doc := "resourceBase: https://mcp.example.com\nauth:\n  default:\n    mode: " + mode + "\n    issuers: [{issuer: " + issuer + "}]\n    scopes: [" + scopes + "]\n"
		if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg("mcp:tools", "required")
	p := startProcess(t, "run", "--portal", portal, "--config", cfgFile)
	addr := p.addrs["dataplane"]

	sign := func(mod func(map[string]any)) string {
		c := map[string]any{"iss": issuer, "sub": "alice", "aud": "https://mcp.example.com/mcp/r",
			"exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools"}
		if mod != nil {
			mod(c)
		}
		return key.Sign(t, c)
	}
	claims := map[string]any{"iss": issuer, "aud": "https://mcp.example.com/mcp/r", "exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools"}
	none := authtest.RawToken(map[string]any{"alg": "none", "kid": "k1"}, claims, nil)
	hs := authtest.HS256WithPublicKey(t, key, map[string]any{"alg": "HS256", "kid": "k1"}, claims)

	const meta = `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/r"`
	invalid := func(d string) string { return `Bearer error="invalid_token", error_description="` + d + `", ` + meta }
	cases := []struct {
		name, path, authz string
		status            int
		challenge         string
	}{
		{"missing", "/mcp/r", "", 401, `Bearer scope="mcp:tools", ` + meta},
		{"expired", "/mcp/r", sign(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), 401, invalid("the token has expired")},
		{"not yet valid", "/mcp/r", sign(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), 401, invalid("the token is not valid yet")},
		{"wrong aud", "/mcp/r", sign(func(c map[string]any) { c["aud"] = "https://mcp.example.com/mcp/x" }), 401, invalid("the token is not for this resource")},
		{"wrong iss", "/mcp/r", sign(func(c map[string]any) { c["iss"] = "https://evil.example.com" }), 401, invalid("the token's issuer is not trusted")},
		{"alg none", "/mcp/r", none, 401, invalid("the token's signature algorithm is not accepted")},
		{"HS256 with the public key", "/mcp/r", hs, 401, invalid("the token's signature algorithm is not accepted")},
		{"malformed", "/mcp/r", "abc.def", 401, invalid("the token is not a signed JWT")},
		{"oversized", "/mcp/r", sign(func(c map[string]any) { c["pad"] = strings.Repeat("x", 9000) }), 401, invalid("the token is too large")},
		{"token in query", "/mcp/r?access_token=x", "", 400,
			`Bearer error="invalid_request", error_description="access tokens are accepted in the Authorization header only", ` + meta},
		{"missing scope", "/mcp/r", sign(func(c map[string]any) { c["scope"] = "other" }), 403,
			`Bearer error="insufficient_scope", error_description="the token lacks a required scope", scope="mcp:tools", ` + meta},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := clientHeaders(3)
			if tc.authz != "" {
				h = append(h, "Authorization: Bearer "+tc.authz)
			}
			r := rawPost(t, addr, tc.path, h, callT, 0)
			requireRPCError(t, r, tc.status, -32600)
			if got := r.header.Get("Www-Authenticate"); got != tc.challenge {
				t.Fatalf("WWW-Authenticate\n  %s\nwant\n  %s", got, tc.challenge)
			}
			if n := calls.Load(); n != 0 {
				t.Fatalf("the Tool Service was called %d times", n)
			}
		})
	}

	good := sign(nil)
	callOK := func() rawReply {
		return rawPost(t, addr, "/mcp/r", append(clientHeaders(3), "Authorization: Bearer "+good), callT, 0)
	}
	if r := callOK(); r.status != http.StatusOK || !strings.Contains(string(r.body), "done") || calls.Load() != 1 {
		t.Fatalf("valid token: %d %s, %d calls", r.status, r.body, calls.Load())
	}

	resp, err := http.Get("http://" + addr + "/.well-known/oauth-protected-resource/mcp/r")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"resource":"https://mcp.example.com/mcp/r","authorization_servers":["` + issuer + `"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`
	if resp.StatusCode != 200 || string(body) != want {
		t.Fatalf("metadata: %d %s", resp.StatusCode, body)
	}

	hangup := func(wantLog string) {
		t.Helper()
		before := strings.Count(p.logs.String(), wantLog)
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(p.logs.String(), wantLog) == before {
			if time.Now().After(deadline) {
				t.Fatalf("no %q after SIGHUP", wantLog)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	writeCfg("mcp:admin", "required")
	hangup("auth configuration reloaded")
	if r := callOK(); r.status != http.StatusForbidden {
		t.Fatalf("after reload to scope mcp:admin: %d %s", r.status, r.body)
	}
	writeCfg("mcp:tools", "sometimes")
	hangup("auth.default.mode") // the failed reload names the key
	if r := callOK(); r.status != http.StatusForbidden {
		t.Fatalf("after a failed reload the last good configuration must stay: %d %s", r.status, r.body)
	}
}

// TestAuthConfigErrorsExit2: an invalid auth block stops the start with the
// usage exit code, naming the key.
func TestAuthConfigErrorsExit2(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "toolmesh.yaml")
	if err := os.WriteFile(cfg, []byte("auth:\n  routes:\n    core: {issuers: [{issuer: http://idp.example.com, algorithms: [HS256]}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	code := execute(t.Context(), []string{"run", "--config", cfg}, io.Discard, &stderr, hooks{})
	if code != exitUsage || !strings.Contains(stderr.String(), "auth.routes.core") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if err := os.WriteFile(cfg, []byte("auth:\n  routes:\n    core: {issuers: [{issuer: http://127.0.0.1:1/idp}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	code = execute(t.Context(), []string{"run", "--config", cfg}, io.Discard, &stderr, hooks{})
	if code != exitUsage || !strings.Contains(stderr.String(), "resourceBase") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
}
