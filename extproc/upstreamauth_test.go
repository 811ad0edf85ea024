package extproc

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/internal/config"
)

// callMutation routes one tools/call of echo (Tool Service echo) and
// returns what the request-body reply sets and removes.
func callMutation(t *testing.T, env *testEnv, extra ...string) (map[string]string, []string) {
	t.Helper()
	body := callReq("echo", `{}`)
	v := env.open(t)
	defer v.close()
	v.send(reqHeaders(false, post("/mcp/core", len(body), extra...)...))
	r := v.send(reqBody(body))
	if r.GetRequestBody() == nil {
		t.Fatalf("not routed: %v", r)
	}
	m := r.GetRequestBody().GetResponse().GetHeaderMutation()
	return setOf(t, m), m.GetRemoveHeaders()
}

// TestRoutedCallDropsAuthorization: without upstreamAuth the client's
// Authorization is removed from a routed call, in the header phase of a
// stateless call too.
func TestRoutedCallDropsAuthorization(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	set, remove := callMutation(t, env)
	if _, ok := set["authorization"]; ok || !slices.Contains(remove, "authorization") {
		t.Errorf("set %v, remove %v: want authorization removed, not set", set, remove)
	}

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta2026 + `}}`
	v := env.open(t)
	defer v.close()
	hr := v.send(reqHeaders(false, post("/mcp/core", len(body), stateless("tools/call", "echo")...)...))
	if rm := hr.GetRequestHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); !slices.Contains(rm, "authorization") {
		t.Errorf("header-phase routing removes %v, want authorization among them", rm)
	}
}

// TestUpstreamAuthHeaders: what a native Tool Service receives per
// upstreamAuth entry.
func TestUpstreamAuthHeaders(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "echo-token"), []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLMESH_TEST_ECHO_KEY", "env-secret")
	creds := map[string]config.CredentialSource{
		"echo-token": {File: filepath.Join(dir, "echo-token")},
		"echo-key":   {Env: "TOOLMESH_TEST_ECHO_KEY"},
	}
	caller := &identity.Caller{Authenticated: true, Subject: "alice", Token: "s3cret-token", Claims: map[string]any{
		"sub": "alice", "email": "alice@example.org", "level": float64(3), "admin": true,
		"roles": []any{"a"}, "evil": "x\r\nx-injected: 1", "nul": "a\x00b", "long": strings.Repeat("a", upstreamcred.MaxClaimHeaderBytes+1),
	}}
	claims := map[string]string{"x-caller-sub": "sub", "X-Caller-Email": "email", "x-caller-level": "level",
		"x-caller-admin": "admin", "x-caller-roles": "roles", "x-caller-evil": "evil", "x-caller-nul": "nul",
		"x-caller-long": "long", "x-caller-missing": "missing"}
	for _, tc := range []struct {
		name       string
		auth       upstreamcred.ServiceAuth
		caller     *identity.Caller
		wantSet    map[string]string // headers of upstreamAuth that must be set
		wantRemove []string          // that must be removed
	}{
		{name: "credential from a file", auth: upstreamcred.ServiceAuth{Credential: "echo-token", Prefix: "Bearer "},
			wantSet: map[string]string{"authorization": "Bearer file-secret"}},
		{name: "credential from the environment in its own header", auth: upstreamcred.ServiceAuth{Credential: "echo-key", Header: "X-Api-Key"},
			wantSet: map[string]string{"x-api-key": "env-secret"}, wantRemove: []string{"authorization"}},
		{name: "forwardToken", auth: upstreamcred.ServiceAuth{ForwardToken: true},
			wantSet: map[string]string{"authorization": "Bearer s3cret-token"}},
		{name: "claims", auth: upstreamcred.ServiceAuth{ForwardClaims: claims}, caller: caller,
			wantSet: map[string]string{"x-caller-sub": "alice", "x-caller-email": "alice@example.org",
				"x-caller-level": "3", "x-caller-admin": "true"},
			wantRemove: []string{"authorization", "x-caller-roles", "x-caller-evil", "x-caller-nul", "x-caller-long", "x-caller-missing"}},
		{name: "claims without a caller", auth: upstreamcred.ServiceAuth{ForwardClaims: claims},
			wantRemove: []string{"authorization", "x-caller-sub", "x-caller-email"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, Config{}, testTable(t))
			if err := env.srv.SetUpstreamAuth(upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"echo": tc.auth}, Credentials: creds}); err != nil {
				t.Fatal(err)
			}
			env.srv.callerSeam = func(*corev3.HeaderMap) *identity.Caller { return tc.caller }
			// The client sends its own values of every configured header.
			set, remove := callMutation(t, env, "x-caller-sub", "forged", "x-caller-missing", "forged", "x-caller-evil", "forged", "x-api-key", "forged")
			for k, want := range tc.wantSet {
				if set[k] != want {
					t.Errorf("%s = %q, want %q", k, set[k], want)
				}
			}
			for _, k := range tc.wantRemove {
				if !slices.Contains(remove, k) {
					t.Errorf("%s not removed (remove %v)", k, remove)
				}
				if v, ok := set[k]; ok {
					t.Errorf("%s set to %q", k, v)
				}
			}
			for k, v := range set {
				if strings.ContainsAny(v, "\r\n\x00") || strings.Contains(k, "injected") {
					t.Errorf("header %s: %q", k, v)
				}
			}
		})
	}
}

// TestUpstreamAuthCredentialUnreadable: a call whose credential cannot be
// read is answered, never sent without it.
func TestUpstreamAuthCredentialUnreadable(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	err := env.srv.SetUpstreamAuth(upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"echo": {Credential: "gone"}},
		Credentials: map[string]config.CredentialSource{"gone": {File: filepath.Join(t.TempDir(), "missing")}}})
	if err != nil {
		t.Fatal(err)
	}
	ir := callEcho(t, env)
	if ir == nil || !strings.Contains(string(ir.GetBody()), `"isError":true`) || strings.Contains(string(ir.GetBody()), "missing") {
		t.Fatalf("got %v, want an isError result that does not name the file", ir)
	}
	for range 100 {
		if outcomeSeries(t, env.reg)["call/echo/"+callNoCredentials] == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("no call counted as %s: %v", callNoCredentials, outcomeSeries(t, env.reg))
}

// callEcho calls echo on /mcp/core and returns the gateway's own answer,
// if it gave one.
func callEcho(t *testing.T, env *testEnv) *extprocv3.ImmediateResponse {
	t.Helper()
	body := callReq("echo", `{}`)
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body))...))
	ir := v.send(reqBody(body)).GetImmediateResponse()
	v.close()
	return ir
}

// TestUpstreamAuthOAuthFailures: a call whose token cannot be obtained is
// answered with a tool error naming the service and the reason class, and
// never sent as the gateway: tokenExchange without an authenticated
// caller, and an authorization server that is down.
func TestUpstreamAuthOAuthFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/token"
	ln.Close()
	t.Setenv("TOOLMESH_TEST_OAUTH_SECRET", "the-secret")
	creds := map[string]config.CredentialSource{"gw": {Env: "TOOLMESH_TEST_OAUTH_SECRET"}}
	for _, tc := range []struct {
		name, mode, want string
	}{
		{"exchange without a caller", upstreamcred.ModeTokenExchange, "the Tool Service echo is not available: it acts for an authenticated caller, and the request has none"},
		{"server down", upstreamcred.ModeClientCredentials, "the Tool Service echo is not available: the authorization server did not issue a token for it (unavailable)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, Config{}, testTable(t))
			if err := env.srv.SetUpstreamAuth(upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"echo": {OAuth: &upstreamcred.OAuth{
				Mode: tc.mode, TokenURL: down, ClientID: "gw", ClientSecret: "gw"}}}, Credentials: creds}); err != nil {
				t.Fatal(err)
			}
			ir := callEcho(t, env)
			if ir == nil || !strings.Contains(string(ir.GetBody()), tc.want) || strings.Contains(string(ir.GetBody()), "the-secret") {
				t.Fatalf("got %v, want an isError result with %q", ir, tc.want)
			}
		})
	}
}

// TestSetUpstreamAuthKeepsLastGood: an invalid configuration is refused
// and the one in force stays.
func TestSetUpstreamAuthKeepsLastGood(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	t.Setenv("TOOLMESH_TEST_ECHO_KEY", "env-secret")
	good := upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"echo": {Credential: "k", Header: "x-api-key"}},
		Credentials: map[string]config.CredentialSource{"k": {Env: "TOOLMESH_TEST_ECHO_KEY"}}}
	if err := env.srv.SetUpstreamAuth(good); err != nil {
		t.Fatal(err)
	}
	if err := env.srv.SetUpstreamAuth(upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"echo": {Credential: "undefined"}}}); err == nil {
		t.Fatal("an undefined credential was accepted")
	}
	if set, _ := callMutation(t, env); set["x-api-key"] != "env-secret" {
		t.Errorf("x-api-key = %q, want the last good configuration's", set["x-api-key"])
	}
}

// TestFederatedUpstreamAuth: upstreamAuth applies to a federated server,
// wins over its Portal headers, and forwarded claims stay out of the
// shared session's handshake.
func TestFederatedUpstreamAuth(t *testing.T) {
	// A legacy server that records the x-caller-sub of each handshake.
	ls := newLegacyServer(t)
	var mu sync.Mutex
	var initSub []string
	inner := ls.Config.Handler
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"method":"initialize"`) {
			mu.Lock()
			initSub = append(initSub, r.Header.Get("X-Caller-Sub"))
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)

	env := newTestEnv(t, Config{Upstreams: fakeUpstreams{map[string]string{"Authorization": "Bearer portal-secret"}}},
		federatedRoutes(t, rec.URL))
	t.Setenv("TOOLMESH_TEST_GH", "config-secret")
	if err := env.srv.SetUpstreamAuth(upstreamcred.Auth{
		Services: map[string]upstreamcred.ServiceAuth{
			"gh":  {Credential: "gh", Prefix: "Bearer ", ForwardClaims: map[string]string{"x-caller-sub": "sub"}},
			"old": {ForwardClaims: map[string]string{"x-caller-sub": "sub"}},
		},
		Credentials: map[string]config.CredentialSource{"gh": {Env: "TOOLMESH_TEST_GH"}}}); err != nil {
		t.Fatal(err)
	}
	env.srv.callerSeam = func(*corev3.HeaderMap) *identity.Caller {
		return &identity.Caller{Authenticated: true, Subject: "alice", Claims: map[string]any{"sub": "alice"}}
	}
	route := func(body string) map[string]string {
		t.Helper()
		w := env.open(t)
		defer w.close()
		w.send(reqHeaders(false, post("/mcp/fed", len(body))...))
		r := w.send(reqBody(body))
		if r.GetRequestBody() == nil {
			t.Fatalf("not routed: %v", r)
		}
		return setOf(t, r.GetRequestBody().GetResponse().GetHeaderMutation())
	}

	set := route(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gh_search","arguments":{}}}`)
	if set["authorization"] != "Bearer config-secret" || set["x-caller-sub"] != "alice" {
		t.Errorf("gh: authorization %q, x-caller-sub %q; want the config file's credential and the claim", set["authorization"], set["x-caller-sub"])
	}

	// "old" forwards the client's Authorization (forwardAuthorization) and
	// gets the claim on the call, but its shared session's handshake
	// carries no claim.
	set = route(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`)
	if set["x-caller-sub"] != "alice" || set["authorization"] != "Bearer s3cret-token" {
		t.Errorf("old: x-caller-sub %q, authorization %q", set["x-caller-sub"], set["authorization"])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(initSub) != 1 || initSub[0] != "" {
		t.Errorf("handshakes carried x-caller-sub %q, want one handshake without it", initSub)
	}
}

// TestRuntimeCarriesOAuthClients: a Runtime put in force builds the token
// clients of its upstreamAuth, an update of another part keeps them, and
// a new upstreamAuth keeps those of unchanged entries.
func TestRuntimeCarriesOAuthClients(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	creds := map[string]config.CredentialSource{"s": {Env: "TOOLMESH_TEST_OAUTH_SECRET"}}
	entry := func(client string) upstreamcred.ServiceAuth {
		return upstreamcred.ServiceAuth{OAuth: &upstreamcred.OAuth{Mode: upstreamcred.ModeClientCredentials, Issuer: "https://as.example.com", ClientID: client, ClientSecret: "s"}}
	}
	if err := env.srv.SetUpstreamAuth(upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"a": entry("gw"), "b": entry("gw")}, Credentials: creds}); err != nil {
		t.Fatal(err)
	}
	first := env.srv.Runtime().UpstreamAuth
	if first.Client("a") == nil {
		t.Fatal("no client built with the Runtime")
	}
	env.srv.SetBodyLimits(BodyLimits{Default: 1 << 20})
	if got := env.srv.Runtime().UpstreamAuth; got.Client("a") != first.Client("a") || got.Client("b") != first.Client("b") {
		t.Error("an update of the body limits rebuilt the token clients")
	}
	if err := env.srv.SetUpstreamAuth(upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"a": entry("gw"), "b": entry("other")}, Credentials: creds}); err != nil {
		t.Fatal(err)
	}
	if got := env.srv.Runtime().UpstreamAuth; got.Client("a") != first.Client("a") || got.Client("b") == first.Client("b") {
		t.Error("a new upstreamAuth did not keep the unchanged client or kept the changed one")
	}
}
