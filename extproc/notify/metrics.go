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
	rejectUpstream = "upstream_limit" // a server of the client's session not followed

	// Notifications of a followed server (follow.go), by type.
	kindUpdated = "resources_updated"
	kindLog     = "log"
)

type metrics struct {
	listeners *prometheus.GaugeVec
	sent      *prometheus.CounterVec
	rejected  *prometheus.CounterVec
	upstreams prometheus.Gauge
	dropped   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		listeners: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolmesh_listeners",
			Help: "Open change-notification streams, by era (2026-07-28 subscriptions/listen or legacy GET).",
		}, []string{"era"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_notifications_sent_total",
			Help: "Notifications written to change-notification streams, by type: list_changed by list (tools, prompts, resources), and a followed server's resources_updated and log.",
		}, []string{"type"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_listeners_rejected_total",
			Help: "Change-notification streams refused, by reason (client_limit, total_limit, draining, no_route), and upstream sessions of a legacy stream not followed (upstream_limit).",
		}, []string{"reason"}),
		upstreams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolmesh_notifications_upstream_streams",
			Help: "Open GET streams to federated servers, one per legacy client stream and upstream session it follows.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_notifications_dropped_total",
			Help: "Followed servers' notifications dropped because the client's stream had a full queue, by type (resources_updated, log).",
		}, []string{"type"}),
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
	if m.upstreams, err = promreg.Register(reg, m.upstreams); err != nil {
		return nil, err
	}
	if m.dropped, err = promreg.Register(reg, m.dropped); err != nil {
		return nil, err
	}
	return m, nil
}
