package extproc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/surface"
)

// virtualTable is route core with forecast served as the virtual tool
// weather (days fixed to 3, a hidden units argument, a default lang) and
// echo held back by pinning.
func virtualTable(t testing.TB) testRoutes { return virtualRoute(t, nil) }

// virtualRoute is virtualTable's route with catalog c (nil: the default).
func virtualRoute(t testing.TB, c *registry.Catalog) testRoutes {
	const schema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1},"units":{"type":"string"},"lang":{"type":"string"}},"required":["city"]}`
	route := registry.Route{Key: "core", Catalog: c, ToolServices: []registry.ToolService{
		{Name: "weather", URL: "http://weather.tools.svc:8080/api"},
		{Name: "echo", URL: "http://echo.tools.svc:9000"},
	}, Surface: &registry.RouteSurface{
		Held: []registry.HeldTool{{Service: "echo", Tool: "echo", Hash: "sha256:new", Accepted: "sha256:old"}},
		Overrides: map[string]surface.Override{"forecast": {Name: "weather", Arguments: map[string]surface.Argument{
			"days":  {Fix: json.RawMessage(`3`)},
			"units": {Hide: true},
			"lang":  {Default: json.RawMessage(`"en"`)},
		}}},
	}}
	manifests := map[string]*registry.Manifest{
		"weather": {Tools: []registry.ManifestTool{{Name: "forecast", Version: "1.2.0", Description: "Forecast the weather of a city.", InputSchema: json.RawMessage(schema)}}},
		"echo":    {Tools: []registry.ManifestTool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
	}
	return testRoutes{"/mcp/core": {key: "core", snap: buildSnapshot(t, route, manifests)}}
}

func TestVirtualToolCall(t *testing.T) {
	env := newTestEnv(t, Config{}, virtualTable(t))
	// The Tool Service gets the real name (x-toolmesh-tool, :path) and the
	// real arguments, in both eras.
	for _, tc := range []struct {
		name, body, args, id, era string
		extra                     []string
		headerRoute               bool
	}{
		{name: "legacy", id: "1", era: "legacy",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"weather","arguments":{"city":"Oslo"}}}`,
			args: `{"city":"Oslo","days":3,"lang":"en"}`},
		{name: "stateless", id: `"s"`, era: mcp.Version20260728, extra: stateless("tools/call", "weather"), headerRoute: true,
			body: `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"weather","arguments":{"city":"Bergen","lang":"nb"},` + meta2026 + `}}`,
			args: `{"city":"Bergen","lang":"nb","days":3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			defer v.close()
			v.send(reqHeaders(false, post("/mcp/core", len(tc.body), tc.extra...)...))
			cr := v.send(reqBody(tc.body)).GetRequestBody().GetResponse()
			if got := string(cr.GetBodyMutation().GetBody()); got != tc.args {
				t.Errorf("upstream body = %s, want %s", got, tc.args)
			}
			set := setOf(t, cr.GetHeaderMutation())
			if set[wire.ToolHeader] != "forecast" || !tc.headerRoute && set[":path"] != "/api/tools/forecast" {
				t.Errorf("upstream headers = %v, want the real tool forecast", set)
			}
		})
	}

	// A fixed or hidden argument the client sends is refused before it
	// goes anywhere; the virtual tool's old name is unknown; a quarantined
	// tool says so.
	for _, tc := range []struct {
		name, body, want string
		rpcError         bool
	}{
		{name: "fixed", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"weather","arguments":{"city":"Oslo","days":9}}}`,
			want: `argument \"days\": not accepted by this tool`},
		{name: "hidden", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"weather","arguments":{"city":"Oslo","units":"K"}}}`,
			want: `argument \"units\": not accepted by this tool`},
		{name: "old name", rpcError: true, body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo"}}}`,
			want: "unknown tool: forecast"},
		{name: "quarantined", rpcError: true, body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
			want: "tool held for review: echo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			defer v.close()
			v.send(reqHeaders(false, post("/mcp/core", len(tc.body))...))
			im := v.send(reqBody(tc.body)).GetImmediateResponse()
			if im == nil {
				t.Fatal("want an ImmediateResponse: nothing may reach the Tool Service")
			}
			body := string(im.GetBody())
			if !strings.Contains(body, tc.want) {
				t.Errorf("answer %s, want %q", body, tc.want)
			}
			r := decodeReply(t, im.GetBody())
			if tc.rpcError != (r.Error != nil) || r.Error != nil && r.Error.Code != mcp.CodeInvalidParams {
				t.Errorf("answer %s: want a JSON-RPC -32602 error %v", body, tc.rpcError)
			}
		})
	}

	// tools/list shows the virtual tool only.
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	v := env.open(t)
	defer v.close()
	v.send(reqHeaders(false, post("/mcp/core", len(body))...))
	list := string(v.send(reqBody(body)).GetImmediateResponse().GetBody())
	if !strings.Contains(list, `"name":"weather"`) || strings.Contains(list, "forecast") || strings.Contains(list, `"echo"`) ||
		strings.Contains(list, "units") || strings.Contains(list, "days") || !strings.Contains(list, `"default":"en"`) {
		t.Errorf("tools/list = %s", list)
	}
}

// TestVirtualToolSeenEverywhere: tools/list shows the virtual tool, its
// schema without the fixed and hidden arguments and with the default, and
// neither the real name nor the held-back tool; a policy sees the virtual
// name: one on weather refuses the call (a deny that reads no argument
// hides the tool, so the call finds no such tool), one on the real name
// forecast never applies.
func TestVirtualToolSeenEverywhere(t *testing.T) {
	env := newTestEnv(t, Config{}, virtualTable(t))
	_, resp := exchangeOnce(t, env, "/mcp/core", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	r := decodeReply(t, resp.GetImmediateResponse().GetBody())
	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Result, &list); err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "weather" {
		t.Fatalf("tools/list = %s (%v), want only the virtual weather", r.Result, err)
	}
	props := list.Tools[0].InputSchema.Properties
	if _, ok := props["days"]; ok {
		t.Errorf("the fixed argument days is in the schema: %s", r.Result)
	}
	if _, ok := props["units"]; ok {
		t.Errorf("the hidden argument units is in the schema: %s", r.Result)
	}
	if !strings.Contains(string(props["lang"]), `"default":"en"`) {
		t.Errorf("lang = %s, want its default shown", props["lang"])
	}

	const call = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"weather","arguments":{"city":"Oslo"}}}`
	for _, tc := range []struct {
		when   string
		denied bool
	}{
		{`tool.name == "weather"`, true},
		{`tool.name == "forecast"`, false},
	} {
		t.Run(tc.when, func(t *testing.T) {
			e := policyEnv(t, virtualTable(t), routePolicies("core", authz.Policy{Name: "no-weather", Effect: "deny", When: tc.when}))
			_, resp := exchangeOnce(t, e, "/mcp/core", call)
			im := resp.GetImmediateResponse()
			if denied := im != nil && strings.Contains(string(im.GetBody()), "unknown tool: weather"); denied != tc.denied {
				t.Errorf("policy when %s: denied %v, want %v (answer %v)", tc.when, denied, tc.denied, resp)
			}
		})
	}
}

// TestVirtualToolInSearchMode: on a search-mode route search_tools offers
// the virtual tool, never the real name or the held-back tool, and
// call_tool of it reaches the Tool Service as the real tool with the real
// arguments.
func TestVirtualToolInSearchMode(t *testing.T) {
	env := newTestEnv(t, Config{}, virtualRoute(t, &registry.Catalog{Mode: "search", Shortlist: 10}))
	_, r := exchangeOnce(t, env, "/mcp/core", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"weather of a city"}}}`)
	res := decodeResult(t, r.GetImmediateResponse().GetBody(), "1")
	var sc struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(res.StructuredContent, &sc); err != nil || len(sc.Tools) != 1 || sc.Tools[0].Name != "weather" {
		t.Fatalf("search_tools = %s (%v), want only the virtual weather", res.StructuredContent, err)
	}
	_, r = exchangeOnce(t, env, "/mcp/core", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"weather","arguments":{"city":"Oslo"}}}}`)
	cr := r.GetRequestBody().GetResponse()
	if got := string(cr.GetBodyMutation().GetBody()); got != `{"city":"Oslo","days":3,"lang":"en"}` {
		t.Errorf("call_tool weather: upstream body %s, want the real arguments (answer %v)", got, r)
	}
	if set := setOf(t, cr.GetHeaderMutation()); set[wire.ToolHeader] != "forecast" {
		t.Errorf("call_tool weather: upstream headers %v, want the real tool forecast", set)
	}
}
