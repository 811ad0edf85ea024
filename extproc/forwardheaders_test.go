package extproc

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// TestClientHeadersAllowList: a routed call removes every client header
// outside the service's allow-list (registry.DefaultForwardHeaders plus its
// forwardHeaders), for a native Tool Service and for 2026-07-28 and legacy
// MCP servers, from clients of both eras: Cookie, X-Api-Key,
// Proxy-Authorization and a client's X-Forwarded-Client-Cert never reach
// them, a header one service forwards reaches only that one, and the
// default headers stay.
func TestClientHeadersAllowList(t *testing.T) {
	ls := newLegacyServer(t)
	obj := json.RawMessage(`{"type":"object"}`)
	route := registry.Route{Key: "fed", ToolServices: []registry.ToolService{
		{Name: "echo", URL: "http://echo.tools.svc:9000", ForwardHeaders: []string{"x-tenant"}},
		{Name: "plain", URL: "http://plain.tools.svc:9000"},
		{Name: "gh", URL: "https://gh.example/v1/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "gh_", ForwardHeaders: []string{"x-tenant"}},
		{Name: "old", URL: ls.URL + "/mcp", Protocol: registry.ProtocolMCP, ForwardHeaders: []string{"x-tenant"}},
	}}
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{
		"echo":  {Tools: []registry.ManifestTool{{Name: "echo", InputSchema: obj}}},
		"plain": {Tools: []registry.ManifestTool{{Name: "plain", InputSchema: obj}}},
		"gh":    {Tools: []registry.ManifestTool{{Name: "search", InputSchema: obj}}, MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20260728}},
		"old":   {Tools: []registry.ManifestTool{{Name: "legacy_tool", InputSchema: obj}}, MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20251125}},
	})
	env := newTestEnv(t, Config{Upstreams: fakeUpstreams{}}, testRoutes{"/mcp/fed": {key: "fed", snap: snap}})
	attack := []string{"cookie", "session=s3cret", "x-api-key", "client-key", "proxy-authorization", "Basic cHJveHk=",
		"x-forwarded-client-cert", "By=spiffe://evil;URI=spiffe://admin", "x-other", "1",
		"x-tenant", "acme", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	mustGo := []string{"cookie", "x-api-key", "proxy-authorization", "x-forwarded-client-cert", "x-other", "authorization"}
	for _, tc := range []struct {
		name, tool string
		forwards   bool // the service lists x-tenant
	}{
		{"native", "echo", true},
		{"native without forwardHeaders", "plain", false},
		{"2026-07-28 MCP server", "gh_search", true},
		{"legacy MCP server", "legacy_tool", true},
	} {
		for _, era := range []string{"legacy", "2026-07-28"} {
			t.Run(tc.name+"/"+era+" client", func(t *testing.T) {
				body := callReq(tc.tool, `{}`)
				extra := slices.Clone(attack)
				if era != "legacy" {
					body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":{},` + meta2026 + `}}`
					extra = append(extra, stateless("tools/call", tc.tool)...)
				}
				v := env.open(t)
				defer v.close()
				v.send(reqHeaders(false, post("/mcp/fed", len(body), extra...)...))
				r := v.send(reqBody(body))
				if r.GetRequestBody() == nil {
					t.Fatalf("not routed: %v", r)
				}
				m := r.GetRequestBody().GetResponse().GetHeaderMutation()
				remove, set := m.GetRemoveHeaders(), setOf(t, m)
				for _, k := range mustGo {
					if !slices.Contains(remove, k) || set[k] != "" {
						t.Errorf("%s: not removed (remove %v, set %q)", k, remove, set[k])
					}
				}
				for _, k := range []string{"traceparent", "user-agent", "x-request-id", "content-type", ":path", "host"} {
					if slices.Contains(remove, k) {
						t.Errorf("%s removed: %v", k, remove)
					}
				}
				if slices.Contains(remove, "x-tenant") == tc.forwards {
					t.Errorf("x-tenant removed = %v, want %v: %v", !tc.forwards, !tc.forwards, remove)
				}
			})
		}
	}
}
