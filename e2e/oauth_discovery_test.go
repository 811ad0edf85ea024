package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"
)

// The secret of the gateway's client at the authorization server: long
// enough that finding it in an output is no coincidence.
const oauthE2ESecret = "gateway-client-secret-7c1e9a40"

// TestOAuthThroughGateway: a caller authenticated at the gateway by a token
// of the authorization server calls a tool of a federated MCP server
// protected by OAuth (a go-sdk server behind the SDK's bearer check) whose
// upstreamAuth is tokenExchange. The gateway's listing uses its own client
// credentials token; the call carries the caller's token exchanged for the
// server, whose sub is the caller's and whose aud is the server's. When the
// server then refuses every token it accepted, the next call's 401 evicts
// the cached token and the gateway sends the call once more with a new
// one. No token or secret appears in the gateway's log, /metrics, /health,
// the console's state or the exported trace spans.
//
// "discovered": the entry names no authorization server. The listing gets
// 401 with resource_metadata, and the gateway reads the server's protected
// resource metadata (RFC 9728), then its authorization server's metadata
// (RFC 8414).
func TestOAuthThroughGateway(t *testing.T) {
	t.Run("configured", func(t *testing.T) { oauthThroughGateway(t, false) })
	t.Run("discovered", func(t *testing.T) { oauthThroughGateway(t, true) })
}

func oauthThroughGateway(t *testing.T, discovered bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mcpURL := "http://" + ln.Addr().String() + "/mcp"
	as := startAuthServer(t, oauthE2ESecret, mcpURL)
	up := startProtectedMCP(t, ln, as.Issuer)
	t.Setenv("TOOLMESH_E2E_OAUTH_SECRET", oauthE2ESecret)
	recv := startOTLPReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")

	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	b, _ := json.Marshal(map[string]any{"routes": []any{map[string]any{"key": "core", "toolServices": []any{
		map[string]any{"name": "prot", "protocol": "mcp", "url": mcpURL}}}}})
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "toolmesh.yaml")
	issuer := "issuer: " + as.Issuer
	if discovered { // no issuer, no tokenUrl
		issuer = "# the authorization server is discovered"
	}
	doc := fmt.Sprintf(`resourceBase: https://mcp.example.com
auth:
  default:
    issuers: [{issuer: %[1]s, algorithms: [RS256]}]
    audience: %[2]s
credentials:
  gateway-secret: {env: TOOLMESH_E2E_OAUTH_SECRET}
upstreamAuth:
  prot:
    oauth:
      mode: tokenExchange
      %[5]s
      clientId: %[3]s
      clientSecret: gateway-secret
      audience: [%[4]s]
      resource: [%[4]s]
`, as.Issuer, oauthAppID, oauthGatewayID, mcpURL, issuer)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg, "--tracing", "--tracing-endpoint", "http://"+recv.addr, "--tracing-protocol", "grpc")

	alice := as.userToken(t, "test-user@127.0.0.1") // id1, aud app
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw.URL + "/mcp/core", DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: &bearerTransport{token: alice, base: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, tail(gw.logs.String(), 40))
	}
	defer cs.Close()
	listed := false
	for !listed && ctx.Err() == nil {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		listed = slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "whoami" })
		if !listed {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if !listed {
		t.Fatalf("whoami never listed: the discovery or the listing with the gateway's token failed\n%s", tail(gw.logs.String(), 60))
	}
	if n := as.requests("client_credentials"); n < 1 {
		t.Fatalf("the listing made %d client credentials requests", n)
	}
	whoami := func() map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v\n%s", err, res, tail(gw.logs.String(), 40))
		}
		got, _ := res.StructuredContent.(map[string]any)
		if aud, _ := got["aud"].([]any); got["sub"] != "id1" || !slices.Contains(aud, any(mcpURL)) {
			t.Fatalf("the upstream saw %v, want sub id1 and aud %s", got, mcpURL)
		}
		return got
	}
	whoami()
	exchanges := as.requests("urn:ietf:params:oauth:grant-type:token-exchange")
	if exchanges != 1 {
		t.Fatalf("%d token exchanges for one call, want 1", exchanges)
	}
	whoami() // cached
	if n := as.requests("urn:ietf:params:oauth:grant-type:token-exchange"); n != 1 {
		t.Fatalf("%d token exchanges after two calls, want 1 (cached)", n)
	}

	// The server refuses every token it accepted: the next call's 401
	// evicts the cached one, and the gateway sends the call again with a
	// new exchange, once.
	up.revokeAll()
	whoami()
	if n := as.requests("urn:ietf:params:oauth:grant-type:token-exchange"); n != 2 {
		t.Fatalf("%d token exchanges after the 401, want 2", n)
	}

	_, metrics := gw.get(t, "/metrics")
	if discovered && !strings.Contains(string(metrics), `toolmesh_upstream_oauth_requests_total{grant="resource_discovery",result="ok",service="prot"} 1`) {
		t.Errorf("/metrics does not count the discovery:\n%s", grepLines(string(metrics), "oauth"))
	}
	_, health := gw.get(t, "/health")
	_, console := gw.get(t, "/console/api/state")
	var spans strings.Builder
	eventually(t, 20*time.Second, "the call's spans exported", func() bool {
		s, _ := recv.snapshot()
		return len(s) > 0
	})
	got, _ := recv.snapshot()
	for _, s := range got {
		j, _ := protojson.Marshal(s)
		spans.Write(j)
	}
	tokens := up.accepted()
	if len(tokens) < 3 { // the listing's, the first exchange's, the second's
		t.Fatalf("the upstream accepted %d tokens, want at least 3", len(tokens))
	}
	secrets := append(tokens, alice, oauthE2ESecret)
	for what, out := range map[string]string{"the log": gw.logs.String(), "/metrics": string(metrics), "/health": string(health),
		"the console": string(console), "the trace spans": spans.String()} {
		if out == "" {
			t.Errorf("%s is empty", what)
		}
		for i, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s shows token or secret #%d", what, i)
			}
			// A JWT's signature alone is as good as the token to nobody,
			// but its header and claims would still be a leak.
			if j := strings.LastIndexByte(s, '.'); j > 0 && strings.Contains(out, s[:j]) {
				t.Errorf("%s shows the header and claims of token #%d", what, i)
			}
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestOAuthToolService401: a Tool Service answers 401 to the first client
// credentials token the gateway obtained for it from the authorization
// server. A 401 means the call was not run, so the gateway evicts the
// token, obtains a new one and sends the call once more itself: the
// client gets the Tool Service's answer. A Tool Service that refuses every
// token gets the call twice, the client a tool error, and the second token
// is evicted too.
func TestOAuthToolService401(t *testing.T) {
	svc := newToolService(t, "svc-a", standardTools("a_"))
	as := startAuthServer(t, oauthE2ESecret, svc.srv.URL)
	t.Setenv("TOOLMESH_E2E_OAUTH_SECRET", oauthE2ESecret)
	var mu sync.Mutex
	var seen []string // the tokens of the calls, in order
	var refuseAll atomic.Bool
	refuse := func(h http.Header) bool { // the first token it sees, or every one
		mu.Lock()
		defer mu.Unlock()
		tok := strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
		seen = append(seen, tok)
		return refuseAll.Load() || tok == seen[0]
	}
	tokens := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	svc.refuse.Store(&refuse)
	portal := writePortal(t, portalRoute{Key: "alpha", Services: []*toolService{svc}})
	cfg := filepath.Join(t.TempDir(), "toolmesh.yaml")
	doc := fmt.Sprintf(`credentials:
  gateway-secret: {env: TOOLMESH_E2E_OAUTH_SECRET}
upstreamAuth:
  svc-a:
    oauth:
      mode: clientCredentials
      issuer: %s
      clientId: %s
      clientSecret: gateway-secret
`, as.Issuer, oauthGatewayID)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1.0.0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: gw.URL + "/mcp/alpha", DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func() (*mcp.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a_echo", Arguments: map[string]any{"message": "hi"}})
		if err != nil {
			t.Fatalf("call: %v\n%s", err, tail(gw.logs.String(), 40))
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		return res, text
	}

	res, text := call()
	if res.IsError || text != "hi" {
		t.Fatalf("the call refused once: isError %v, %q\n%s", res.IsError, text, tail(gw.logs.String(), 40))
	}
	if got := tokens(); len(got) != 2 || got[0] == got[1] {
		t.Fatalf("the Tool Service saw %d calls (new token: %v), want the routed call and the one sent again with a new token",
			len(got), len(got) == 2 && got[0] != got[1])
	}
	if n := as.requests("client_credentials"); n != 2 {
		t.Fatalf("%d client credentials requests, want 2 (the refused token evicted once)", n)
	}
	for _, tok := range tokens() {
		if cl := jwtClaims(t, tok); !slices.Contains(audiences(cl), svc.srv.URL) {
			t.Errorf("a token for audiences %v", audiences(cl))
		}
	}

	refuseAll.Store(true)
	res, text = call()
	if !res.IsError || !strings.Contains(text, "the Tool Service svc-a refused the token the gateway obtained for it twice (HTTP 401)") {
		t.Fatalf("the call refused twice: isError %v, %q", res.IsError, text)
	}
	if n := len(tokens()); n != 4 {
		t.Fatalf("the Tool Service saw %d calls, want 4 (refused twice, sent again once)", n)
	}
	refuseAll.Store(false)
	if res, text = call(); res.IsError {
		t.Fatalf("the call after a second 401: %q\n%s", text, tail(gw.logs.String(), 40))
	}
	// The second 401's token was evicted too: a fourth token.
	if n := as.requests("client_credentials"); n != 4 {
		t.Fatalf("%d client credentials requests, want 4", n)
	}
}
