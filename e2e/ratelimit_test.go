package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// rateLimitedGateway serves route ops whose echo tool is limited to two
// calls per day per caller (anonymous here: by client address).
func rateLimitedGateway(t *testing.T) *gateway {
	t.Helper()
	svc := newToolService(t, "ops", standardTools(""))
	portal := writePortal(t, portalRoute{Key: "ops", Services: []*toolService{svc}})
	cfg := filepath.Join(t.TempDir(), "toolmesh.yaml")
	limits := "rateLimits:\n  routes:\n    ops:\n      - {name: echoes, tools: [echo], by: [caller], requests: 2, per: day}\n"
	if err := os.WriteFile(cfg, []byte(limits), 0o600); err != nil {
		t.Fatal(err)
	}
	return startGateway(t, portal, "--config", cfg)
}

// TestRateLimitedGoSDK: what the official Go SDK client surfaces for a call
// a limit refused, in both eras. Its streamable transport turns an HTTP 429
// into its own *jsonrpc.Error, code -32005 ("rejected by transport") with
// the status text, without reading the body: the gateway's -32029 and
// retryAfterMs do not reach the caller. docs/ratelimit.md says so; this test
// fails when an SDK update changes it.
func TestRateLimitedGoSDK(t *testing.T) {
	gw := rateLimitedGateway(t)
	for _, pin := range []string{"", "2025-11-25"} {
		t.Run("pin="+pin, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint: gw.URL + "/mcp/ops", DisableStandaloneSSE: true, MaxRetries: -1,
			}, &sdk.ClientSessionOptions{ProtocolVersion: pin})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			// Each era's session is a new caller only by era: both come from
			// 127.0.0.1, so the second subtest starts limited already.
			var refusal error
			for i := range 3 {
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
				if err != nil {
					refusal = err
					break
				}
				if res.IsError {
					t.Fatalf("call %d: isError %s", i, textOf(t, res))
				}
			}
			if refusal == nil {
				t.Fatal("three calls of a limit of two per day all succeeded")
			}
			var rpcErr *jsonrpc.Error
			t.Logf("Go SDK (%q) CallTool error for a rate-limited call: %T: %v (errors.As *jsonrpc.Error: %v)",
				cs.InitializeResult().ProtocolVersion, refusal, refusal, errors.As(refusal, &rpcErr))
			if !errors.As(refusal, &rpcErr) || rpcErr.Code != -32005 || !strings.Contains(refusal.Error(), "Too Many Requests") {
				t.Errorf("CallTool error %v, want the SDK's -32005 transport rejection naming Too Many Requests", refusal)
			}
			// tools/list still lists the limited tool.
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(tools.Tools, func(x *sdk.Tool) bool { return x.Name == "echo" }) {
				t.Error("tools/list hides the limited tool")
			}
		})
	}
}

// TestRateLimitedTSClient: what the official TypeScript SDK client
// surfaces for a call a limit refused: an error "Streamable HTTP error:
// Error POSTing to endpoint: BODY" with the gateway's JSON-RPC error as
// BODY.
func TestRateLimitedTSClient(t *testing.T) {
	node := tsClientNode(t)
	gw := rateLimitedGateway(t)
	call := tsCall{Name: "echo", Arguments: map[string]any{"message": "hi"}}
	rep, stderr := runTSClient(t, node, gw.URL+"/mcp/ops", tsPlan{Calls: []tsCall{call, call, call}})
	if len(rep.Calls) != 3 || rep.Calls[0].Error != "" || rep.Calls[1].Error != "" {
		t.Fatalf("calls %+v\nstderr: %s", rep.Calls, stderr)
	}
	got := rep.Calls[2].Error
	t.Logf("TypeScript SDK (%q) callTool error for a rate-limited call: %s", rep.ProtocolVersion, got)
	// The TypeScript SDK's transport puts the response body in the
	// error's message: the JSON-RPC error, code and retryAfterMs, reach
	// the caller as text.
	if !strings.Contains(got, `"code":-32029`) || !strings.Contains(got, `"retryAfterMs":`) {
		t.Errorf("third call: %+v, want the gateway's JSON-RPC error in the message", rep.Calls[2])
	}
	if !slices.Contains(rep.Tools, "echo") {
		t.Errorf("tools %v hide the limited tool", rep.Tools)
	}
}
