package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkEnv is a gateway with two routes: core (a healthy Tool Service with a
// 1 s request timeout) and flaky (a Tool Service that is stopped once the
// gateway has its snapshot, so calls find it unreachable).
type sdkEnv struct {
	gw    *gateway
	core  *toolService
	flaky *toolService
}

func newSDKEnv(t *testing.T) *sdkEnv {
	t.Helper()
	core := newToolService(t, "alpha", standardTools(""))
	flaky := newToolService(t, "beta", standardTools("b_"))
	portal := writePortal(t,
		portalRoute{Key: "core", Services: []*toolService{core}, Cluster: map[string]any{"requestTimeout": "1s", "connectTimeout": "250ms"}},
		portalRoute{Key: "flaky", Services: []*toolService{flaky}, Cluster: map[string]any{"connectTimeout": "250ms", "maxRetries": 0}},
	)
	gw := startGateway(t, portal)
	flaky.srv.Close()
	return &sdkEnv{gw: gw, core: core, flaky: flaky}
}

func textOf(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestGoSDKClient lists and calls tools with the official MCP Go SDK client,
// once with its default (2026-07-28, server/discover first) and once pinned
// to the legacy 2025-11-25 handshake.
func TestGoSDKClient(t *testing.T) {
	env := newSDKEnv(t)
	for _, tc := range []struct {
		name, pin, wantVersion string
	}{
		{"stateless-default", "", "2026-07-28"},
		{"legacy-pinned", "2025-11-25", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			connect := func(route string) *sdk.ClientSession {
				c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
				cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
					Endpoint: env.gw.URL + "/mcp/" + route, DisableStandaloneSSE: true, MaxRetries: -1,
				}, &sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
				if err != nil {
					t.Fatalf("connect %s: %v", route, err)
				}
				t.Cleanup(func() { cs.Close() })
				return cs
			}
			cs := connect("core")
			if got := cs.InitializeResult().ProtocolVersion; got != tc.wantVersion {
				t.Fatalf("negotiated version = %q, want %q", got, tc.wantVersion)
			}
			if cs.ID() != "" {
				t.Errorf("gateway issued a session id %q; it must stay stateless", cs.ID())
			}

			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range lt.Tools {
				names = append(names, tool.Name)
			}
			want := []string{"add", "denied", "echo", "empty", "fail", "json", "slow"}
			if !slices.Equal(names, want) {
				t.Fatalf("tools = %v, want %v (sorted by name)", names, want)
			}

			call := func(cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
				t.Helper()
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("tools/call %s: %v", name, err)
				}
				return res
			}

			res := call(cs, "add", map[string]any{"a": 2, "b": 3})
			if res.IsError || textOf(t, res) != "5" {
				t.Errorf("add: isError=%v text=%q, want 5", res.IsError, textOf(t, res))
			}
			if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"sum":5}` {
				t.Errorf("add structuredContent = %s", sc)
			}

			res = call(cs, "echo", map[string]any{"message": "héllo"})
			if res.IsError || textOf(t, res) != "héllo" {
				t.Errorf("echo: isError=%v text=%q", res.IsError, textOf(t, res))
			}

			res = call(cs, "json", map[string]any{})
			if res.IsError || !strings.Contains(textOf(t, res), `"temperature":21.5`) {
				t.Errorf("json: isError=%v text=%q", res.IsError, textOf(t, res))
			}
			if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"temperature":21.5,"unit":"C"}` {
				t.Errorf("json structuredContent = %s", sc)
			}

			res = call(cs, "fail", map[string]any{})
			if !res.IsError || !strings.Contains(textOf(t, res), "500") {
				t.Errorf("fail: isError=%v text=%q, want isError naming 500", res.IsError, textOf(t, res))
			}

			res = call(cs, "denied", map[string]any{})
			if !res.IsError || !strings.Contains(strings.ToLower(textOf(t, res)), "permission denied") {
				t.Errorf("denied: isError=%v text=%q, want permission denied", res.IsError, textOf(t, res))
			}

			before := env.core.calls.Load()
			res = call(cs, "add", map[string]any{"a": "two"})
			if !res.IsError || textOf(t, res) == "" {
				t.Errorf("schema-invalid add: isError=%v text=%q", res.IsError, textOf(t, res))
			}
			if env.core.calls.Load() != before {
				t.Errorf("schema-invalid arguments reached the Tool Service")
			}

			res = call(cs, "slow", map[string]any{"ms": 5000})
			if !res.IsError || !strings.Contains(strings.ToLower(textOf(t, res)), "timeout") {
				t.Errorf("slow: isError=%v text=%q, want a timeout", res.IsError, textOf(t, res))
			}

			_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "nope", Arguments: map[string]any{}})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
				t.Errorf("unknown tool: err = %v, want JSON-RPC -32602", err)
			}

			flaky := connect("flaky")
			res = call(flaky, "b_add", map[string]any{"a": 1, "b": 1})
			if !res.IsError || !strings.Contains(strings.ToLower(textOf(t, res)), "unavailable") {
				t.Errorf("unreachable service: isError=%v text=%q, want unavailable", res.IsError, textOf(t, res))
			}
		})
	}
}

// TestMCPGoClient lists and calls tools once with mark3labs/mcp-go's client
// in each era.
func TestMCPGoClient(t *testing.T) {
	env := newSDKEnv(t)
	for _, tc := range []struct {
		name string
		opts []mcpgo.ClientOption
		req  string
	}{
		{"stateless-default", nil, ""},
		{"legacy-pinned", []mcpgo.ClientOption{mcpgo.WithProtocolVersion("2025-11-25")}, "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			tr, err := mcpgotransport.NewStreamableHTTP(env.gw.URL + "/mcp/core")
			if err != nil {
				t.Fatal(err)
			}
			c := mcpgo.NewClient(tr, tc.opts...)
			defer c.Close()
			if err := c.Start(ctx); err != nil {
				t.Fatalf("start: %v", err)
			}
			ir := mcpgomcp.InitializeRequest{}
			ir.Params.ProtocolVersion = tc.req
			ir.Params.ClientInfo = mcpgomcp.Implementation{Name: "e2e-mcpgo", Version: "1.0.0"}
			if _, err := c.Initialize(ctx, ir); err != nil {
				t.Fatalf("initialize: %v", err)
			}
			lt, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if len(lt.Tools) != 7 || lt.Tools[0].Name != "add" {
				t.Fatalf("tools/list returned %d tools, first %q", len(lt.Tools), lt.Tools[0].Name)
			}
			req := mcpgomcp.CallToolRequest{}
			req.Params.Name = "add"
			req.Params.Arguments = map[string]any{"a": 40, "b": 2}
			res, err := c.CallTool(ctx, req)
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			tc0, ok := mcpgomcp.AsTextContent(res.Content[0])
			if res.IsError || !ok || tc0.Text != "42" {
				t.Errorf("add: isError=%v content=%+v", res.IsError, res.Content)
			}
			req.Params.Name = "fail"
			req.Params.Arguments = map[string]any{}
			res, err = c.CallTool(ctx, req)
			if err != nil || !res.IsError {
				t.Errorf("fail: err=%v isError=%v, want an isError result", err, res != nil && res.IsError)
			}
		})
	}
}
