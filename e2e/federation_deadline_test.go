package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFederatedStreamDeadlineSDK: a go-sdk server's tool that reports
// progress and then never answers, behind a gateway with
// federatedStreamTimeout below the route timeout (ADR 0013). The go-sdk
// client gets the progress notification and then, instead of a broken
// stream at the route timeout, a failed tool result; the server's handler
// sees its request end. Stateless, the stream passes unchanged; with
// sessions, the gateway calls the server in its shared session with ids of
// its own, so the stream is remapped on its way.
func TestFederatedStreamDeadlineSDK(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		name := "stateless server, stream passed unchanged"
		if !stateless {
			name = "server with sessions, ids remapped"
		}
		t.Run(name, func(t *testing.T) { stalledSDKCall(t, stateless) })
	}
}

func stalledSDKCall(t *testing.T, stateless bool) {
	// The tool waits until the test ends: whether go-sdk cancels a tool's
	// context when its HTTP request goes away is not what is tested here.
	stop := make(chan struct{})
	srv := sdk.NewServer(&sdk.Implementation{Name: "staller", Version: "1.0.0"}, nil)
	type none struct{}
	sdk.AddTool(srv, &sdk.Tool{Name: "stall", Description: "Reports progress, then hangs."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "working"})
			select {
			case <-ctx.Done():
			case <-stop:
			}
			return nil, nil, errors.New("stopped")
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: stateless})
	// released reports a request whose connection went away while its
	// handler still ran: the gateway closed the upstream request.
	released := make(chan struct{}, 4)
	up := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		finished := make(chan struct{})
		defer close(finished)
		go func() {
			select {
			case <-r.Context().Done():
				select {
				case <-finished:
				default:
					released <- struct{}{}
				}
			case <-finished:
			}
		}()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(stop) })

	dir := t.TempDir()
	// The route timeout is a minute: the call must end long before it.
	listing := map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "staller", "protocol": "mcp", "url": up.URL, "cluster": map[string]any{"requestTimeout": "60s"}},
	}}}}
	b, _ := json.Marshal(listing)
	portal := filepath.Join(dir, "portal.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("federatedStreamTimeout: 1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg)

	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	progressed := make(chan string, 4)
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			progressed <- req.Params.Message
		},
	})
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: gw.URL + "/mcp/fed", DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "stall", Arguments: map[string]any{}}
	params.SetProgressToken("p-stall")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("stall: %v (want a failed tool result, not a transport error)", err)
	}
	text := ""
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*sdk.TextContent); ok {
			text = tc.Text
		}
	}
	if !res.IsError || !strings.HasPrefix(text, "tool stall failed: timeout") {
		t.Errorf("result %q (isError %v), want the gateway's timeout result", text, res.IsError)
	}
	select {
	case msg := <-progressed:
		if msg != "working" {
			t.Errorf("progress message %q", msg)
		}
	case <-ctx.Done():
		t.Error("no progress notification reached the client")
	}
	select {
	case <-released:
	case <-ctx.Done():
		t.Error("the upstream request was not closed")
	}
}
