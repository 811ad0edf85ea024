package extproc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/internal/promreg"
)

// newMetrics makes the server's series (package metrics) on reg.
func newMetrics(reg prometheus.Registerer, toolLabels int) (*metrics.Metrics, error) {
	m, err := metrics.New(reg, toolLabels)
	if err != nil {
		return nil, err
	}
	// The token clients of every upstreamAuth configuration count into
	// one process-wide counter (extproc/upstreamcred), registered with the
	// first registry that asks.
	if _, err = promreg.Register(reg, upstreamcred.Collector()); err != nil {
		return nil, err
	}
	return m, nil
}
