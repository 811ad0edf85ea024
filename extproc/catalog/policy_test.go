package catalog

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/registry"
)

// TestViewsBounded: more identities than MaxViews keep at most MaxViews
// views, and the cache's counts are those of the views it holds.
func TestViewsBounded(t *testing.T) {
	route := registry.Route{Key: "core", Catalog: &registry.Catalog{PageSize: 10},
		ToolServices: []registry.ToolService{{Name: "svc", URL: "http://svc.tools.svc:8080"}}}
	m := &registry.Manifest{}
	for i := range 30 {
		m.Tools = append(m.Tools, registry.ManifestTool{Name: fmt.Sprintf("tool_%05d", i),
			InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	snap, err := registry.BuildSnapshot(route, map[string]*registry.Manifest{"svc": m}, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	set, err := authz.Compile(&authz.Config{Routes: map[string][]authz.Policy{"core": {{Name: "one", Effect: "deny",
		When: `tool.name == "tool_00001"`}}}})
	if err != nil {
		t.Fatal(err)
	}
	var views Views
	r := views.Route("core", snap, nil, set.Route("core"))
	for i := range MaxViews + 20 {
		r.View(fmt.Sprint("key-", i), func() *authz.Input { return &authz.Input{} })
	}
	if n, _ := r.Size(); n > MaxViews {
		t.Errorf("%d views cached, bound %d", n, MaxViews)
	}
	var n, bytes int64
	r.views.Range(func(_, v any) bool {
		n, bytes = n+1, bytes+v.(*View).bytes
		return true
	})
	if held, heldBytes := r.Size(); n != held || bytes != heldBytes || bytes == 0 {
		t.Errorf("cache accounts %d views of %d B, holds %d of %d B", held, heldBytes, n, bytes)
	}
}
