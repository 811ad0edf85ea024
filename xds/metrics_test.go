package xds_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/xds"
)

// histogramCount is the sample count of the unlabelled histogram name.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// TestMetricsSharedRegistry: two servers on one registry (a restart of the
// control plane in one process, two servers in a test) share the series
// instead of panicking.
func TestMetricsSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	a := xds.NewServer(t.Context(), log, xds.Options{}, reg)
	b := xds.NewServer(t.Context(), log, xds.Options{}, reg)
	for _, s := range []*xds.Server{a, b} {
		if _, err := s.Update(t.Context(), testRoutes("weather")); err != nil {
			t.Fatal(err)
		}
	}
	if n := histogramCount(t, reg, "toolmesh_xds_build_duration_seconds"); n != 2 {
		t.Errorf("builds counted = %d, want both servers' 2 in the shared series", n)
	}
}

// TestMetricsConflict: a collector of another shape under an xDS metric's
// name is logged; the server still works and exports the rest.
func TestMetricsConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "toolmesh_xds_pushes_total", Help: "something else"}))
	var logs bytes.Buffer
	s := xds.NewServer(t.Context(), slog.New(slog.NewTextHandler(&logs, nil)), xds.Options{}, reg)
	if _, err := s.Update(t.Context(), testRoutes("weather")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "xds metrics not exported") || !strings.Contains(logs.String(), "toolmesh_xds_pushes_total") {
		t.Errorf("log = %s", logs.String())
	}
	if n := histogramCount(t, reg, "toolmesh_xds_build_duration_seconds"); n != 1 {
		t.Errorf("builds counted = %d, want 1", n)
	}
}
