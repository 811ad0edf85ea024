package extproc

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/internal/authtest"
)

// authIDP is an issuer on 127.0.0.1 with one RSA and one P-256 key,
// serving RFC 8414 metadata and its JWKS.
type authIDP struct {
	issuer string
	keys   map[jose.SignatureAlgorithm]*authtest.Key
}

func newAuthIDP(t *testing.T) *authIDP {
	t.Helper()
	rk, ek := authtest.NewRSAKey(t, "r1"), authtest.NewECKey(t, "e1")
	return &authIDP{
		issuer: authtest.NewIssuer(t, "/idp", rk, ek).URL,
		keys:   map[jose.SignatureAlgorithm]*authtest.Key{jose.RS256: rk, jose.ES256: ek},
	}
}

func (p *authIDP) token(t *testing.T, alg jose.SignatureAlgorithm, mod func(map[string]any)) string {
	t.Helper()
	claims := map[string]any{"iss": p.issuer, "sub": "alice", "aud": "https://mcp.example.com/mcp/core",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools"}
	if mod != nil {
		mod(claims)
	}
	return p.keys[alg].Sign(t, claims)
}

func newAuthEnv(t *testing.T, p *authIDP) *testEnv {
	t.Helper()
	a := authn.New(authn.Options{})
	if err := a.Apply("https://mcp.example.com", &authn.Config{
		Default: &authn.Profile{Issuers: []authn.Issuer{{Issuer: p.issuer}}, Scopes: []string{"mcp:tools"}},
		Routes:  map[string]*authn.Profile{"cold": {Mode: authn.ModeOff}},
	}); err != nil {
		t.Fatal(err)
	}
	return newTestEnv(t, Config{Runtime: &Runtime{Auth: a.Current()}}, testTable(t))
}

const coreMetadataURL = `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/core"`

// TestAuthenticationAnswersBeforeTheBody: every refused request is answered
// in the request-headers phase with its status and challenge, so no body is
// read and nothing is routed; a valid token lets the call be routed with
// the caller known.
func TestAuthenticationAnswersBeforeTheBody(t *testing.T) {
	p := newAuthIDP(t)
	e := newAuthEnv(t, p)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	cases := []struct {
		name      string
		headers   []string
		status    int
		challenge string
		result    string
	}{
		{"missing", post("/mcp/core", len(call), "authorization", "<drop>"), 401,
			`Bearer scope="mcp:tools", ` + coreMetadataURL, authn.ResultMissing},
		{"expired", post("/mcp/core", len(call), "authorization", "Bearer "+p.token(t, jose.RS256, func(c map[string]any) {
			c["exp"] = time.Now().Add(-time.Hour).Unix()
		})), 401, `Bearer error="invalid_token", error_description="the token has expired", ` + coreMetadataURL, authn.ResultInvalid},
		{"wrong audience", post("/mcp/core", len(call), "authorization", "Bearer "+p.token(t, jose.ES256, func(c map[string]any) {
			c["aud"] = "https://mcp.example.com/mcp/other"
		})), 401, `Bearer error="invalid_token", error_description="the token is not for this resource", ` + coreMetadataURL, authn.ResultInvalid},
		{"token in query", post("/mcp/core?access_token=query-token-secret", len(call), "authorization", "<drop>"), 400,
			`Bearer error="invalid_request", error_description="access tokens are accepted in the Authorization header only", ` + coreMetadataURL, authn.ResultInvalidRequest},
		{"missing scope", post("/mcp/core", len(call), "authorization", "Bearer "+p.token(t, jose.RS256, func(c map[string]any) {
			c["scope"] = "other"
		})), 403, `Bearer error="insufficient_scope", error_description="the token lacks a required scope", scope="mcp:tools", ` + coreMetadataURL, authn.ResultInsufficientScope},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := e.open(t)
			resp := v.send(reqHeaders(false, tc.headers...))
			ir := resp.GetImmediateResponse()
			if ir == nil {
				t.Fatalf("got %v, want an ImmediateResponse in the headers phase", resp)
			}
			set := setOf(t, ir.GetHeaders())
			if int(ir.GetStatus().GetCode()) != tc.status || set["www-authenticate"] != tc.challenge || ir.GetDetails() != detailsUnauthenticated {
				t.Fatalf("status %d details %q www-authenticate\n  %s\nwant %d\n  %s", ir.GetStatus().GetCode(), ir.GetDetails(),
					set["www-authenticate"], tc.status, tc.challenge)
			}
			r := decodeReply(t, ir.GetBody())
			if string(r.ID) != "null" || r.Error == nil || strings.Contains(string(ir.GetBody()), "eyJ") {
				t.Fatalf("body %s", ir.GetBody())
			}
			v.close()
			if want := `"msg":"audit","event":"authentication","caller":"anonymous","route":"core","decision":"refused","reason":"` + tc.result + `","status":` + strconv.Itoa(tc.status); !strings.Contains(e.logs.String(), want) {
				t.Fatalf("no audit event %s in\n%s", want, e.logs)
			}
			if n := metricValue(t, e.reg, "toolmesh_auth_requests_total", map[string]string{"route": "core", "result": tc.result}); n < 1 {
				t.Fatalf("toolmesh_auth_requests_total{result=%q} = %v", tc.result, n)
			}
		})
	}

	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256} {
		t.Run("valid "+string(alg), func(t *testing.T) {
			v := e.open(t)
			resp := v.send(reqHeaders(false, post("/mcp/core", len(call), "authorization", "Bearer "+p.token(t, alg, nil))...))
			if resp.GetRequestHeaders() == nil {
				t.Fatalf("got %v, want the body to be asked for", resp)
			}
			wantRouted(t, v.send(reqBody(call)), "toolsvc_echo", "/invoke/echo", "echo", "", `{}`, "7", "legacy")
			v.close()
		})
	}
	if !strings.Contains(e.logs.String(), `"caller":"alice"`) {
		t.Fatal("the request log does not name the authenticated caller")
	}
	// The refused query token is in no log line, the debug request log
	// included (it logs the path without its query).
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(e.logs.String(), `"path":"/mcp/core","caller":"anonymous"`) < len(cases) {
		if time.Now().After(deadline) {
			t.Fatalf("no request log of the refused calls in\n%s", e.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(e.logs.String(), "query-token-secret") {
		t.Fatalf("a query-string access_token reached the logs:\n%s", e.logs)
	}
	// A route with mode off needs nothing.
	v := e.open(t)
	resp := v.send(reqHeaders(false, post("/mcp/cold", len(call), "authorization", "<drop>")...))
	if code := resp.GetImmediateResponse().GetStatus().GetCode(); code != 503 {
		t.Fatalf("mode off route: %v", resp)
	}
	v.close()
}

func TestProtectedResourceMetadata(t *testing.T) {
	p := newAuthIDP(t)
	e := newAuthEnv(t, p)
	get := func(path string) *extprocv3.ImmediateResponse {
		v := e.open(t)
		defer v.close()
		return v.send(reqHeaders(true, ":method", "GET", ":path", path, ":authority", "mcp.example.com")).GetImmediateResponse()
	}
	ir := get("/.well-known/oauth-protected-resource/mcp/core")
	want := `{"resource":"https://mcp.example.com/mcp/core","authorization_servers":["` + p.issuer +
		`"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`
	if ir.GetStatus().GetCode() != 200 || string(ir.GetBody()) != want || setOf(t, ir.GetHeaders())["content-type"] != "application/json" {
		t.Fatalf("metadata: %v", ir)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp/cold", "/.well-known/oauth-protected-resource/mcp/nope",
		"/.well-known/oauth-protected-resource/"} {
		if ir := get(path); ir.GetStatus().GetCode() != 404 {
			t.Fatalf("%s: %v", path, ir)
		}
	}
}

// TestAuthResultsDocumented: docs/metrics.md lists exactly the result
// values of toolmesh_auth_requests_total.
func TestAuthResultsDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "#") {
			in = strings.Contains(line, "`toolmesh_auth_requests_total`") && strings.Contains(line, "result")
			continue
		}
		if in && strings.HasPrefix(line, "| `") {
			doc = append(doc, strings.Trim(strings.TrimSpace(strings.Split(line, "|")[1]), "`"))
		}
	}
	want := []string{authn.ResultOK, authn.ResultAnonymous, authn.ResultMissing, authn.ResultInvalid,
		authn.ResultInsufficientScope, authn.ResultInvalidRequest, authn.ResultUnavailable}
	slices.Sort(doc)
	slices.Sort(want)
	if !slices.Equal(doc, want) {
		t.Fatalf("docs/metrics.md documents %q, the code has %q", doc, want)
	}
}

// TestAuthenticationKeepsTheMeshIdentity: a caller already known from the
// connection keeps its mesh identity when a token authenticates it, and
// stays as it is when no token is needed or sent.
func TestAuthenticationKeepsTheMeshIdentity(t *testing.T) {
	p := newAuthIDP(t)
	e := newAuthEnv(t, p)
	const mesh = "spiffe://example.org/ns/agents/sa/planner"
	for _, tc := range []struct {
		name, route, authz string
		wantSub            string
	}{
		{"token", "/mcp/core", "Bearer " + p.token(t, jose.ES256, nil), "alice"},
		{"open route", "/mcp/cold", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := e.srv.newRequest(t.Context())
			kv := []string{":method", "POST", ":path", tc.route}
			if tc.authz != "" {
				kv = append(kv, "authorization", tc.authz)
			}
			x.readHeaders(hdrs(kv...))
			x.caller = &identity.Caller{MeshID: mesh}
			key, _, _ := e.srv.routes.Lookup(tc.route)
			if r := x.authenticate(key); r != nil {
				t.Fatalf("refused: %v", r)
			}
			if x.caller == nil || x.caller.MeshID != mesh || x.caller.Subject != tc.wantSub {
				t.Fatalf("caller = %+v", x.caller)
			}
		})
	}
}
