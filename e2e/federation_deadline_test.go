package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFederatedStreamDeadlineSDK: a go-sdk server's tool that reports
// progress and then never answers, behind a gateway with no setting: the
// route timeout (the Tool Service's requestTimeout, 2s) less a margin is
// the deadline (ADR 0013). The go-sdk client gets the progress
// notification and then, instead of a broken stream at the route timeout,
// a failed tool result; the server's handler sees its request end.
// Stateless, the stream passes unchanged; with sessions, the gateway calls
// the server in its shared session with ids of its own, so the stream is
// remapped on its way. The control: with federatedStreamDeadline off the
// route timeout breaks the stream, which the client reports as an error.
func TestFederatedStreamDeadlineSDK(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		off       bool
	}{
		{name: "stateless server, stream passed unchanged", stateless: true},
		{name: "server with sessions, ids remapped", stateless: false},
		{name: "switched off: the route timeout breaks the stream", stateless: true, off: true},
	} {
		t.Run(tc.name, func(t *testing.T) { stalledSDKCall(t, tc.stateless, tc.off) })
	}
}

func stalledSDKCall(t *testing.T, stateless, off bool) {
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
		var once sync.Once
		release := func() {
			once.Do(func() {
				select {
				case released <- struct{}{}:
				default:
				}
			})
		}
		finished := make(chan struct{})
		go func() {
			select {
			case <-r.Context().Done():
				select {
				case <-finished:
				default:
					release()
				}
			case <-finished:
			}
		}()
		h.ServeHTTP(w, r)
		// net/http cancels a request's context only after its handler
		// returns, unless the connection goes away first: a context done
		// here was ended by the gateway closing the request. A handler
		// that returns because of that (go-sdk's, with sessions) races
		// the goroutine above, which may then see it finished.
		if r.Context().Err() != nil {
			release()
		}
		close(finished)
	}))
	t.Cleanup(func() { close(stop) })

	dir := t.TempDir()
	// The route timeout: the call must end just before it.
	listing := map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "staller", "protocol": "mcp", "url": up.URL, "cluster": map[string]any{"requestTimeout": "2s"}},
	}}}}
	b, _ := json.Marshal(listing)
	portal := filepath.Join(dir, "portal.json")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := "" // no setting: the default deadline
	if off {
		conf = "federatedStreamDeadline: off\n"
	}
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
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
	if off {
		if err == nil {
			t.Fatalf("stall: result %+v, want a transport error (the route timeout's reset)", res)
		}
		return
	}
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
