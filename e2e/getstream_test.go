package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKResourceUpdatedOnGetStream: a legacy go-sdk client subscribes,
// through the gateway, to a resource of a federated legacy go-sdk server
// (which keeps subscriptions per session, so the client gets its own
// upstream session, ADR 0022); the server's notifications/resources/updated
// for it reaches the client on its standalone GET stream (ADR 0025). A new
// resource on the server (its resources/list_changed) re-lists the route at
// once: the client hears the gateway's resources/list_changed long before
// the hour-long refresh interval.
func TestGoSDKResourceUpdatedOnGetStream(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "watched", Version: "1.0.0"}, &sdk.ServerOptions{
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	doc := func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "v"}}}, nil
	}
	srv.AddResource(&sdk.Resource{URI: "watch://doc", Name: "doc", MIMEType: "text/plain"}, doc)
	up := newLoopbackServer(t, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))

	b, _ := json.Marshal(map[string]any{"routes": []any{map[string]any{"key": "watched", "toolServices": []any{
		map[string]any{"name": "watch", "protocol": "mcp", "url": up.URL}}}}})
	portal := filepath.Join(t.TempDir(), "portal.json")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--notifications-listen", freePort(t), "--refresh-interval", "1h")

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	updated, listChanged := make(chan string, 16), make(chan struct{}, 16)
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) {
			listChanged <- struct{}{}
		},
	})
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: gw.URL + "/mcp/watched", MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("capabilities %+v, want resources.subscribe", caps)
	}
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: "watch://doc"}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	// The client's GET stream is open, and the gateway follows its
	// upstream session, once the gateway counts both.
	eventually(t, 30*time.Second, "the GET stream and its upstream stream to open", func() bool {
		_, body := gw.get(t, "/metrics")
		return openStreams(string(body), "legacy") >= 1 && metricValue(string(body), "toolmesh_notifications_upstream_streams") >= 1
	})
	// go-sdk attaches the upstream GET stream inside its handler, a moment
	// after the gateway counts it: the update is sent again until one
	// arrives (bounded), as a server would on the next change.
	deadline := time.Now().Add(30 * time.Second)
	for got := ""; got == ""; {
		if err := srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "watch://doc"}); err != nil {
			t.Fatal(err)
		}
		select {
		case got = <-updated:
			if got != "watch://doc" {
				t.Fatalf("resources/updated of %q", got)
			}
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no notifications/resources/updated reached the client within 30s")
			}
		}
	}

	srv.AddResource(&sdk.Resource{URI: "watch://new", Name: "new", MIMEType: "text/plain"}, doc)
	select {
	case <-listChanged:
	case <-ctx.Done():
		t.Fatal("no notifications/resources/list_changed reached the client after the server's")
	}
	eventually(t, 30*time.Second, "the new resource in the route's list", func() bool {
		res, err := cs.ListResources(ctx, nil)
		if err != nil {
			return false
		}
		for _, r := range res.Resources {
			if r.URI == "watch://new" {
				return true
			}
		}
		return false
	})
}

// metricValue is the value of an unlabelled metric on /metrics.
func metricValue(metrics, name string) float64 {
	for line := range strings.SplitSeq(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
