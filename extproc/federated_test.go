package extproc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// federatedTable is route "fed": a native Tool Service and a federated MCP
// server whose tool is listed as gh_search.
func federatedTable(t *testing.T) testRoutes {
	route := registry.Route{Key: "fed", ToolServices: []registry.ToolService{
		{Name: "echo", URL: "http://echo.tools.svc:9000"},
		{Name: "gh", URL: "https://gh.example/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "gh_"},
	}}
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{
		"echo": {Tools: []registry.ManifestTool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
		"gh": {Tools: []registry.ManifestTool{{Name: "search", InputSchema: json.RawMessage(`{"type":"object"}`)}},
			MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20260728}},
	})
	return testRoutes{"/mcp/fed": {key: "fed", snap: snap}}
}

// TestFederatedToolListedNotRouted: a federated tool is in tools/list under
// its prefixed name, and a call to it is answered with an isError result,
// never routed to the service's cluster as a native call, in either era.
func TestFederatedToolListedNotRouted(t *testing.T) {
	env := newTestEnv(t, Config{}, federatedTable(t))

	v := env.open(t)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	v.send(reqHeaders(false, post("/mcp/fed", len(list))...))
	im := v.send(reqBody(list)).GetImmediateResponse()
	if im == nil || !strings.Contains(string(im.GetBody()), `"name":"gh_search"`) {
		t.Fatalf("tools/list = %s, want gh_search listed", im.GetBody())
	}
	v.close()

	for _, tc := range []struct {
		name  string
		extra []string
		body  string
		id    string
	}{
		{name: "legacy", id: "5",
			body: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gh_search","arguments":{"q":"x"}}}`},
		{name: "stateless", id: `"s"`, extra: stateless("tools/call", "gh_search"),
			body: `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"gh_search","arguments":{},` + meta2026 + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			hr := v.send(reqHeaders(false, post("/mcp/fed", len(tc.body), tc.extra...)...)).GetRequestHeaders().GetResponse()
			if hr == nil {
				t.Fatal("want a HeadersResponse")
			}
			if set := setOf(t, hr.GetHeaderMutation()); set[registry.ClusterHeader] != "" || hr.GetClearRouteCache() {
				t.Errorf("headers phase routed the federated call: set %v clear_route_cache %v", set, hr.GetClearRouteCache())
			}
			im := v.send(reqBody(tc.body)).GetImmediateResponse()
			if im == nil {
				t.Fatal("want an ImmediateResponse: a federated call must not be routed as a native one")
			}
			if im.GetStatus().GetCode() != 200 || im.GetDetails() != detailsFederatedUnavailable {
				t.Errorf("status %v details %q", im.GetStatus().GetCode(), im.GetDetails())
			}
			res := decodeResult(t, im.GetBody(), tc.id)
			if !res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, "federated MCP server gh") ||
				!strings.Contains(res.Content[0].Text, "not available yet") {
				t.Errorf("result %s", im.GetBody())
			}
			v.close()
		})
	}
	labels := map[string]string{"route": "fed", "tool": "gh_search", "outcome": callFederatedUnavailable}
	if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", labels); got != 2 {
		t.Errorf("tool_calls_total%v = %v, want 2", labels, got)
	}
}
