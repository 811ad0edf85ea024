package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// secretServer is a go-sdk MCP server whose tools answer with a secret:
// "secret" at once, "slow" after a progress notification that carries one
// too.
func secretServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "secrets", Version: "1.0.0"}, nil)
	type none struct{}
	answer := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ssn 123-45-6789"}}}
	sdk.AddTool(s, &sdk.Tool{Name: "secret", Description: "Tells a secret."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return answer, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Reports progress, then tells a secret."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			// A JSON response has no room for it: the error is the
			// transport's, not the tool's.
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "found 123-45-6789"})
			return answer, nil, nil
		})
	return s
}

// TestFederatedResultFilters: the route's result filters (here the
// built-in redact filter) run on a federated server's tools/call results
// as on a native Tool Service's, through the local data plane, whether the
// server answers with JSON or with an event stream (the final event; the
// progress event before it passes as the server sent it), for clients of
// both eras.
func TestFederatedResultFilters(t *testing.T) {
	srv := secretServer()
	jsonSrv := newLoopbackServer(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	sseSrv := newLoopbackServer(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true}))

	dir := t.TempDir()
	listing := map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "json", "protocol": "mcp", "url": jsonSrv.URL, "toolPrefix": "j_"},
		map[string]any{"name": "sse", "protocol": "mcp", "url": sseSrv.URL, "toolPrefix": "s_"},
	}}}}
	b, _ := json.Marshal(listing)
	portal := filepath.Join(dir, "portal.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(`filters:
  definitions:
    - name: ssn
      type: redact
      config: {patterns: ['\b\d{3}-\d{2}-\d{4}\b']}
  defaults: [ssn]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg)

	for _, tc := range []struct{ name, pin string }{
		{"client-2026", ""},
		{"client-legacy", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			progressed := make(chan string, 4)
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, &sdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
					progressed <- req.Params.Message
				},
			})
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: gw.URL + "/mcp/fed", DisableStandaloneSSE: true, MaxRetries: -1},
				&sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			for _, tool := range []string{"j_secret", "s_secret", "j_slow", "s_slow"} {
				params := &sdk.CallToolParams{Name: tool, Arguments: map[string]any{}}
				if strings.HasSuffix(tool, "_slow") {
					params.SetProgressToken("p-" + tool)
				}
				res, err := cs.CallTool(ctx, params)
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				text := ""
				if len(res.Content) == 1 {
					if tc, ok := res.Content[0].(*sdk.TextContent); ok {
						text = tc.Text
					}
				}
				if res.IsError || strings.Contains(text, "123-45-6789") || !strings.HasPrefix(text, "ssn ") {
					t.Errorf("%s: result %q (isError %v), want the ssn redacted", tool, text, res.IsError)
				}
			}
			// The SSE server's progress event passed before its result,
			// untouched: result filters see results only. (The JSON
			// server's progress is dropped by its transport.)
			select {
			case msg := <-progressed:
				if msg != "found 123-45-6789" {
					t.Errorf("progress message %q, want the server's own", msg)
				}
			case <-ctx.Done(): // the handler runs apart from CallTool
				t.Error("no progress notification reached the client")
			}
		})
	}
}
