package xds_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// TestDebouncer runs the debouncer on synctest's fake clock, so the
// schedule below is exact: changes at the given offsets from the start,
// quiet 100ms, max delay 300ms.
func TestDebouncer(t *testing.T) {
	every := func(step time.Duration, n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i) * step
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		changes []time.Duration // when each change is scheduled
		want    []int           // index of the change each apply carries
	}{
		{"one change", []time.Duration{0}, []int{0}},
		{"burst of 20 within the quiet period", every(4*time.Millisecond, 20), []int{19}},
		{"two bursts", []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 500 * time.Millisecond, 510 * time.Millisecond}, []int{2, 4}},
		// A Portal that never settles is still pushed every max delay: bursts
		// start at 0, 320 and 640ms and are cut at 300, 620 and 940ms; the
		// last change (960ms) waits for quiet.
		{"never quiet", every(40*time.Millisecond, 25), []int{7, 15, 23, 24}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var applied []int
				d := xds.NewDebouncer(100*time.Millisecond, 300*time.Millisecond, func(_ context.Context, routes []registry.Route) {
					mu.Lock()
					defer mu.Unlock()
					applied = append(applied, int(routes[0].ToolServices[0].Cluster.MaxRetries))
				})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { d.Run(ctx); close(done) }()

				start := time.Now()
				for i, at := range tc.changes {
					time.Sleep(time.Until(start.Add(at)))
					d.Schedule([]registry.Route{{Key: "r", ToolServices: []registry.ToolService{{
						Cluster: &registry.ClusterSettings{MaxRetries: uint32(i)},
					}}}})
				}
				time.Sleep(time.Second)
				synctest.Wait()
				cancel()
				<-done
				mu.Lock()
				defer mu.Unlock()
				if !slices.Equal(applied, tc.want) {
					t.Errorf("applied changes %v, want %v", applied, tc.want)
				}
			})
		})
	}
}

// TestDebouncerStops checks that Run returns when its context ends, with a
// change still pending (dropped) or while idle.
func TestDebouncerStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		d := xds.NewDebouncer(time.Minute, time.Hour, func(context.Context, []registry.Route) { calls++ })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		d.Schedule(nil)
		time.Sleep(time.Second)
		cancel()
		<-done
		if calls != 0 {
			t.Errorf("a change pending at shutdown was applied %d times", calls)
		}
	})
}
