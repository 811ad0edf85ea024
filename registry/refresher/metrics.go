package refresher

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/promreg"
)

// metrics are the registry's Prometheus series. The route label is bounded
// by the Portal's routes; nothing a client sends becomes a label.
type metrics struct {
	refreshes *prometheus.CounterVec // {route, outcome}
	listings  *prometheus.CounterVec // {outcome}
}

// Outcome label values.
const (
	outcomeSuccess = "success"
	outcomeFailure = "failure"
)

// newMetrics makes the series and registers them with reg (nil: none). A
// Registry already on reg (an earlier one, before a reload) shares its
// counters, and the state gauges follow the newest Registry. A conflict
// that cannot be shared is logged and leaves those series unexported: New
// has no error to return, and metrics must never stop serving.
func newMetrics(reg prometheus.Registerer, r *Registry) *metrics {
	m := &metrics{
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_registry_refreshes_total",
			Help: "Route refreshes (manifest fetch and snapshot build) by route and outcome.",
		}, []string{"route", "outcome"}),
		listings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_registry_listings_total",
			Help: "Portal listings by outcome.",
		}, []string{"outcome"}),
	}
	var err error
	if m.refreshes, err = promreg.Register(reg, m.refreshes); err != nil {
		r.log.Error("registry metrics not exported", "err", err)
	}
	if m.listings, err = promreg.Register(reg, m.listings); err != nil {
		r.log.Error("registry metrics not exported", "err", err)
	}
	state := &stateCollector{}
	state.r.Store(r)
	if got, err := promreg.Register(reg, state); err != nil {
		r.log.Error("registry metrics not exported", "err", err)
	} else {
		got.r.Store(r) // the one registered before reports this Registry now
	}
	return m
}

func (m *metrics) refresh(route string, err error) {
	m.refreshes.WithLabelValues(route, outcome(err)).Inc()
}

func (m *metrics) listing(err error) { m.listings.WithLabelValues(outcome(err)).Inc() }

func outcome(err error) string {
	if err != nil {
		return outcomeFailure
	}
	return outcomeSuccess
}

// stateCollector reports gauges read from the current state at scrape time,
// so they are never stale and cost nothing between scrapes. r is the newest
// Registry on the Prometheus registry; a scrape may run while it changes.
type stateCollector struct{ r atomic.Pointer[Registry] }

var (
	descSnapshotAge = prometheus.NewDesc("toolmesh_registry_snapshot_age_seconds",
		"Time since each route's snapshot was built or last confirmed by a refresh that fetched all its manifests: /health lastSuccessAge, or snapshotAge for a snapshot restored from the Store and not yet confirmed.", []string{"route"}, nil)
	descTools = prometheus.NewDesc("toolmesh_registry_snapshot_tools",
		"Tools served by each route's snapshot.", []string{"route"}, nil)
	descRejected = prometheus.NewDesc("toolmesh_registry_rejected_tools",
		"Tools of each route's snapshot left out because their manifest entry is invalid (/health: rejected).", []string{"route"}, nil)
	descAmbiguous = prometheus.NewDesc("toolmesh_registry_ambiguous_tools",
		"Tool names of each route left out because the Tool Service that wins them publishes two active entries (/health: ambiguous).", []string{"route"}, nil)
	descShadowed = prometheus.NewDesc("toolmesh_registry_shadowed_entries",
		"Tools, prompts, resources and resource templates of each route left out because a Tool Service ranked before theirs claims the name (/health: shadowed).", []string{"route"}, nil)
	descQuarantined = prometheus.NewDesc("toolmesh_registry_quarantined_tools",
		"Tools of each route held back by pinning until an operator accepts their changed (or new) definition (/health: quarantined; docs/surface.md).", []string{"route"}, nil)
	descReady = prometheus.NewDesc("toolmesh_registry_ready",
		"1 when at least one route has a snapshot.", nil, nil)
	descWithout = prometheus.NewDesc("toolmesh_registry_routes_without_snapshot",
		"Listed routes that have no snapshot yet.", nil, nil)
)

// Describe implements [prometheus.Collector].
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSnapshotAge
	ch <- descTools
	ch <- descRejected
	ch <- descAmbiguous
	ch <- descShadowed
	ch <- descQuarantined
	ch <- descReady
	ch <- descWithout
}

// Collect implements [prometheus.Collector].
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.r.Load()
	st := r.state.Load()
	now := r.now()
	without := 0
	for key, e := range st.entries {
		if e.snap == nil {
			without++
			continue
		}
		seen := e.snap.FetchedAt
		if e.lastRefresh.After(seen) {
			seen = e.lastRefresh
		}
		ch <- prometheus.MustNewConstMetric(descSnapshotAge, prometheus.GaugeValue, now.Sub(seen).Seconds(), key)
		ch <- prometheus.MustNewConstMetric(descTools, prometheus.GaugeValue, float64(len(e.snap.Tools)), key)
		ch <- prometheus.MustNewConstMetric(descRejected, prometheus.GaugeValue, float64(len(e.snap.Rejected)), key)
		ch <- prometheus.MustNewConstMetric(descAmbiguous, prometheus.GaugeValue, float64(len(e.snap.Ambiguous)), key)
		ch <- prometheus.MustNewConstMetric(descShadowed, prometheus.GaugeValue, float64(len(e.snap.Shadowed)), key)
		ch <- prometheus.MustNewConstMetric(descQuarantined, prometheus.GaugeValue, float64(len(e.snap.Quarantined)), key)
	}
	ready := 0.0
	if st.ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready)
	ch <- prometheus.MustNewConstMetric(descWithout, prometheus.GaugeValue, float64(without))
}
