package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKToolListChanged: the official Go SDK client, with a
// ToolListChangedHandler, hears of a Tool Service's new tool through the
// gateway: pinned to 2025-11-25 it opens the standalone GET stream, by
// default (2026-07-28) a subscriptions/listen stream. Both only because the
// gateway declares tools.listChanged with notificationsListen set.
func TestGoSDKToolListChanged(t *testing.T) {
	svc := newToolService(t, "alpha", standardTools(""))
	portal := writePortal(t, portalRoute{Key: "core", Services: []*toolService{svc}})
	gw := startGateway(t, portal, "--notifications-listen", freePort(t), "--refresh-interval", "200ms")
	tools := standardTools("")
	for _, tc := range []struct{ name, pin, era string }{
		{"legacy-get-stream", "2025-11-25", "legacy"},
		{"subscriptions-listen", "", "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			changed := make(chan struct{}, 8)
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, &sdk.ClientOptions{
				ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
			})
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: gw.URL + "/mcp/core", MaxRetries: -1},
				&sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Tools == nil || !caps.Tools.ListChanged {
				t.Fatalf("capabilities %+v, want tools.listChanged", caps)
			}
			before, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The stream is open once the gateway counts it; change only then.
			eventually(t, 30*time.Second, "the stream to open", func() bool {
				_, body := gw.get(t, "/metrics")
				return openStreams(string(body), tc.era) >= 1
			})
			// Each subtest adds one tool to the list the gateway already serves.
			tools = append(tools, map[string]any{"name": "extra_" + tc.name, "version": "1",
				"description": "A tool added while the client listens.", "inputSchema": map[string]any{"type": "object"}})
			svc.setTools(tools)
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal("no notifications/tools/list_changed reached the client")
			}
			after, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(after.Tools) != len(before.Tools)+1 {
				t.Errorf("tools/list after the notification: %d tools, want %d", len(after.Tools), len(before.Tools)+1)
			}
		})
	}
}

// openStreams is toolmesh_listeners{era} on /metrics.
func openStreams(metrics, era string) float64 {
	prefix := `toolmesh_listeners{era="` + era + `"} `
	for line := range strings.SplitSeq(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
