package extproc

import (
	"sync/atomic"
	"testing"

	"github.com/toolmesh/toolmesh/registry"
)

// changingRoutes is a route table a test replaces while the server runs.
type changingRoutes struct{ m atomic.Pointer[testRoutes] }

func (r *changingRoutes) Lookup(path string) (string, *registry.Snapshot, bool) {
	return r.m.Load().Lookup(path)
}

func (r *changingRoutes) set(m testRoutes) { r.m.Store(&m) }

// TestRequestMetricsRouteComesBack checks the request series a request
// counts into (kept by label set, extproc/metrics series.go)
// while routes go and come back: a route removed and added again counts
// into its series as before, a path under another route key into that
// key's, and each request into its own labels.
func TestRequestMetricsRouteComesBack(t *testing.T) {
	snap := coreSnapshot(t)
	routes := &changingRoutes{}
	routes.set(testRoutes{"/mcp/core": {key: "core", snap: snap}})
	env := newTestEnv(t, Config{}, routes)
	request := func(method string) {
		t.Helper()
		v := env.open(t)
		v.send(reqHeaders(false, post("/mcp/core", 10)...))
		v.send(reqBody(`{"jsonrpc":"2.0","id":1,"method":"` + method + `"}`))
		v.close()
	}
	request("tools/list")
	request("ping")
	routes.set(testRoutes{})
	request("tools/list")
	routes.set(testRoutes{"/mcp/core": {key: "core", snap: snap}})
	request("tools/list")
	request("tools/list")
	routes.set(testRoutes{"/mcp/core": {key: "core2", snap: snap}})
	request("tools/list")

	for _, c := range []struct {
		route, method, outcome string
		want                   float64
	}{
		{"core", "tools/list", outcomeAnswered, 3},
		{"core", "ping", outcomeAnswered, 1},
		{"", "tools/list", outcomeUnknownRoute, 1},
		{"core2", "tools/list", outcomeAnswered, 1},
		{"core2", "ping", outcomeAnswered, 0},
	} {
		labels := map[string]string{"route": c.route, "method": c.method, "era": "legacy", "outcome": c.outcome}
		if got := metricValue(t, env.reg, "toolmesh_extproc_requests_total", labels); got != c.want {
			t.Errorf("requests_total%v = %v, want %v", labels, got, c.want)
		}
		labels = map[string]string{"route": c.route, "method": c.method}
		if got := metricValue(t, env.reg, "toolmesh_extproc_request_duration_seconds", labels); got != c.want {
			t.Errorf("duration samples%v = %v, want %v", labels, got, c.want)
		}
	}
}
