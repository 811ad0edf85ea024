package metrics

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Every request counts into one child of Requests and one of Duration.
// Looking a child up by its label values hashes them and takes the vector's
// read lock, twice per request; the children are kept here instead, by
// label set, in maps a request reads without a lock. No series is ever
// deleted from the vectors, so a kept child is the one WithLabelValues
// would return, also for a route that was removed and comes back. What is
// kept is what the vectors keep: one entry per series.
//
// They are kept per route, each route's in a map of the other three
// labels. Both maps are replaced, never written to, when a key is new, and
// read through an atomic pointer: a map keyed by strings hashes them with
// the code the compiler made for the key, where a sync.Map keyed by all
// four labels hashed them through their interface (427 instructions per
// request against 699, docs/benchmarks.md). Copying a map for each new key is cheap while there
// are few (routes; a route's methods, eras and outcomes).

// RequestSeries are a request's children of Requests and Duration.
type RequestSeries struct {
	Requests prometheus.Counter  // route, method, era, outcome
	Duration prometheus.Observer // route, method
}

// seriesLabels are a request's labels besides its route.
type seriesLabels struct{ method, era, outcome string }

// keptSeries are the children kept, per route.
type keptSeries struct {
	routes atomic.Pointer[map[string]*routeSeries] // replaced, never changed
	mu     sync.Mutex                              // serializes replacing routes
}

// routeSeries are one route's kept children.
type routeSeries struct {
	kept atomic.Pointer[map[seriesLabels]*RequestSeries] // replaced, never changed
	mu   sync.Mutex                                      // serializes replacing kept
}

// Request returns the children of Requests and Duration for a request's
// labels, resolving them on the label set's first request.
func (m *Metrics) Request(route, method, era, outcome string) *RequestSeries {
	var rs *routeSeries
	if routes := m.series.routes.Load(); routes != nil {
		rs = (*routes)[route]
	}
	if rs == nil {
		rs = m.series.add(route)
	}
	k := seriesLabels{method, era, outcome}
	if kept := rs.kept.Load(); kept != nil {
		if s, ok := (*kept)[k]; ok {
			return s
		}
	}
	return rs.add(m, route, k)
}

// add keeps and returns the series of route.
func (ks *keptSeries) add(route string) *routeSeries {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	next := map[string]*routeSeries{}
	if old := ks.routes.Load(); old != nil {
		if rs := (*old)[route]; rs != nil { // kept meanwhile
			return rs
		}
		next = maps.Clone(*old)
	}
	rs := &routeSeries{}
	next[route] = rs
	ks.routes.Store(&next)
	return rs
}

// add keeps and returns the children for route and k.
func (rs *routeSeries) add(m *Metrics, route string, k seriesLabels) *RequestSeries {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	next := map[seriesLabels]*RequestSeries{}
	if old := rs.kept.Load(); old != nil {
		if s, ok := (*old)[k]; ok { // kept meanwhile
			return s
		}
		next = maps.Clone(*old)
	}
	s := &RequestSeries{
		Requests: m.Requests.WithLabelValues(route, k.method, k.era, k.outcome),
		Duration: m.Duration.WithLabelValues(route, k.method),
	}
	next[k] = s
	rs.kept.Store(&next)
	return s
}
