package xds

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/toolmesh/toolmesh/registry"
)

// RunnerOptions are the parts a Runner connects.
type RunnerOptions struct {
	// Server is the xDS server to update; nil when the process serves no
	// xDS (the Runner then only keeps the health states).
	Server *Server
	// Routes returns the registry's current routes.
	Routes func() []registry.Route
	// Ready reports whether the process may serve: the registry has its
	// snapshots and the process is not stopping.
	Ready func() bool
	// Health is told, after every change, whether the process is ready and
	// whether the last xDS update succeeded.
	Health func(ready, synced bool)
	// Gate, when set, is asked before each push after the first (tests).
	Gate func() bool
	Log  *slog.Logger
}

// Runner keeps the xDS server and the gRPC health states in step with the
// registry. The first state is pushed at once; later changes go through a
// Debouncer, so a burst of Portal changes makes one push.
type Runner struct {
	o        RunnerOptions
	debounce *Debouncer  // nil without a Server
	synced   atomic.Bool // the last xDS update succeeded
}

// NewRunner returns a Runner for o.
func NewRunner(o RunnerOptions) *Runner {
	r := &Runner{o: o}
	if o.Server != nil {
		r.debounce = NewDebouncer(0, 0, r.push)
	}
	return r
}

// Run follows changes (a registry subscription) until ctx is done.
func (r *Runner) Run(ctx context.Context, changes <-chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if r.debounce != nil {
		wg.Go(func() { r.debounce.Run(ctx) })
	}
	r.follow(ctx, changes)
}

func (r *Runner) follow(ctx context.Context, changes <-chan struct{}) {
	if r.o.Server != nil {
		r.push(ctx, r.o.Routes())
	}
	r.SetHealth()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
		if r.debounce != nil && (r.o.Gate == nil || r.o.Gate()) {
			r.debounce.Schedule(r.o.Routes())
		}
		r.SetHealth()
	}
}

// push updates the xDS server with routes and the gRPC health states.
func (r *Runner) push(ctx context.Context, routes []registry.Route) {
	pushed, err := r.o.Server.Update(ctx, routes)
	switch {
	case err != nil:
		// Envoy keeps the last good configuration.
		r.o.Log.Error("xds update failed", slog.Any("error", err))
	case pushed:
		r.o.Log.Debug("xds update pushed")
	}
	r.synced.Store(err == nil)
	r.SetHealth()
}

// SetHealth tells Health the current readiness and xDS state.
func (r *Runner) SetHealth() {
	r.o.Health(r.o.Ready(), r.synced.Load())
}
