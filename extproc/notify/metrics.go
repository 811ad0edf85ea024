package notify

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/promreg"
)

// Label values (docs/metrics.md).
const (
	rejectNoRoute  = "no_route"
	rejectDraining = "draining"
	rejectTotal    = "total_limit"
	rejectClient   = "client_limit"
)

type metrics struct {
	listeners *prometheus.GaugeVec
	sent      *prometheus.CounterVec
	rejected  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		listeners: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolmesh_listeners",
			Help: "Open change-notification streams, by era (2026-07-28 subscriptions/listen or legacy GET).",
		}, []string{"era"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_notifications_sent_total",
			Help: "list_changed notifications written to change-notification streams, by list (tools, prompts, resources).",
		}, []string{"type"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_listeners_rejected_total",
			Help: "Change-notification streams refused, by reason (client_limit, total_limit, draining, no_route).",
		}, []string{"reason"}),
	}
	var err error
	if m.listeners, err = promreg.Register(reg, m.listeners); err != nil {
		return nil, err
	}
	if m.sent, err = promreg.Register(reg, m.sent); err != nil {
		return nil, err
	}
	if m.rejected, err = promreg.Register(reg, m.rejected); err != nil {
		return nil, err
	}
	return m, nil
}
