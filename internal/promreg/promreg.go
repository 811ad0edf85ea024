// Package promreg registers Prometheus collectors on a registry that other
// components, or an earlier instance of the same one, may share.
//
// prometheus.MustRegister panics when a collector with the same
// descriptors is already registered, which is what happens when two
// servers share one registry or a component is rebuilt on reload. Register
// reuses the registered collector instead, so both keep counting in the
// same series, and returns any other conflict as an error.
//
// It is a leaf package (it imports only the Prometheus client) so that
// every toolmesh package may use it without bending the import rules
// (cmd → extproc/xds/envoy; extproc → filters/registry/mcp; xds → registry;
// registry → mcp): filters and filters/wasm import no other toolmesh
// package, and registry would drag the Redis client into them.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg and returns it. When reg already holds a
// collector with the same descriptors and of the same type, Register
// returns that one instead, and the caller must use it in place of c. Any
// other failure (a name registered with other labels or help, a collector
// of another type) is an error, and c is returned unregistered so the
// caller can go on without exporting it. A nil reg registers nothing.
// C should be the collector's concrete type (*prometheus.CounterVec, ...):
// with an interface type any registered collector would match.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register metrics: %w", err)
}
