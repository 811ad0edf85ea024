package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKApproval: gateway-side approval with the official Go SDK client
// (v1.8.0), which answers an input_required result by itself through its
// elicitation handler and retries with inputResponses and requestState
// (SEP-2322 multi round-trip requests, protocol 2026-07-28).
func TestGoSDKApproval(t *testing.T) {
	tools := standardTools("")
	for _, tool := range tools {
		if tool["name"] == "echo" {
			tool["annotations"] = map[string]any{"destructiveHint": true}
		}
	}
	svc := newToolService(t, "ops", tools)
	portal := writePortal(t, portalRoute{Key: "ops", Services: []*toolService{svc}})
	dir := t.TempDir()
	key := filepath.Join(dir, "approval-k1")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "toolmesh.yaml")
	if err := os.WriteFile(cfg, []byte("approval:\n  keys: [{id: k1, file: "+key+"}]\n  routes:\n    ops: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var asked []string
	connect := func(pin string, answer *sdk.ElicitResult) *sdk.ClientSession {
		t.Helper()
		opts := &sdk.ClientOptions{}
		if answer != nil {
			opts.ElicitationHandler = func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, req.Params.Message)
				mu.Unlock()
				return answer, nil
			}
		}
		c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, opts)
		cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
			Endpoint: gw.URL + "/mcp/ops", DisableStandaloneSSE: true, MaxRetries: -1,
		}, &sdk.ClientSessionOptions{ProtocolVersion: pin})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	args := map[string]any{"message": "rm -rf /srv/data"}

	// Approved: the handler is asked once, the Tool Service called once
	// with the arguments as sent.
	approve := connect("", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}})
	if v := approve.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", v)
	}
	res, err := approve.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args})
	if err != nil || res.IsError || textOf(t, res) != "rm -rf /srv/data" {
		t.Fatalf("approved call: %v %+v", err, res)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Fatalf("Tool Service calls = %d, want 1", n)
	}
	if body := string(*svc.lastBody.Load()); body != `{"message":"rm -rf /srv/data"}` {
		t.Errorf("Tool Service got %s", body)
	}
	mu.Lock()
	if len(asked) != 1 || !strings.Contains(asked[0], `tool "echo"`) || !strings.Contains(asked[0], `rm -rf /srv/data`) {
		t.Errorf("elicitation messages %q", asked)
	}
	mu.Unlock()

	// A tool that needs no approval: no question.
	if res, err := approve.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil || res.IsError {
		t.Fatalf("add: %v %+v", err, res)
	}
	mu.Lock()
	if len(asked) != 1 {
		t.Errorf("asked %d times, want once", len(asked))
	}
	mu.Unlock()
	before := svc.calls.Load()

	// Declined: an isError result, the Tool Service not called.
	decline := connect("", &sdk.ElicitResult{Action: "decline"})
	res, err = decline.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "not approved") {
		t.Fatalf("declined call: %v %+v", err, res)
	}

	// No elicitation handler: the client declares no elicitation and gets
	// the missing-capability error at once.
	plain := connect("", nil)
	_, err = plain.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32021 {
		t.Fatalf("no elicitation: err = %v, want JSON-RPC -32021", err)
	}

	// Legacy era: an isError result that says why.
	legacy := connect("2025-11-25", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}})
	res, err = legacy.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "cannot carry the approval request") {
		t.Fatalf("legacy call: %v %+v", err, res)
	}
	if n := svc.calls.Load(); n != before {
		t.Fatalf("Tool Service calls went from %d to %d without an approval", before, n)
	}
}
