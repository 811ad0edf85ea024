package extproc

import (
	"encoding/json"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// withSearchRoute adds route "search" to federatedRoutes: search mode over
// the federated server "gh", with its resources, templates and prompts.
func withSearchRoute(t *testing.T, routes testRoutes) testRoutes {
	t.Helper()
	_, man, _ := routes["/mcp/fed"].snap.MCPService("gh")
	def := registry.Route{Key: "search", Catalog: &registry.Catalog{Mode: registry.ModeSearch}, ToolServices: []registry.ToolService{
		{Name: "gh", URL: "https://gh.example/v1/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "gh_"}}}
	routes["/mcp/search"] = testRoute{key: "search", snap: buildSnapshot(t, def, map[string]*registry.Manifest{"gh": {
		Tools: []registry.ManifestTool{{Name: "search", InputSchema: json.RawMessage(`{"type":"object"}`)}}, MCP: man}})}
	return routes
}

// answerOf sends one request's headers and body and describes what the
// gateway did with it: the ImmediateResponse it answered with, or the body
// and upstream cluster it routed.
func answerOf(t *testing.T, env *testEnv, path, body string, extra ...string) string {
	t.Helper()
	v := env.open(t)
	defer v.close()
	hr := v.send(reqHeaders(false, post(path, len(body), extra...)...))
	if im := hr.GetImmediateResponse(); im != nil {
		return "answered " + im.GetStatus().GetCode().String() + " " + string(im.GetBody())
	}
	r := v.send(reqBody(body))
	if im := r.GetImmediateResponse(); im != nil {
		return "answered " + im.GetStatus().GetCode().String() + " " + string(im.GetBody())
	}
	cr := r.GetRequestBody().GetResponse()
	return "routed to " + setOf(t, cr.GetHeaderMutation())[wire.ClusterHeader] + " " +
		string(cr.GetBodyMutation().GetBody())
}

// TestTracingKeepsFederatedSearchRoute: tracing, even never sampling,
// leaves a search-mode route federating an MCP server as it is: its
// resources are read through the server and initialize advertises them.
func TestTracingKeepsFederatedSearchRoute(t *testing.T) {
	plain := newTestEnv(t, Config{}, withSearchRoute(t, federatedRoutes(t, "http://127.0.0.1:1")))
	traced, _ := tracedEnv(t, Config{}, withSearchRoute(t, federatedRoutes(t, "http://127.0.0.1:1")),
		sdktrace.NeverSample())
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"gh://readme"}}`,
	} {
		want := answerOf(t, plain, "/mcp/search", body)
		if got := traceMembers.ReplaceAllString(answerOf(t, traced, "/mcp/search", body), ""); got != want {
			t.Errorf("%s with tracing\n got %s\nwant %s", body, got, want)
		}
	}
	if got := answerOf(t, traced, "/mcp/search", `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"gh://readme"}}`); !strings.HasPrefix(got, "routed to "+wire.ClusterName("gh")) {
		t.Errorf("resources/read with tracing: %s, want it routed to gh", got)
	}
}
