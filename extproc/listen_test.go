package extproc

import (
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

const listenBody = `{"jsonrpc":"2.0","id":"s1","method":"subscriptions/listen","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},` +
	`"notifications":{"toolsListChanged":true,"promptsListChanged":true}}}`

// TestStreamRouting: with ListChanged, a legacy GET (from its headers) and
// a subscriptions/listen POST (from its body) are routed to the
// notifications cluster with the route, kinds and subscription id; the
// event-stream answer is switched to STREAMED with the allow-listed
// override, and its chunks pass unchanged. Without ListChanged, GET stays
// 405 and subscriptions/listen -32601.
func TestStreamRouting(t *testing.T) {
	on := newTestEnv(t, Config{MCP: mcp.Config{ListChanged: true}}, testTable(t))
	off := newTestEnv(t, Config{}, testTable(t))
	getHeaders := []string{":method", "GET", ":path", "/mcp/core", ":authority", "localhost:10000",
		"accept", "text/event-stream", "mcp-protocol-version", "2025-11-25", "x-toolmesh-notify", "forged"}

	t.Run("legacy GET", func(t *testing.T) {
		v := on.open(t)
		resp := v.send(reqHeaders(true, getHeaders...))
		cr := resp.GetRequestHeaders().GetResponse()
		if cr == nil || !cr.GetClearRouteCache() {
			t.Fatalf("headers reply %v, want a routing mutation", resp)
		}
		set := setOf(t, cr.GetHeaderMutation())
		want := map[string]string{wire.ClusterHeader: wire.NotificationsCluster, ":path": wire.NotificationsPath,
			wire.RouteHeader: "core", wire.NotifyHeader: "tools"}
		for k, w := range want {
			if set[k] != w {
				t.Errorf("%s = %q, want %q", k, set[k], w)
			}
		}
		if _, ok := set[wire.SubscriptionHeader]; ok {
			t.Error("a legacy stream got a subscription id")
		}
		streamed(t, v)
		v.close()
		if n := metricValue(t, on.reg, "toolmesh_extproc_requests_total",
			map[string]string{"route": "core", "method": "GET", "era": "legacy", "outcome": "ok"}); n != 1 {
			t.Errorf("requests_total{method=GET,outcome=ok} = %v, want 1", n)
		}
	})
	t.Run("subscriptions/listen", func(t *testing.T) {
		v := on.open(t)
		v.send(reqHeaders(false, post("/mcp/core", len(listenBody), stateless("subscriptions/listen")...)...))
		resp := v.send(reqBody(listenBody))
		cr := resp.GetRequestBody().GetResponse()
		set := setOf(t, cr.GetHeaderMutation())
		if set[wire.ClusterHeader] != wire.NotificationsCluster || set[wire.SubscriptionHeader] != `"s1"` ||
			set[wire.NotifyHeader] != "tools" || !cr.GetClearRouteCache() || cr.GetBodyMutation() != nil {
			// prompts: the route offers none, so it is not carried
			t.Fatalf("body reply %v, want the stream routed with id \"s1\" and kinds tools", resp)
		}
		streamed(t, v)
	})
	t.Run("off", func(t *testing.T) {
		v := off.open(t)
		if st := v.send(reqHeaders(true, getHeaders...)).GetImmediateResponse().GetStatus().GetCode(); st != 405 {
			t.Errorf("GET status %v, want 405", st)
		}
		v = off.open(t)
		v.send(reqHeaders(false, post("/mcp/core", len(listenBody), stateless("subscriptions/listen")...)...))
		r := decodeReply(t, v.send(reqBody(listenBody)).GetImmediateResponse().GetBody())
		if r.Error == nil || r.Error.Code != mcp.CodeMethodNotFound {
			t.Errorf("subscriptions/listen without streams = %+v, want -32601", r)
		}
	})
	t.Run("2026 GET", func(t *testing.T) {
		v := on.open(t)
		h := append([]string(nil), getHeaders...)
		h[9] = mcp.Version20260728 // the mcp-protocol-version value
		if st := v.send(reqHeaders(true, h...)).GetImmediateResponse().GetStatus().GetCode(); st != 405 {
			t.Errorf("2026-07-28 GET status %v, want 405", st)
		}
	})
}

// streamed sends the notifications server's answer through v.
func streamed(t *testing.T, v *envoy) {
	t.Helper()
	resp := v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream"))
	mo := resp.GetModeOverride()
	if mo.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_STREAMED ||
		mo.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_BUFFERED {
		t.Fatalf("mode override %v, want the event-stream override (procmsg.StreamOverride)", mo)
	}
	chunk := "event: message\ndata: {}\n\n"
	if b := v.send(respBody(chunk)).GetResponseBody().GetResponse(); b.GetBodyMutation() != nil || b.GetHeaderMutation() != nil {
		t.Errorf("a chunk was changed: %v", b)
	}
}
