package memstore

import (
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/registry"
)

func TestMemoryStore(t *testing.T) {
	s := New()
	ctx := t.Context()
	if got, err := s.Load(ctx, "x"); got != nil || err != nil {
		t.Fatalf("Load(absent) = %v, %v", got, err)
	}
	snap := mustSnapshot(t)
	if err := s.Save(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, "x"); got != snap {
		t.Fatal("Load after Save")
	}
	if err := s.Save(ctx, nil); err == nil {
		t.Error("Save(nil) accepted")
	}
	if err := s.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, "x"); got != nil {
		t.Fatal("Load after Delete")
	}
}

func mustSnapshot(t *testing.T) *registry.Snapshot {
	t.Helper()
	m, err := registry.DecodeManifest([]byte(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rt := registry.Route{Key: "x", ToolServices: []registry.ToolService{{Name: "s", URL: "http://s"}}}
	snap, err := registry.BuildSnapshot(rt, map[string]*registry.Manifest{"s": m}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
