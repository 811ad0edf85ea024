package refresher

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
)

// oneRouteSource lists one route, or fails when err is set.
type oneRouteSource struct{ err error }

func (s oneRouteSource) List(context.Context) (*registry.Listing, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &registry.Listing{Routes: []registry.Route{{Key: "alpha", ToolServices: []registry.ToolService{{Name: "a", URL: "http://a.invalid"}}}}}, nil
}

// oneManifestFetcher answers every fetch with m.
type oneManifestFetcher struct{ m *registry.Manifest }

func (f oneManifestFetcher) Fetch(context.Context, registry.ToolService) (*registry.Manifest, error) {
	return f.m, nil
}

// gauge is the value of the unlabelled gauge name in reg, -1 when absent.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestMetricsSharedRegistry: two Registries on one Prometheus registry (a
// reload, or two servers in one process) do not panic; they count in the
// same series, and the state gauges follow the newest Registry.
func TestMetricsSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	ctx := t.Context()
	down := New(Options{Source: oneRouteSource{err: errors.New("portal down")}, Registerer: reg})
	if err := down.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if g := gauge(t, reg, "toolmesh_registry_ready"); g != 0 {
		t.Fatalf("ready = %v with the Portal down", g)
	}
	up := New(Options{Source: oneRouteSource{}, Fetcher: oneManifestFetcher{mustManifest(t, registrytest.ToolsDoc("a_one"))}, Registerer: reg})
	if err := up.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !up.Ready() || down.Ready() {
		t.Fatalf("ready: up %v, down %v", up.Ready(), down.Ready())
	}
	if g := gauge(t, reg, "toolmesh_registry_ready"); g != 1 {
		t.Errorf("ready = %v, want the newest Registry's 1", g)
	}
	if f, s := registrytest.Counter(t, reg, "toolmesh_registry_listings_total", "outcome", "failure"),
		registrytest.Counter(t, reg, "toolmesh_registry_listings_total", "outcome", "success"); f != 1 || s != 1 {
		t.Errorf("listings: failure %v, success %v; want one of each in the shared series", f, s)
	}
}

// TestMetricsConflict: a collector of another shape under a registry
// metric's name is logged, and the Registry works without exporting it.
func TestMetricsConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolmesh_registry_refreshes_total", Help: "something else",
	}, []string{"other"}))
	var logs bytes.Buffer
	r := New(Options{
		Source: oneRouteSource{}, Fetcher: oneManifestFetcher{mustManifest(t, registrytest.ToolsDoc("a_one"))}, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !r.Ready() {
		t.Error("not ready")
	}
	if !strings.Contains(logs.String(), "registry metrics not exported") || !strings.Contains(logs.String(), "toolmesh_registry_refreshes_total") {
		t.Errorf("log = %s", logs.String())
	}
	if g := gauge(t, reg, "toolmesh_registry_ready"); g != 1 {
		t.Errorf("ready = %v: the other series must still be exported", g)
	}
}
