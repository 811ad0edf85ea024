package extproc

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// TestToolLabelsBounded: 10,000 distinct tools called on one route leave at
// most ToolLabels named series plus "(other)" per outcome, and every call
// is counted. The calls go through request.finish, from 8 goroutines.
func TestToolLabelsBounded(t *testing.T) {
	const tools, limit = 10000, 100
	env := newTestEnv(t, Config{ToolLabels: limit}, testTable(t))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < tools; i += 8 {
				x := env.srv.newRequest(t.Context())
				x.routeKey, x.method = "big", "tools/call"
				x.tool = &registry.Tool{Tool: mcp.Tool{Name: fmt.Sprintf("tool_%05d", i)}}
				x.callOutcome = callOK
				x.finish()
			}
		})
	}
	wg.Wait()
	// Calls of an admitted tool keep its label.
	x := env.srv.newRequest(t.Context())
	x.routeKey, x.tool, x.callOutcome = "other-route", &registry.Tool{Tool: mcp.Tool{Name: "tool_00000"}}, callOK
	x.finish()

	series, total, other := 0, 0.0, 0.0
	mfs, err := env.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolmesh_tool_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["route"] != "big" {
				continue
			}
			series++
			total += m.GetCounter().GetValue()
			if l["tool"] == metrics.ToolOther {
				other = m.GetCounter().GetValue()
			}
		}
	}
	if series != limit+1 || total != tools || other != tools-limit {
		t.Errorf("route big: %d series, %v calls, %v as %q; want %d series, %d calls, %d as other",
			series, total, other, metrics.ToolOther, limit+1, tools, tools-limit)
	}
	if got := metricValue(t, env.reg, "toolmesh_tool_calls_total",
		map[string]string{"route": "other-route", "tool": "tool_00000", "outcome": callOK}); got != 1 {
		t.Errorf("another route has its own %d slots: tool_00000 counted %v, want 1", limit, got)
	}
}

// TestToolLabelsThroughCalls: over the gRPC path, the tools beyond the
// limit are counted as "(other)" and the first ones keep their names.
func TestToolLabelsThroughCalls(t *testing.T) {
	var mts []registry.ManifestTool
	for i := range 6 {
		mts = append(mts, registry.ManifestTool{Name: fmt.Sprintf("t%d", i), InputSchema: json.RawMessage(`{"type":"object","required":["x"]}`)})
	}
	snap := buildSnapshot(t, registry.Route{Key: "core", ToolServices: []registry.ToolService{{Name: "s", URL: "http://s.tools.svc"}}},
		map[string]*registry.Manifest{"s": {Tools: mts}})
	env := newTestEnv(t, Config{ToolLabels: 2}, testRoutes{"/mcp/core": {key: "core", snap: snap}})
	for i := range 6 {
		answered(t, env, "/mcp/core", callReq(fmt.Sprintf("t%d", i), `{}`), 200) // invalid arguments
	}
	for tool, want := range map[string]float64{"t0": 1, "t1": 1, "t2": 0, metrics.ToolOther: 4} {
		labels := map[string]string{"route": "core", "tool": tool, "outcome": callInvalidArgs}
		if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", labels); got != want {
			t.Errorf("tool_calls_total%v = %v, want %v", labels, got, want)
		}
	}
}
