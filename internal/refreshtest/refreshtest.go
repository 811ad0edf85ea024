// Package refreshtest holds what the tests of the registry's refresher and
// of the stores it runs with (registry/refresher, registry/redisstore)
// share and that needs the registry's types: a Source and a
// ManifestFetcher that record their calls, and a route's health. (The
// registry's own package tests cannot import the registry through a
// helper; what they share is in internal/registrytest.)
package refreshtest

import (
	"context"
	"testing"

	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
)

// RecordingSource records "list" for every List.
type RecordingSource struct {
	registry.Source
	Rec *registrytest.Recorder
}

// List implements registry.Source.
func (s RecordingSource) List(ctx context.Context) (*registry.Listing, error) {
	s.Rec.Add("list")
	return s.Source.List(ctx)
}

// RecordingFetcher records "fetch <service>" for every Fetch.
type RecordingFetcher struct {
	registry.ManifestFetcher
	Rec *registrytest.Recorder
}

// Fetch implements registry.ManifestFetcher.
func (f RecordingFetcher) Fetch(ctx context.Context, svc registry.ToolService) (*registry.Manifest, error) {
	f.Rec.Add("fetch " + svc.Name)
	return f.ManifestFetcher.Fetch(ctx, svc)
}

// RouteStatus is route key's status in reg's health; the test fails when
// the route is not there.
func RouteStatus(t testing.TB, reg interface{ Health() registry.Health }, key string) registry.RouteStatus {
	t.Helper()
	for _, rs := range reg.Health().Routes {
		if rs.Key == key {
			return rs
		}
	}
	t.Fatalf("route %q not in health %+v", key, reg.Health())
	return registry.RouteStatus{}
}
