package xds

import (
	"context"
	"sync"
	"time"

	"github.com/toolmesh/toolmesh/registry"
)

// Debounce defaults (see NewDebouncer).
const (
	DefaultDebounceQuiet    = 250 * time.Millisecond
	DefaultDebounceMaxDelay = 2 * time.Second
)

// Debouncer turns a burst of Portal changes into one Update: it applies the
// latest routes once no change came for the quiet period, and never later
// than maxDelay after the first change of a burst, so a Portal that never
// stops changing still gets pushed. Changes that arrive while apply runs
// start the next burst. Schedule never blocks; Run does the applying.
type Debouncer struct {
	quiet, maxDelay time.Duration
	apply           func(context.Context, []registry.Route)

	wake chan struct{} // one pending wake-up at most

	mu      sync.Mutex
	pending []registry.Route
	has     bool
}

// NewDebouncer returns a debouncer that calls apply (typically a closure
// around Server.Update that also records the result) from Run. Zero
// durations mean DefaultDebounceQuiet and DefaultDebounceMaxDelay; a
// maxDelay below quiet is raised to quiet.
func NewDebouncer(quiet, maxDelay time.Duration, apply func(ctx context.Context, routes []registry.Route)) *Debouncer {
	if quiet <= 0 {
		quiet = DefaultDebounceQuiet
	}
	if maxDelay <= 0 {
		maxDelay = DefaultDebounceMaxDelay
	}
	return &Debouncer{quiet: quiet, maxDelay: max(maxDelay, quiet), apply: apply, wake: make(chan struct{}, 1)}
}

// Schedule records routes as the latest Portal state; Run applies it when
// the burst ends. Earlier routes not yet applied are dropped.
func (d *Debouncer) Schedule(routes []registry.Route) {
	d.mu.Lock()
	d.pending, d.has = routes, true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Run applies scheduled routes until ctx is done; routes still pending then
// are dropped (the process is stopping).
func (d *Debouncer) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		}
		deadline := time.Now().Add(d.maxDelay)
	burst:
		for {
			timer.Reset(min(d.quiet, time.Until(deadline)))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-d.wake: // another change: wait for quiet again
				timer.Stop()
			case <-timer.C:
				break burst
			}
		}
		d.mu.Lock()
		routes, has := d.pending, d.has
		d.pending, d.has = nil, false
		d.mu.Unlock()
		if has {
			d.apply(ctx, routes)
		}
	}
}
