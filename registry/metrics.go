package registry

import (
	"github.com/prometheus/client_golang/prometheus"
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
	if reg != nil {
		reg.MustRegister(m.refreshes, m.listings, &stateCollector{r: r})
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
// so they are never stale and cost nothing between scrapes.
type stateCollector struct{ r *Registry }

var (
	descSnapshotAge = prometheus.NewDesc("toolmesh_registry_snapshot_age_seconds",
		"Age of each route's snapshot since its manifests were last fetched or confirmed.", []string{"route"}, nil)
	descTools = prometheus.NewDesc("toolmesh_registry_snapshot_tools",
		"Tools served by each route's snapshot.", []string{"route"}, nil)
	descReady = prometheus.NewDesc("toolmesh_registry_ready",
		"1 when at least one route has a snapshot.", nil, nil)
	descWithout = prometheus.NewDesc("toolmesh_registry_routes_without_snapshot",
		"Listed routes that have no snapshot yet.", nil, nil)
)

// Describe implements [prometheus.Collector].
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSnapshotAge
	ch <- descTools
	ch <- descReady
	ch <- descWithout
}

// Collect implements [prometheus.Collector].
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.r.state.Load()
	now := c.r.now()
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
	}
	ready := 0.0
	if st.ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready)
	ch <- prometheus.MustNewConstMetric(descWithout, prometheus.GaugeValue, float64(without))
}
