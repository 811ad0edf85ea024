package refresher

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/registrytest"
)

// retryIn returns how long after now the route's retry is scheduled, or -1
// when none is.
func (e *env) retryIn(t *testing.T, key string) time.Duration {
	t.Helper()
	rs := e.route(t, key)
	if rs.NextRetryAt == nil {
		return -1
	}
	return rs.NextRetryAt.Sub(e.clock.now())
}

// retryNow advances the fake clock to alpha's retry time and runs the retries
// that are due, as Run does when its retry timer fires.
func (e *env) retryNow(t *testing.T, key string) {
	t.Helper()
	d := e.retryIn(t, key)
	if d < 0 {
		t.Fatalf("%s has no retry scheduled", key)
	}
	e.clock.advance(d)
	_ = e.reg.retryDue(t.Context())
}

// TestRetryBackoffSchedule checks the waits between retries of a failing
// route: doubling from RetryBackoff, capped at RetryBackoffMax, jittered down
// by at most a quarter, per route, and reset by a success.
func TestRetryBackoffSchedule(t *testing.T) {
	jitter := 0.5
	e := newEnv(t, func(o *Options) {
		o.Interval = 30 * time.Second
		o.RetryBackoff = time.Second
		o.Jitter = func() float64 { return jitter }
	})
	e.a.Set(registrytest.ModeFail, "")
	e.start(t)
	if d := e.retryIn(t, "beta"); d != -1 {
		t.Fatalf("beta succeeded but has a retry in %s", d)
	}

	// With jitter 0.5 each wait is 7/8 of 1s, 2s, 4s, ... up to 30s.
	want := []time.Duration{875 * time.Millisecond, 1750 * time.Millisecond, 3500 * time.Millisecond,
		7 * time.Second, 14 * time.Second, 26250 * time.Millisecond, 26250 * time.Millisecond}
	var got []time.Duration
	for i := range want {
		got = append(got, e.retryIn(t, "alpha"))
		if i < len(want)-1 {
			aHits, bHits := e.a.Hits.Load(), e.b.Hits.Load()
			e.retryNow(t, "alpha")
			if e.a.Hits.Load() != aHits+1 || e.b.Hits.Load() != bHits {
				t.Fatalf("retry %d fetched a %d and b %d times; want only alpha's services once",
					i+1, e.a.Hits.Load()-aHits, e.b.Hits.Load()-bHits)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}

	// Nothing is due before the retry time: no fetch, no listing.
	fetches, lists := e.rec.Count("fetch "), e.rec.Count("list")
	e.clock.advance(e.retryIn(t, "alpha") - time.Millisecond)
	_ = e.reg.retryDue(t.Context())
	if e.rec.Count("fetch ") != fetches || e.rec.Count("list") != lists {
		t.Error("retryDue fetched or listed before anything was due")
	}

	// A success resets the schedule; the next failure starts over at 1s.
	e.a.Set(registrytest.ModeOK, "")
	e.retryNow(t, "alpha")
	if st := e.route(t, "alpha"); st.NextRetryAt != nil || st.LastError != "" || st.SnapshotVersion == "" {
		t.Fatalf("alpha after a successful retry = %+v", st)
	}
	e.a.Set(registrytest.ModeFail, "")
	_ = e.reg.Refresh(t.Context())
	if d := e.retryIn(t, "alpha"); d != want[0] {
		t.Errorf("first wait after a success = %s, want %s", d, want[0])
	}

	// Any jitter, even out of range, keeps every wait within [3/4 base, base].
	for i, j := range []float64{0, 0.25, 0.999999, 1, 7, -1} {
		jitter = j
		e.retryNow(t, "alpha")
		base := min(time.Second<<(i+1), 30*time.Second)
		if d := e.retryIn(t, "alpha"); d < base*3/4 || d > base {
			t.Errorf("jitter %v: wait %s outside [%s, %s]", j, d, base*3/4, base)
		}
	}
}

// TestRetryPortalListing checks that a failed Portal listing is retried with
// the same backoff and that the routes it then adds are fetched at once.
func TestRetryPortalListing(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.RetryBackoff = 2 * time.Second
		o.Jitter = func() float64 { return 0 }
	})
	e.portal.Set(registrytest.ModeFail, "")
	e.start(t)
	if e.reg.Ready() || len(e.reg.Routes()) != 0 {
		t.Fatal("routes without a listing")
	}
	var waits []time.Duration
	for range 3 {
		h := e.reg.Health()
		if h.PortalNextRetryAt == nil {
			t.Fatalf("no listing retry scheduled: %+v", h)
		}
		d := h.PortalNextRetryAt.Sub(e.clock.now())
		waits = append(waits, d)
		lists := e.rec.Count("list")
		e.clock.advance(d)
		if d == 8*time.Second {
			e.portal.Set(registrytest.ModeOK, "")
		}
		_ = e.reg.retryDue(t.Context())
		if e.rec.Count("list") != lists+1 {
			t.Fatalf("retry %d did not list the portal", len(waits))
		}
	}
	if want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("listing waits = %v, want %v", waits, want)
	}
	h := e.reg.Health()
	if h.PortalNextRetryAt != nil || h.PortalError != "" || !h.Ready || len(h.RoutesWithoutSnapshot) != 0 {
		t.Errorf("after the portal came back, in the same retry: %+v", h)
	}
}

// TestRunReadyBeforeInterval: a gateway started while its Tool Services (or
// its Portal) are still down becomes ready soon after they come up, although
// the refresh interval is an hour. Without retries this waits for the bound.
func TestRunReadyBeforeInterval(t *testing.T) {
	for _, down := range []string{"tool services", "portal"} {
		t.Run(down, func(t *testing.T) {
			e := newEnv(t, func(o *Options) {
				o.Interval = time.Hour
				o.RetryBackoff = 5 * time.Millisecond
				o.RetryBackoffMax = 50 * time.Millisecond
				o.Now = nil // Run schedules with the real clock
			})
			failing := []*registrytest.FakeServer{e.a, e.b, e.shared}
			if down == "portal" {
				failing = []*registrytest.FakeServer{e.portal}
			}
			for _, f := range failing {
				f.Set(registrytest.ModeFail, "")
			}
			e.start(t)
			if e.reg.Ready() {
				t.Fatal("ready with nothing up")
			}
			ch, unsubscribe := e.reg.Subscribe()
			defer unsubscribe()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { e.reg.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()

			// Let Run fail at least twice more before the peer comes up.
			bound := time.After(20 * time.Second)
			for failing[0].Hits.Load() < 3 {
				select {
				case <-bound:
					t.Fatalf("Run did not retry: %d attempts", failing[0].Hits.Load())
				case <-time.After(5 * time.Millisecond):
				}
			}
			for _, f := range failing {
				f.Set(registrytest.ModeOK, "")
			}
			for !e.reg.Ready() || len(e.reg.Health().RoutesWithoutSnapshot) != 0 {
				select {
				case <-ch:
				case <-bound:
					t.Fatalf("not ready before the bound with a 1h interval: %+v", e.reg.Health())
				}
			}
		})
	}
}

// TestRunPicksUpRetriesScheduledElsewhere: a retry scheduled by a cycle Run
// did not run itself (here a direct Refresh; in production the background
// end of Start with ReadyAfterWarmStart) still happens on time.
func TestRunPicksUpRetriesScheduledElsewhere(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Interval = time.Hour
		o.RetryBackoff = 5 * time.Millisecond
		o.Now = nil
	})
	e.start(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { e.reg.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	e.a.Set(registrytest.ModeFail, "")
	if err := e.reg.Refresh(t.Context()); err == nil {
		t.Fatal("Refresh() succeeded with a down")
	}
	ch, unsubscribe := e.reg.Subscribe()
	defer unsubscribe()
	e.a.Set(registrytest.ModeOK, registrytest.ToolsDoc("a_back"))
	bound := time.After(20 * time.Second)
	for !slices.Contains(toolNames(e.reg.Snapshot("alpha")), "a_back") {
		select {
		case <-ch:
		case <-bound:
			t.Fatalf("alpha not retried by Run: %+v", e.route(t, "alpha"))
		}
	}
}
