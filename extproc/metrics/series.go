package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Every request counts into one child of Requests and one of Duration.
// Looking a child up by its label values hashes them and takes the vector's
// read lock, twice per request; the children are kept here instead, by
// label set, in a map a request reads without a lock. No series is ever
// deleted from the vectors, so a kept child is the one WithLabelValues
// would return, also for a route that was removed and comes back. What is
// kept is what the vectors keep: one entry per series.

// RequestSeries are a request's children of Requests and Duration.
type RequestSeries struct {
	Requests prometheus.Counter  // route, method, era, outcome
	Duration prometheus.Observer // route, method
}

// requestLabels are a request's labels.
type requestLabels struct{ route, method, era, outcome string }

// Request returns the children of Requests and Duration for a request's
// labels, resolving them on the label set's first request.
func (m *Metrics) Request(route, method, era, outcome string) *RequestSeries {
	k := requestLabels{route, method, era, outcome}
	if s, ok := m.series.Load(k); ok {
		return s.(*RequestSeries)
	}
	s, _ := m.series.LoadOrStore(k, &RequestSeries{
		Requests: m.Requests.WithLabelValues(route, method, era, outcome),
		Duration: m.Duration.WithLabelValues(route, method),
	})
	return s.(*RequestSeries)
}
