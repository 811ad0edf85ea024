package extproc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// tokenEndpoint stands in for an authorization server's token endpoint in
// this package's tests: client credentials only, issuing tok-1, tok-2, …
// (refuse: invalid_client). The gateway against a real authorization
// server is e2e's TestOAuthToolService401.
type tokenEndpoint struct {
	*httptest.Server
	n      atomic.Int32
	refuse atomic.Bool
}

func newTokenEndpoint(t *testing.T) *tokenEndpoint {
	te := &tokenEndpoint{}
	te.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if te.refuse.Load() || r.PostForm.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d", te.n.Add(1)),
			"token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(te.Close)
	return te
}

// seenRequest is one request a refusingService got.
type seenRequest struct {
	method, path, body string
	header             http.Header
}

// refusingService is a native Tool Service whose answer depends on the
// bearer token of the request: 401 for the tokens refuse names, else
// answer's (hang: no answer until the request is cancelled).
type refusingService struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []seenRequest
	refuse func(token string) bool
	answer func(w http.ResponseWriter, r *http.Request)
}

func newRefusingService(t *testing.T, refuse func(string) bool) *refusingService {
	rs := &refusingService{refuse: refuse, answer: func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"answered":"again"}`)
	}}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rs.mu.Lock()
		rs.seen = append(rs.seen, seenRequest{method: r.Method, path: r.URL.Path, body: string(b), header: r.Header.Clone()})
		rs.mu.Unlock()
		if rs.refuse(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		rs.answer(w, r)
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *refusingService) requests() []seenRequest {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.seen)
}

// echoRoute is route core (/mcp/core) with Tool Service echo at
// svcURL+"/base", whose tool echo is at /invoke/echo.
func echoRoute(svcURL string) registry.Route {
	return registry.Route{Key: "core", PublicPath: "/mcp/core", ToolServices: []registry.ToolService{{Name: "echo", URL: svcURL + "/base"}}}
}

// oauthEnv serves echoRoute(svcURL), whose calls carry client credentials
// tokens of te.
func oauthEnv(t *testing.T, cfg Config, svcURL string, te *tokenEndpoint) *testEnv {
	t.Helper()
	snap := buildSnapshot(t, echoRoute(svcURL), map[string]*registry.Manifest{"echo": {Tools: []registry.ManifestTool{
		{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Path: "/invoke/echo"}}}})
	env := newTestEnv(t, cfg, testRoutes{"/mcp/core": {key: "core", snap: snap}})
	t.Setenv("TOOLMESH_TEST_OAUTH_SECRET", "the-secret")
	if err := env.srv.SetUpstreamAuth(upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"echo": {OAuth: &upstreamcred.OAuth{
		Mode: upstreamcred.ModeClientCredentials, TokenURL: te.URL + "/token", ClientID: "gw", ClientSecret: "gw"}}},
		Credentials: map[string]config.CredentialSource{"gw": {Env: "TOOLMESH_TEST_OAUTH_SECRET"}}}); err != nil {
		t.Fatal(err)
	}
	return env
}

// refusedCall routes a call of echo, answers it with the Tool Service's 401
// and returns what the routing reply set and the response-headers reply.
func refusedCall(t *testing.T, env *testEnv) (map[string]string, *extprocv3.ProcessingResponse) {
	t.Helper()
	body := callReq("echo", `{"message":"hi"}`)
	v := env.open(t)
	defer v.close()
	v.send(reqHeaders(false, post("/mcp/core", len(body), "mcp-protocol-version", "2025-11-25",
		"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x-not-forwarded", "dropped")...))
	r := v.send(reqBody(body))
	if r.GetRequestBody() == nil {
		t.Fatalf("not routed: %v", r)
	}
	set := setOf(t, r.GetRequestBody().GetResponse().GetHeaderMutation())
	return set, v.send(respHeaders(false, ":status", "401", "www-authenticate", `Bearer error="invalid_token"`,
		"content-type", "text/plain", "x-envoy-upstream-service-time", "3"))
}

// replaced is the body of a CONTINUE_AND_REPLACE response-headers reply
// that makes the answer HTTP 200 without the 401's challenge.
func replaced(t *testing.T, r *extprocv3.ProcessingResponse) []byte {
	t.Helper()
	cr := r.GetResponseHeaders().GetResponse()
	if cr.GetStatus() != extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
		t.Fatalf("response headers answered %v, want CONTINUE_AND_REPLACE", r)
	}
	if s := setOf(t, cr.GetHeaderMutation()); s[":status"] != "200" || s["content-type"] != "application/json" {
		t.Errorf("status %q, content type %q", s[":status"], s["content-type"])
	}
	if !slices.Contains(cr.GetHeaderMutation().GetRemoveHeaders(), "www-authenticate") {
		t.Errorf("the 401's challenge reaches the client: remove %v", cr.GetHeaderMutation().GetRemoveHeaders())
	}
	return cr.GetBodyMutation().GetBody()
}

// TestToolService401SentAgain: a Tool Service that refuses the token the
// gateway obtained for it gets the call once more, from the gateway, with a
// new token: the same method, path, body and headers the routed call had,
// the client's forwarded headers included; its answer is the client's
// result.
func TestToolService401SentAgain(t *testing.T) {
	te := newTokenEndpoint(t)
	svc := newRefusingService(t, func(tok string) bool { return tok == "tok-1" })
	env := oauthEnv(t, Config{}, svc.URL, te)

	set, r := refusedCall(t, env)
	if set["authorization"] != "Bearer tok-1" {
		t.Fatalf("routed with authorization %q", set["authorization"])
	}
	res := decodeResult(t, replaced(t, r), "1")
	if res.IsError || !strings.Contains(string(res.StructuredContent)+fmt.Sprint(res.Content), "again") {
		t.Fatalf("result %+v, want the answer to the call sent again", res)
	}
	seen := svc.requests()
	if len(seen) != 1 {
		t.Fatalf("the Tool Service got %d requests from the gateway, want 1", len(seen))
	}
	got := seen[0]
	if got.method != http.MethodPost || got.path != "/base/invoke/echo" || got.body != `{"message":"hi"}` {
		t.Errorf("sent again as %s %s %s", got.method, got.path, got.body)
	}
	if a := got.header.Get("Authorization"); a != "Bearer tok-2" {
		t.Errorf("sent again with authorization %q, want the new token", a)
	}
	for k, v := range set {
		switch k {
		case ":path", "x-toolmesh-cluster", "content-length", "authorization":
			continue
		}
		if g := got.header.Get(k); g != v {
			t.Errorf("%s = %q sent again, %q routed", k, g, v)
		}
	}
	for k, want := range map[string]string{"X-Request-Id": "req-1", "User-Agent": "test", "Mcp-Protocol-Version": "2025-11-25",
		"Accept": "application/json, text/event-stream", "X-Not-Forwarded": "", "Mcp-Method": ""} {
		if g := got.header.Get(k); g != want {
			t.Errorf("client header %s = %q sent again, want %q", k, g, want)
		}
	}
	if n := te.n.Load(); n != 2 {
		t.Errorf("%d tokens issued, want 2", n)
	}
}

// TestToolService401Outcomes: what the client gets when the call sent again
// does not succeed, and when the 401 is not for the gateway's token.
func TestToolService401Outcomes(t *testing.T) {
	t.Run("refused twice", func(t *testing.T) {
		te := newTokenEndpoint(t)
		svc := newRefusingService(t, func(string) bool { return true })
		env := oauthEnv(t, Config{}, svc.URL, te)
		_, r := refusedCall(t, env)
		res := decodeResult(t, replaced(t, r), "1")
		if !res.IsError || len(res.Content) == 0 ||
			!strings.Contains(res.Content[0].Text, "the Tool Service echo refused the token the gateway obtained for it twice (HTTP 401)") {
			t.Fatalf("result %+v", res)
		}
		if n := len(svc.requests()); n != 1 {
			t.Errorf("sent again %d times, want once", n)
		}
		// The second token was evicted too: the next call gets a third.
		if set, _ := callMutation(t, env); set["authorization"] != "Bearer tok-3" {
			t.Errorf("the next call carries %q, want a new token", set["authorization"])
		}
	})
	t.Run("no new token", func(t *testing.T) {
		te := newTokenEndpoint(t)
		svc := newRefusingService(t, func(string) bool { return false })
		env := oauthEnv(t, Config{}, svc.URL, te)
		body := callReq("echo", `{}`)
		v := env.open(t)
		defer v.close()
		v.send(reqHeaders(false, post("/mcp/core", len(body))...))
		v.send(reqBody(body))
		te.refuse.Store(true)
		res := decodeResult(t, replaced(t, v.send(respHeaders(true, ":status", "401"))), "1")
		if !res.IsError || len(res.Content) == 0 ||
			!strings.Contains(res.Content[0].Text, "the Tool Service echo is not available: the authorization server did not issue a token for it (refused: invalid_client)") {
			t.Fatalf("result %+v", res)
		}
		if n := len(svc.requests()); n != 0 {
			t.Errorf("sent again %d times without a token", n)
		}
	})
	t.Run("no answer in time", func(t *testing.T) {
		te := newTokenEndpoint(t)
		svc := newRefusingService(t, func(string) bool { return false })
		svc.answer = func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
		env := oauthEnv(t, Config{UpstreamCallTimeout: time.Second}, svc.URL, te)
		_, r := refusedCall(t, env)
		res := decodeResult(t, replaced(t, r), "1")
		// The token request shares the bound: on a machine too slow to
		// get it in time, that is the timeout reported.
		if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "timeout") {
			t.Fatalf("result %+v, want a timeout", res)
		}
	})
	t.Run("progress stream", func(t *testing.T) {
		te := newTokenEndpoint(t)
		svc := newRefusingService(t, func(tok string) bool { return tok == "tok-1" })
		svc.answer = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, `{"progress":1,"total":2}`+"\n"+`{"result":{"answered":"streamed"}}`+"\n")
		}
		env := oauthEnv(t, Config{}, svc.URL, te)
		_, r := refusedCall(t, env)
		res := decodeResult(t, replaced(t, r), "1")
		if res.IsError || !strings.Contains(string(res.StructuredContent)+fmt.Sprint(res.Content), "streamed") {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("a static credential refused", func(t *testing.T) {
		svc := newRefusingService(t, func(string) bool { return false })
		env := oauthEnv(t, Config{}, svc.URL, newTokenEndpoint(t))
		t.Setenv("TOOLMESH_TEST_STATIC", "static-secret")
		if err := env.srv.SetUpstreamAuth(upstreamcred.Auth{Services: map[string]upstreamcred.ServiceAuth{"echo": {Credential: "k", Prefix: "Bearer "}},
			Credentials: map[string]config.CredentialSource{"k": {Env: "TOOLMESH_TEST_STATIC"}}}); err != nil {
			t.Fatal(err)
		}
		_, r := refusedCall(t, env)
		if r.GetResponseHeaders() == nil || r.GetResponseHeaders().GetResponse().GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
			t.Fatalf("a 401 to a static credential was handled as the gateway's token: %v", r)
		}
		if n := len(svc.requests()); n != 0 {
			t.Errorf("sent again %d times", n)
		}
	})
}

// TestToolService401ThroughDataPlane: through the local data plane, a Tool
// Service that refuses the first token answers the client's call anyway,
// and sees the call twice alike but for the token.
func TestToolService401ThroughDataPlane(t *testing.T) {
	te := newTokenEndpoint(t)
	svc := newRefusingService(t, func(tok string) bool { return tok == "tok-1" })
	env := oauthEnv(t, Config{}, svc.URL, te)
	s := &stack{srv: env.srv, logs: env.logs, front: serveThroughDataPlane(t, env, echoRoute(svc.URL), xds.Options{})}

	code, body := s.call(t, nil, "echo", map[string]string{"X-Request-Id": "req-dp"})
	if code != 200 || strings.Contains(body, `"isError":true`) || !strings.Contains(body, "again") {
		t.Fatalf("tools/call = %d %s\n%s", code, body, s.logs.String())
	}
	seen := svc.requests()
	if len(seen) != 2 {
		t.Fatalf("the Tool Service got %d requests, want 2 (routed, then sent again)", len(seen))
	}
	first, again := seen[0], seen[1]
	if first.header.Get("Authorization") != "Bearer tok-1" || again.header.Get("Authorization") != "Bearer tok-2" {
		t.Errorf("tokens %q then %q", first.header.Get("Authorization"), again.header.Get("Authorization"))
	}
	if first.method != again.method || first.path != again.path || first.body != again.body {
		t.Errorf("routed %s %s %s, sent again %s %s %s", first.method, first.path, first.body, again.method, again.path, again.body)
	}
	for _, k := range []string{"Content-Type", "Accept", "Mcp-Protocol-Version", "X-Request-Id", "X-Toolmesh-Route", "X-Toolmesh-Tool"} {
		if first.header.Get(k) != again.header.Get(k) || first.header.Get(k) == "" {
			t.Errorf("%s: routed %q, sent again %q", k, first.header.Get(k), again.header.Get(k))
		}
	}
}
