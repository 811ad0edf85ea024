package xds_test

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// runnerEnv is a Runner over a real xds.Server, with the registry side
// (routes, readiness) and the health states in the test's hands.
type runnerEnv struct {
	mu     sync.Mutex
	routes []registry.Route
	ready  bool
	health [2]bool // last (ready, synced) told to Health
	gate   atomic.Bool
}

func (e *runnerEnv) set(routes []registry.Route, ready bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.routes, e.ready = routes, ready
}

func (e *runnerEnv) last() [2]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.health
}

func (e *runnerEnv) options(s *xds.Server) xds.RunnerOptions {
	return xds.RunnerOptions{
		Server: s,
		Routes: func() []registry.Route { e.mu.Lock(); defer e.mu.Unlock(); return e.routes },
		Ready:  func() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.ready },
		Health: func(ready, synced bool) { e.mu.Lock(); defer e.mu.Unlock(); e.health = [2]bool{ready, synced} },
		Gate:   e.gate.Load,
		Log:    slog.New(slog.DiscardHandler),
	}
}

// TestRunner runs the Runner on synctest's fake clock: the first state is
// pushed at once, later changes go through the debouncer (and the test
// gate), a failed update keeps the served snapshot and turns ADS health
// off, and readiness follows the registry.
func TestRunner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := xds.NewServer(t.Context(), slog.New(slog.DiscardHandler), xds.Options{}, nil)
		e := &runnerEnv{}
		e.set(testRoutes("weather"), true)
		changes := make(chan struct{}, 1)
		go xds.NewRunner(e.options(s)).Run(t.Context(), changes)
		synctest.Wait()
		v1 := s.Version()
		if v1 == "" || e.last() != [2]bool{true, true} {
			t.Fatalf("after the start: version %q, health %v; want the routes pushed and both serving", v1, e.last())
		}

		// A change with the gate closed is not pushed; health follows.
		e.set(testRoutes("weather", "maps"), false)
		changes <- struct{}{}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if s.Version() != v1 || e.last() != [2]bool{false, true} {
			t.Fatalf("gate closed: version %q (was %q), health %v", s.Version(), v1, e.last())
		}

		// Open: the change is pushed after the quiet period.
		e.gate.Store(true)
		e.set(testRoutes("weather", "maps"), true)
		changes <- struct{}{}
		time.Sleep(xds.DefaultDebounceMaxDelay + time.Second)
		synctest.Wait()
		v2 := s.Version()
		if v2 == v1 || e.last() != [2]bool{true, true} {
			t.Fatalf("gate open: version %q (was %q), health %v", v2, v1, e.last())
		}

		// A Portal the translator refuses: Envoy keeps v2, ADS stops serving.
		bad := testRoutes("weather")
		bad[0].ToolServices[0].URL = "ftp://nowhere"
		e.set(bad, true)
		changes <- struct{}{}
		time.Sleep(xds.DefaultDebounceMaxDelay + time.Second)
		synctest.Wait()
		if s.Version() != v2 || e.last() != [2]bool{true, false} {
			t.Fatalf("bad Portal: version %q (was %q), health %v", s.Version(), v2, e.last())
		}
	})
}

// TestRunnerWithoutServer: a process without xDS keeps only the health
// states, and ADS is never synced.
func TestRunnerWithoutServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &runnerEnv{}
		changes := make(chan struct{}, 1)
		go xds.NewRunner(e.options(nil)).Run(t.Context(), changes)
		synctest.Wait()
		if e.last() != [2]bool{false, false} {
			t.Fatalf("not ready: health %v", e.last())
		}
		e.set(nil, true)
		changes <- struct{}{}
		synctest.Wait()
		if e.last() != [2]bool{true, false} {
			t.Fatalf("ready: health %v", e.last())
		}
	})
}
