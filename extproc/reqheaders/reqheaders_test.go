package reqheaders

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// TestClientHeaders: filters see the client's headers without pseudo- and
// x-toolmesh-* headers, names lowercase, the first of a repeated header;
// a request's usual handful fits the map's first group (two allocations,
// four when it was sized for every header).
func TestClientHeaders(t *testing.T) {
	hm := &corev3.HeaderMap{}
	for _, kv := range [][2]string{{":method", "POST"}, {":path", "/mcp/core"}, {":authority", "gw"}, {":scheme", "http"},
		{"content-type", "application/json"}, {"Accept", "application/json"}, {"accept", "text/event-stream"},
		{"content-length", "90"}, {"x-toolmesh-cluster", "evil"}, {"X-Toolmesh-Tool", "evil"},
		{"mcp-protocol-version", "2025-11-25"}, {"user-agent", "x"}, {"x-request-id", "abc"}} {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])})
	}
	want := map[string]string{"content-type": "application/json", "accept": "application/json", "content-length": "90",
		"mcp-protocol-version": "2025-11-25", "user-agent": "x", "x-request-id": "abc"}
	if got := ForFilters(hm); !maps.Equal(got, want) {
		t.Errorf("ForFilters = %v, want %v", got, want)
	}
	// Envoy sends names lowercase; lowering one costs a copy.
	hm.Headers = slices.DeleteFunc(hm.Headers, func(h *corev3.HeaderValue) bool { return h.Key != strings.ToLower(h.Key) })
	if n := testing.AllocsPerRun(50, func() { _ = ForFilters(hm) }); n > 2 {
		t.Errorf("ForFilters: %v allocations, want at most 2", n)
	}
}
