package filters

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/promreg"
)

// chainMetrics are the per-filter series of every chain of a Set.
type chainMetrics struct {
	calls    *prometheus.CounterVec
	denials  *prometheus.CounterVec
	rewrites *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newChainMetrics(reg prometheus.Registerer) (*chainMetrics, error) {
	const ns, sub = "toolmesh", "filter"
	labels := []string{"filter", "stage"}
	m := &chainMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "calls_total",
			Help: "Filter invocations, by filter and stage (request, result).",
		}, labels),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "denials_total",
			Help: "Calls a filter denied (failures are counted in errors_total).",
		}, labels),
		rewrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "rewrites_total",
			Help: "Calls a filter rewrote.",
		}, labels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "errors_total",
			Help: "Filter invocations that failed to decide.",
		}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "duration_seconds",
			Help:    "Time one filter took to decide.",
			Buckets: []float64{1e-6, 5e-6, 25e-6, 100e-6, 500e-6, 1e-3, 5e-3, 25e-3, 100e-3, 1},
		}, labels),
	}
	// A rebuilt Set keeps counting in the same series.
	var err error
	if m.calls, err = promreg.Register(reg, m.calls); err != nil {
		return nil, err
	}
	if m.denials, err = promreg.Register(reg, m.denials); err != nil {
		return nil, err
	}
	if m.rewrites, err = promreg.Register(reg, m.rewrites); err != nil {
		return nil, err
	}
	if m.errors, err = promreg.Register(reg, m.errors); err != nil {
		return nil, err
	}
	if m.latency, err = promreg.Register(reg, m.latency); err != nil {
		return nil, err
	}
	return m, nil
}

// stageMetrics are one filter's series at one stage, curried once so the
// hot path does no label lookups.
type stageMetrics struct {
	calls, denials, rewrites, errors prometheus.Counter
	latency                          prometheus.Observer
}

func (m *chainMetrics) forFilter(name string, stage Stage) *stageMetrics {
	l := []string{name, stage.String()}
	return &stageMetrics{
		calls:    m.calls.WithLabelValues(l...),
		denials:  m.denials.WithLabelValues(l...),
		rewrites: m.rewrites.WithLabelValues(l...),
		errors:   m.errors.WithLabelValues(l...),
		latency:  m.latency.WithLabelValues(l...),
	}
}

func (s *stageMetrics) observe(start time.Time, a Action, err error) {
	s.latency.Observe(time.Since(start).Seconds())
	s.calls.Inc()
	switch {
	case err != nil:
		s.errors.Inc()
	case a == ActionDeny:
		s.denials.Inc()
	case a == ActionRewrite:
		s.rewrites.Inc()
	}
}
