package wasm

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// kindOf tells which of the two guests swapped by the reload tests answered
// a plain call: add-header rewrites, deny-argument passes.
func kindOf(d Decision) string {
	switch {
	case d.Action == ActionRewrite && d.Headers["x-policy"] == "wasm-example":
		return "add-header"
	case d.Action == ActionPass:
		return "deny-argument"
	}
	return "unexpected"
}

func TestReloadUnderTraffic(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newTestHost(t, reg)
	path := filepath.Join(t.TempDir(), "filter.wasm")
	copyModule(t, "add-header", path)
	// A generous time limit: compiling on a busy 2-core machine can stall
	// a call for a while, and this test is about reloads, not time limits.
	m := loadGuest(t, h, "swap", Options{Path: path, PoolSize: 3, CallTimeout: 10 * time.Second})

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		seen    = map[string]int{}
		total   atomic.Int64
		failure atomic.Value
	)
	for range 6 {
		wg.Go(func() {
			for !stop.Load() {
				d, err := m.Filter(context.Background(), call(`{"city":"Paris"}`))
				total.Add(1)
				if err != nil {
					failure.CompareAndSwap(nil, err.Error())
					return
				}
				mu.Lock()
				seen[kindOf(d)]++
				mu.Unlock()
			}
		})
	}
	const reloads = 4
	pools := []*pool{m.cur.Load()}
	for i := range reloads {
		next := "deny-argument"
		if i%2 == 1 {
			next = "add-header"
		}
		copyModule(t, next, path)
		rs := time.Now()
		if err := m.Reload(t.Context()); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		pools = append(pools, m.cur.Load())
		t.Logf("reload %d took %s", i, time.Since(rs))
		time.Sleep(20 * time.Millisecond) // let traffic reach the new pool
	}
	stop.Store(true)
	wg.Wait()

	if f := failure.Load(); f != nil {
		t.Fatalf("a call failed during reloads: %v", f)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["unexpected"] > 0 || seen["add-header"] == 0 || seen["deny-argument"] == 0 {
		t.Fatalf("decisions by module = %v over %d calls, want both modules and nothing else", seen, total.Load())
	}
	// Every replaced pool drains and shuts down; only the last one lives.
	for i, p := range pools[:len(pools)-1] {
		select {
		case <-p.drained:
		case <-time.After(10 * time.Second):
			t.Fatalf("pool %d never drained", i)
		}
	}
	if got := value(t, h.metrics.reloads.WithLabelValues("swap", "ok")); got != reloads {
		t.Fatalf("reloads ok = %v, want %d", got, reloads)
	}
	if got, live := value(t, h.metrics.instances.WithLabelValues("swap")), len(m.cur.Load().slots); got != float64(live) {
		t.Fatalf("instances gauge = %v, live instances in the current pool = %d", got, live)
	}
}

func TestReloadKeepsServingOnError(t *testing.T) {
	h := newTestHost(t, nil)
	path := filepath.Join(t.TempDir(), "filter.wasm")
	copyModule(t, "add-header", path)
	m := loadGuest(t, h, "keep", Options{Path: path})
	before := m.cur.Load()

	if err := m.Reload(t.Context()); err != nil {
		t.Fatalf("reload of an unchanged file: %v", err)
	}
	if m.cur.Load() != before {
		t.Fatal("reload of an unchanged file swapped the pool")
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(t.Context()); err == nil {
		t.Fatal("reload of a broken file succeeded")
	}
	d, err := m.Filter(t.Context(), call(`{}`))
	if err != nil || kindOf(d) != "add-header" {
		t.Fatalf("after a failed reload: %+v, %v; want the previous module", d, err)
	}
}

func TestReloadOnFileChange(t *testing.T) {
	h := newTestHost(t, nil)
	path := filepath.Join(t.TempDir(), "filter.wasm")
	copyModule(t, "add-header", path)
	m := loadGuest(t, h, "watched", Options{Path: path, PollInterval: 20 * time.Millisecond})
	copyModule(t, "deny-argument", path)
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := m.Filter(t.Context(), call(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if kindOf(d) == "deny-argument" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the module was not reloaded after its file changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
