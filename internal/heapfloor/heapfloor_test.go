package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		floor, live uint64
		base        int
		limit       int64
		want        int
	}{
		{"small heap reaches the floor", 64 * mib, 8 * mib, 100, math.MaxInt64, 700},
		{"large heap keeps GOGC", 64 * mib, 6 << 30, 100, math.MaxInt64, 100},
		{"heap at the floor keeps GOGC", 64 * mib, 64 * mib, 100, math.MaxInt64, 100},
		{"goal above the floor keeps GOGC", 64 * mib, 40 * mib, 100, math.MaxInt64, 100},
		{"higher GOGC is kept", 64 * mib, 8 * mib, 1000, math.MaxInt64, 1000},
		{"nothing measured yet counts 4 MiB", 64 * mib, 0, 100, math.MaxInt64, 1500},
		{"memory limit halves the floor", 64 * mib, 8 * mib, 100, 32 * mib, 100},
		{"memory limit above twice the floor", 64 * mib, 8 * mib, 100, 512 * mib, 700},
		{"bounded", 1 << 50, 4 * mib, 100, math.MaxInt64, maxPercent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.floor, tc.live, tc.base, tc.limit); got != tc.want {
				t.Errorf("Percent(%d, %d, %d, %d) = %d, want %d", tc.floor, tc.live, tc.base, tc.limit, got, tc.want)
			}
		})
	}
}

var sink []byte

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// liveHeap is the heap that survived the last collection, at least the
// runtime's smallest heap goal (4 MiB), as Percent counts it.
func liveHeap(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("metric %s is not supported by this runtime", s[0].Name)
	}
	return max(s[0].Value.Uint64(), 4<<20)
}

// hold is Hold with the release registered as a cleanup, so a failing test
// leaves no floor behind for the next one (with -count=N).
func hold(t *testing.T, floor uint64) func() {
	t.Helper()
	release := Hold(floor)
	t.Cleanup(release)
	return release
}

// eventually collects until ok holds or ten seconds pass: the floor follows
// the live heap after each collection, on the runtime's cleanup goroutine,
// so the test waits on the condition rather than on a count of collections.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s of collections: %s (GOGC %d)", what, gcPercent())
		}
		runtime.GC()
		runtime.Gosched()
	}
}

// TestHoldRaisesAndRestores: holding a floor well above the live heap
// raises GOGC above the configured 100, and releasing it (twice: the second
// call does nothing) puts 100 back. How much less often the collector runs
// is measured by BenchmarkCollections, not asserted here: collection counts
// depend on the machine's load and the race detector.
func TestHoldRaisesAndRestores(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	floor := 16 * liveHeap(t)
	release := hold(t, floor)
	if p := gcPercent(); p <= 100 {
		t.Fatalf("GOGC is %d with a %d-byte floor over a %d-byte live heap, want above 100", p, floor, liveHeap(t))
	}
	release()
	release()
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC is %d after release, want 100 back", p)
	}
}

// TestHoldFollowsLiveHeap: after each collection the floor recomputes
// GOGC from the live heap, so a live heap that grows past the floor gets
// the configured GOGC back, and one that shrinks again gets the raised one.
func TestHoldFollowsLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	floor := 4 * liveHeap(t)
	hold(t, floor)
	eventually(t, "GOGC not raised over a small live heap", func() bool { return gcPercent() > 100 })

	// Keep twice the floor live: the heap goal is above the floor anyway.
	live := make([][]byte, 0, 2*floor/(1<<20))
	for range cap(live) {
		live = append(live, make([]byte, 1<<20))
	}
	eventually(t, "GOGC not back to 100 with a live heap above the floor", func() bool { return gcPercent() == 100 })
	runtime.KeepAlive(live)

	eventually(t, "GOGC not raised again once the live heap shrank", func() bool { return gcPercent() > 100 })
}

// TestHoldLargestFloor: with two holders the larger floor applies until it
// is released.
func TestHoldLargestFloor(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	live := liveHeap(t)
	r1 := hold(t, 8*live)
	p1 := gcPercent()
	r2 := hold(t, 128*live)
	p2 := gcPercent()
	r2()
	p3 := gcPercent()
	r1()
	if !(p2 > p1 && p3 < p2) || gcPercent() != 100 {
		t.Errorf("GOGC %d with a small floor, %d with a large one too, %d after its release, %d after both; want the larger floor to raise it and the releases to lower it back to 100",
			p1, p2, p3, gcPercent())
	}
	// The small floor outlives the other holder's release.
	if p3 <= 100 {
		t.Errorf("GOGC %d after the large floor's release, want the small floor (%d with it alone) still above 100", p3, p1)
	}
}

// TestHoldRespectsGOGCOff: an operator's GOGC=off stays off.
func TestHoldRespectsGOGCOff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	release := hold(t, 64<<20)
	runtime.GC()
	if p := gcPercent(); p != -1 {
		t.Errorf("GOGC is %d with GOGC=off and a floor, want -1", p)
	}
	release()
	if p := gcPercent(); p != -1 {
		t.Errorf("GOGC is %d after release, want -1", p)
	}
}

// collections counts the collections while 256 MiB of short-lived garbage
// is allocated in 64 KiB pieces.
func collections() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	for range 4096 {
		sink = make([]byte, 64<<10)
	}
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// BenchmarkCollections measures what the floor is for: each iteration
// allocates 256 MiB of short-lived garbage with GOGC=100, then again with a
// 128 MiB floor held, and reports the collections of each and their ratio
// (floor/GOGC; about 0.1 on an idle machine, ADR 0014). Counts depend on
// the load, so they are measured here, never asserted in a test.
func BenchmarkCollections(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var without, with uint64
	for b.Loop() {
		runtime.GC()
		without += collections()
		release := Hold(128 << 20)
		runtime.GC()
		with += collections()
		release()
	}
	n := float64(b.N)
	b.ReportMetric(float64(without)/n, "gc-gogc/op")
	b.ReportMetric(float64(with)/n, "gc-floor/op")
	if without > 0 {
		b.ReportMetric(float64(with)/float64(without), "floor/gogc")
	}
}
