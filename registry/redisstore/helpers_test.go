package redisstore

import (
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/registry"
)

// t0 is the build time of the test snapshots.
var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

func mustManifest(t testing.TB, doc string) *registry.Manifest {
	t.Helper()
	m, err := registry.DecodeManifest([]byte(doc))
	if err != nil {
		t.Fatalf("DecodeManifest(%s) = %v", doc, err)
	}
	return m
}

func mustBuild(t testing.TB, r registry.Route, ms map[string]*registry.Manifest) *registry.Snapshot {
	t.Helper()
	s, err := registry.BuildSnapshot(r, ms, t0)
	if err != nil {
		t.Fatalf("BuildSnapshot() = %v", err)
	}
	return s
}

func toolNames(s *registry.Snapshot) []string {
	var names []string
	for _, t := range s.Tools {
		names = append(names, t.Name)
	}
	return names
}
