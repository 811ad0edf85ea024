package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Every request counts into one child of Requests and one of Duration.
// Looking a child up by its label values hashes them and takes the vector's
// read lock, twice per request; the children are kept here instead, per
// route and label set, so a request loads a map it never locks. No series
// is ever deleted from the vectors, so a kept child is the one
// WithLabelValues would return, also for a route that was removed and comes
// back. What is kept is what the vectors keep: one entry per series.

// RequestSeries are a request's children of Requests and Duration.
type RequestSeries struct {
	Requests prometheus.Counter  // route, method, era, outcome
	Duration prometheus.Observer // route, method
}

// requestLabels are a request's labels besides its route.
type requestLabels struct{ method, era, outcome string }

// routeSeries are one route's RequestSeries by label set. Readers load the
// map; a new label set copies it (once per series, under mu).
type routeSeries struct {
	m  atomic.Pointer[map[requestLabels]*RequestSeries]
	mu sync.Mutex // serializes writers
}

// Request returns the children of Requests and Duration for a request's
// labels, resolving them on the label set's first request.
func (m *Metrics) Request(route, method, era, outcome string) *RequestSeries {
	v, ok := m.byRoute.Load(route)
	if !ok {
		v, _ = m.byRoute.LoadOrStore(route, &routeSeries{})
	}
	rs := v.(*routeSeries)
	k := requestLabels{method, era, outcome}
	if cur := rs.m.Load(); cur != nil {
		if s, ok := (*cur)[k]; ok {
			return s
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	old := rs.m.Load()
	if old != nil {
		if s, ok := (*old)[k]; ok { // another request added it meanwhile
			return s
		}
	}
	next := make(map[requestLabels]*RequestSeries, 1+lenOf(old))
	if old != nil {
		for k, s := range *old {
			next[k] = s
		}
	}
	s := &RequestSeries{
		Requests: m.Requests.WithLabelValues(route, method, era, outcome),
		Duration: m.Duration.WithLabelValues(route, method),
	}
	next[k] = s
	rs.m.Store(&next)
	return s
}

func lenOf(m *map[requestLabels]*RequestSeries) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
