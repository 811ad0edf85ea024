package metrics

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value is a counter's count.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestRequestSeries checks that Request hands out the children
// WithLabelValues does, for each label set its own, the same on every call.
func TestRequestSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, DefaultToolLabels)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ route, method, era, outcome string }{
		{"core", "tools/list", "legacy", "answered"},
		{"core", "tools/list", "legacy", "rejected"},
		{"core", "tools/list", "2026-07-28", "answered"},
		{"core", "ping", "legacy", "answered"},
		{"other", "tools/list", "legacy", "answered"},
		{"", "none", "legacy", "unknown_route"},
	} {
		s := m.Request(c.route, c.method, c.era, c.outcome)
		if s != m.Request(c.route, c.method, c.era, c.outcome) {
			t.Errorf("%v: a second call returned other series", c)
		}
		if s.Requests != m.Requests.WithLabelValues(c.route, c.method, c.era, c.outcome) {
			t.Errorf("%v: the counter is not the vector's child", c)
		}
		if s.Duration != m.Duration.WithLabelValues(c.route, c.method) {
			t.Errorf("%v: the histogram is not the vector's child", c)
		}
		before := value(t, m.Requests.WithLabelValues(c.route, c.method, c.era, c.outcome))
		s.Requests.Inc()
		if got := value(t, m.Requests.WithLabelValues(c.route, c.method, c.era, c.outcome)); got != before+1 {
			t.Errorf("%v: counter %v after one Inc, want %v", c, got, before+1)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "toolmesh_extproc_requests_total" && len(mf.GetMetric()) != 6 {
			t.Errorf("%d request series, want 6", len(mf.GetMetric()))
		}
	}
}

// TestRequestSeriesConcurrent counts from many goroutines into label sets
// that are new to all of them at once: no count is lost (run with -race).
func TestRequestSeriesConcurrent(t *testing.T) {
	m, err := New(nil, DefaultToolLabels)
	if err != nil {
		t.Fatal(err)
	}
	const workers, sets, rounds = 8, 20, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				for i := range sets {
					m.Request(fmt.Sprint("route-", i%4), "tools/list", "legacy", fmt.Sprint("outcome-", i)).Requests.Inc()
				}
			}
		})
	}
	wg.Wait()
	for i := range sets {
		if got := value(t, m.Requests.WithLabelValues(fmt.Sprint("route-", i%4), "tools/list", "legacy", fmt.Sprint("outcome-", i))); got != workers*rounds {
			t.Errorf("set %d: %v counts, want %d", i, got, workers*rounds)
		}
	}
}
