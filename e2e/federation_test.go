package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// newSDKUpstream is an MCP server written with the official Go SDK, in the
// 2026-07-28 era (stateless), offering add and lookup; /private answers
// only requests with Authorization: Bearer <token>.
func newSDKUpstream(t *testing.T, token string) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "sdk-upstream", Version: "3.0.0"}, nil)
	type in struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two numbers (upstream)."},
		func(ctx context.Context, req *sdk.CallToolRequest, v in) (*sdk.CallToolResult, any, error) {
			return nil, map[string]any{"sum": v.A + v.B}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "lookup", Description: "Look a word up."},
		func(ctx context.Context, req *sdk.CallToolRequest, v struct {
			Word string `json:"word"`
		}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: v.Word}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.Handle("/public/mcp", h)
	mux.Handle("/private/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	return newLoopbackServer(t, mux).URL
}

// TestFederatedMCPServer: a route with a native Tool Service and two
// federated MCP servers (one behind a credential from the config file, with
// a toolPrefix; one without, whose "add" collides with the native one).
// tools/list serves the federated tools in both eras, the collision goes
// to the earlier native service and clash's add is shadowed, /health has a
// line per service, and a call of a federated tool
// reaches its server with the credential.
func TestFederatedMCPServer(t *testing.T) {
	const token = "e2e-federation-token"
	t.Setenv("TOOLMESH_E2E_FED_TOKEN", token)
	native := newToolService(t, "native", standardTools(""))
	up := newSDKUpstream(t, token)
	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	listing := map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "native", "url": native.srv.URL},
		map[string]any{"name": "sdk", "protocol": "mcp", "url": up + "/private/mcp", "toolPrefix": "sdk_",
			"headers": map[string]any{"Authorization": map[string]any{"credential": "sdk-token", "prefix": "Bearer "}}},
		map[string]any{"name": "clash", "protocol": "mcp", "url": up + "/public/mcp"},
	}}}}
	b, _ := json.Marshal(listing)
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("credentials:\n  sdk-token: {env: TOOLMESH_E2E_FED_TOKEN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg)

	for i, era := range eras {
		res := postMCP(t, gw.URL, "fed", era, 10+i, "tools/list", nil).result(t, era)
		var tools []struct{ Name string }
		if err := json.Unmarshal(res["tools"], &tools); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		for _, want := range []string{"add", "echo", "lookup", "sdk_add", "sdk_lookup"} {
			if !slices.Contains(names, want) {
				t.Errorf("%s tools/list %v lacks %s", era, names, want)
			}
		}

		call := postMCP(t, gw.URL, "fed", era, 20+i, "tools/call", map[string]any{"name": "sdk_lookup", "arguments": map[string]any{"word": "x"}}).result(t, era)
		texts, isError, _ := callResult(t, call)
		if isError || len(texts) != 1 || texts[0] != "x" {
			t.Errorf("%s call of sdk_lookup: isError %v %q", era, isError, texts)
		}
	}

	_, body := gw.get(t, "/health")
	var doc struct {
		Registry struct {
			Routes []struct {
				Key       string   `json:"key"`
				Ambiguous []string `json:"ambiguous"`
				Shadowed  []struct{ Kind, Name, Service, Winner string }
				Services  []struct {
					Name, Protocol, Era, ProtocolVersion, Server, LastError string
					Tools                                                   int
				} `json:"services"`
			} `json:"routes"`
		} `json:"registry"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Registry.Routes) != 1 {
		t.Fatalf("/health %s: %v", body, err)
	}
	rt := doc.Registry.Routes[0]
	if len(rt.Ambiguous) != 0 || !slices.ContainsFunc(rt.Shadowed, func(s struct{ Kind, Name, Service, Winner string }) bool {
		return s == struct{ Kind, Name, Service, Winner string }{"tool", "add", "clash", "native"}
	}) || len(rt.Services) != 3 {
		t.Fatalf("/health route %+v", rt)
	}
	for _, s := range rt.Services[1:] {
		if s.Protocol != "mcp" || s.Era != "stateless" || s.ProtocolVersion != "2026-07-28" || s.Server != "sdk-upstream 3.0.0" || s.LastError != "" {
			t.Errorf("/health service line %+v", s)
		}
	}
	if rt.Services[0].Protocol != "toolservice" || rt.Services[1].Tools != 2 || rt.Services[2].Tools != 1 {
		t.Errorf("/health service lines %+v", rt.Services)
	}
}
