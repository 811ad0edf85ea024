package ratelimit

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/promreg"
)

// Metrics are the limiter's series. Labels are bounded: route keys come
// from the Portal, limit names from the config file, decisions and reasons
// from fixed sets. A nil *Metrics counts nothing.
type Metrics struct {
	decisions *prometheus.CounterVec // route, limit, decision
	rls       *prometheus.CounterVec // reason
	allowedBy sync.Map               // route → prometheus.Counter, the hot path's series
}

// NewMetrics registers the series on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_ratelimit_decisions_total",
			Help: "tools/call requests some limit applies to, by route, limit (the refusing one; empty when allowed) and decision (allowed, limited, concurrency, rls_error_allowed, rls_error_denied).",
		}, []string{"route", "limit", "decision"}),
		rls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_ratelimit_rls_failures_total",
			Help: "Rate limit service calls that failed, by reason (timeout, error); the call proceeded or was refused per rateLimits.rls.failureMode.",
		}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.decisions, err = promreg.Register(reg, m.decisions); err != nil {
		return nil, err
	}
	if m.rls, err = promreg.Register(reg, m.rls); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) count(route, limit, decision string) {
	if m != nil {
		m.decisions.WithLabelValues(route, limit, decision).Inc()
	}
}

func (m *Metrics) allowed(route string) {
	if m == nil {
		return
	}
	c, ok := m.allowedBy.Load(route)
	if !ok {
		c, _ = m.allowedBy.LoadOrStore(route, m.decisions.WithLabelValues(route, "", DecisionAllowed))
	}
	c.(prometheus.Counter).Inc()
}

func (m *Metrics) rlsFailure(reason string) {
	if m != nil {
		m.rls.WithLabelValues(reason).Inc()
	}
}
