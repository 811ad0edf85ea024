package callplan

import (
	"slices"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// TestToolPlan: a tool's reply pieces are built once and shared by its
// calls on the same route, name that route, and cannot be changed through
// an append by one call.
func TestToolPlan(t *testing.T) {
	withVersion := &registry.Tool{Version: "2", Service: "s", Cluster: "toolsvc_s", Path: "/t", BasePath: "/base"}
	withVersion.Name = "t"
	noVersion := &registry.Tool{Service: "s", Cluster: "toolsvc_s", Path: "/u"}
	noVersion.Name = "u"

	p := For("core", withVersion)
	if q := For("core", withVersion); q != p {
		t.Error("a second call of the same tool built a new plan")
	}
	if set := setOf(t, &extprocv3.HeaderMutation{SetHeaders: p.routing}); set[wire.ClusterHeader] != "toolsvc_s" || set[":path"] != "/base/t" {
		t.Errorf("routing headers %v", set)
	}
	if set := setOf(t, &extprocv3.HeaderMutation{SetHeaders: p.call}); set[wire.RouteHeader] != "core" || set[wire.ToolHeader] != "t" || set["content-type"] != procmsg.ContentTypeJSON {
		t.Errorf("call headers %v", set)
	}
	if p.version == nil || string(p.version.GetHeader().GetRawValue()) != "2" || slices.Contains(p.remove, wire.ToolVersionHeader) {
		t.Errorf("version %v, remove %v", p.version, p.remove)
	}
	if other := For("edge", withVersion); other == p || setOf(t, &extprocv3.HeaderMutation{SetHeaders: other.call})[wire.RouteHeader] != "edge" {
		t.Errorf("the plan of another route names route %q", setOf(t, &extprocv3.HeaderMutation{SetHeaders: other.call})[wire.RouteHeader])
	}

	n := For("core", noVersion)
	if n.version != nil || !slices.Contains(n.remove, wire.ToolVersionHeader) {
		t.Errorf("tool without version: version %v, remove %v", n.version, n.remove)
	}
	for _, s := range [][]string{n.remove, p.remove} {
		before := slices.Clone(s)
		_ = append(s, "x") // what a caller adding a removal does
		if !slices.Equal(s, before) || cap(s) != len(s) {
			t.Errorf("remove list %v shares spare capacity", s)
		}
	}
	if !slices.Equal(RemoveOnCall, []string{"mcp-method", "mcp-name", "accept-encoding"}) {
		t.Errorf("RemoveOnCall changed to %v", RemoveOnCall)
	}
}

// setOf is the headers a mutation sets, by name.
func setOf(t testing.TB, m *extprocv3.HeaderMutation) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range m.GetSetHeaders() {
		out[o.GetHeader().GetKey()] = string(o.GetHeader().GetRawValue())
	}
	return out
}
