package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKClientSessionEnd: a legacy go-sdk client gets a session of its
// own on a federated go-sdk server (which declares logging, ADR 0022);
// when the client closes its session (go-sdk sends DELETE with the
// gateway's Mcp-Session-Id), the gateway ends that upstream session and
// the server no longer has it, while the gateway's shared session, which
// a sessionless client's call opened, stays (ADR 0027).
func TestGoSDKClientSessionEnd(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "kept", Version: "1.0.0"}, nil)
	var mu sync.Mutex
	on := map[string]string{} // the upstream session each call came on, by its text
	sdk.AddTool(srv, &sdk.Tool{Name: "echo"}, func(_ context.Context, req *sdk.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*sdk.CallToolResult, any, error) {
		mu.Lock()
		on[in.Text] = req.Session.ID()
		mu.Unlock()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
	})
	up := newLoopbackServer(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	sessions := func() []string {
		var ids []string
		for ss := range srv.Sessions() {
			ids = append(ids, ss.ID())
		}
		return ids
	}
	sessionOf := func(text string) string {
		mu.Lock()
		defer mu.Unlock()
		return on[text]
	}

	b, _ := json.Marshal(map[string]any{"routes": []any{map[string]any{"key": "kept", "toolServices": []any{
		map[string]any{"name": "kept", "protocol": "mcp", "url": up.URL}}}}})
	portal := filepath.Join(t.TempDir(), "portal.json")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--refresh-interval", "1h")

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: gw.URL + "/mcp/kept", MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if !strings.HasPrefix(cs.ID(), "tms1.") {
		t.Fatalf("the gateway gave the client session %q, want a sealed token", cs.ID())
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "own"}})
	if err != nil || res.IsError {
		t.Fatalf("call on the client's session: %+v, %v", res, err)
	}
	// A sessionless client's call goes on the gateway's shared session.
	if r := postMCP(t, gw.URL, "kept", "legacy", 7, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "shared"}}); r.Error != nil {
		t.Fatalf("sessionless call: %+v", r.Error)
	}
	own, shared := sessionOf("own"), sessionOf("shared")
	if own == "" || shared == "" || own == shared {
		t.Fatalf("the client's call came on upstream session %q, the sessionless one on %q: want two", own, shared)
	}

	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	eventually(t, 30*time.Second, "the client's upstream session to end", func() bool {
		return !slices.Contains(sessions(), own)
	})
	if !slices.Contains(sessions(), shared) {
		t.Errorf("the shared session %q ended with the client's", shared)
	}
}
