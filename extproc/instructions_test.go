package extproc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// TestInitializeDiscoverInstructions: a route's initialize (legacy era)
// and server/discover (2026-07-28) answers carry the route's own
// instructions and its MCP servers', labelled by service.
func TestInitializeDiscoverInstructions(t *testing.T) {
	route := registry.Route{Key: "fed", Instructions: "Ask before writing.", ToolServices: []registry.ToolService{
		{Name: "echo", URL: "http://echo.tools.svc:9000"},
		{Name: "gh", URL: "https://gh.example/v1/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "gh_"},
		{Name: "old", URL: "http://old.example/mcp", Protocol: registry.ProtocolMCP},
	}}
	obj := json.RawMessage(`{"type":"object"}`)
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{
		"echo": {Tools: []registry.ManifestTool{{Name: "echo", InputSchema: obj}}},
		"gh": {Tools: []registry.ManifestTool{{Name: "search", InputSchema: obj}},
			MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20260728, Instructions: "Search before you open issues."}},
		"old": {Tools: []registry.ManifestTool{{Name: "legacy_tool", InputSchema: obj}},
			MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20251125, Instructions: "Legacy <rules> & more."}},
	})
	env := newTestEnv(t, Config{}, testRoutes{"/mcp/fed": {key: "fed", snap: snap}})
	want := "Ask before writing.\n\n" +
		"## MCP server \"gh\" (its tools and prompts are named with the prefix \"gh_\" here)\nSearch before you open issues.\n\n" +
		"## MCP server \"old\"\nLegacy <rules> & more."
	for _, tc := range []struct {
		era, body string
		headers   []string
	}{
		{"legacy", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, nil},
		{"2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta2026 + `}}`, stateless("server/discover")},
	} {
		v := env.open(t)
		v.send(reqHeaders(false, post("/mcp/fed", len(tc.body), tc.headers...)...))
		im := v.send(reqBody(tc.body)).GetImmediateResponse()
		v.close()
		var doc struct {
			Result struct {
				Instructions *string `json:"instructions"`
			} `json:"result"`
		}
		if err := json.Unmarshal(im.GetBody(), &doc); err != nil || doc.Result.Instructions == nil {
			t.Errorf("%s: %s (%v): no instructions", tc.era, im.GetBody(), err)
			continue
		}
		if got := *doc.Result.Instructions; got != want {
			t.Errorf("%s: instructions\n%q\nwant\n%q", tc.era, got, want)
		}
		if !strings.Contains(string(im.GetBody()), `"tools"`) {
			t.Errorf("%s: no capabilities: %s", tc.era, im.GetBody())
		}
	}
}
