package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
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

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestHoldCollectsLess shows the floor at work in this process: with a
// small live heap, a 128 MiB floor collects several times less often than
// GOGC=100, and releasing the floor puts GOGC back.
func TestHoldCollectsLess(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	without := collections()

	release := Hold(128 << 20)
	runtime.GC() // the floor follows the live heap of each collection
	if p := gcPercent(); p <= 100 {
		t.Fatalf("GOGC is %d with the floor held, want above 100", p)
	}
	with := collections()
	release()
	release() // a second call does nothing
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC is %d after release, want 100 back", p)
	}
	t.Logf("collections for 256 MiB of garbage: %d without the floor, %d with it", without, with)
	if with*4 > without {
		t.Errorf("%d collections with the floor, %d without: want at most a quarter", with, without)
	}
	// After the release, collections happen as often as before.
	runtime.GC()
	if again := collections(); again*2 < without {
		t.Errorf("%d collections after the release, %d before the floor", again, without)
	}
}

// TestHoldLargestFloor: with two holders the larger floor applies until it
// is released.
func TestHoldLargestFloor(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	r1 := Hold(32 << 20)
	p1 := gcPercent()
	r2 := Hold(512 << 20)
	p2 := gcPercent()
	r2()
	runtime.GC()
	p3 := gcPercent()
	r1()
	if !(p2 > p1 && p3 < p2) || gcPercent() != 100 {
		t.Errorf("GOGC %d with 32 MiB, %d with 512 MiB too, %d after its release, %d after both; want the larger floor to raise it and the releases to lower it back to 100",
			p1, p2, p3, gcPercent())
	}
	// The 32 MiB floor outlives the other holder's release.
	if p3 <= 100 {
		t.Errorf("GOGC %d after the 512 MiB floor's release, want the 32 MiB floor (%d with it alone) still above 100", p3, p1)
	}
}

// TestHoldRespectsGOGCOff: an operator's GOGC=off stays off.
func TestHoldRespectsGOGCOff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	release := Hold(64 << 20)
	runtime.GC()
	if p := gcPercent(); p != -1 {
		t.Errorf("GOGC is %d with GOGC=off and a floor, want -1", p)
	}
	release()
	if p := gcPercent(); p != -1 {
		t.Errorf("GOGC is %d after release, want -1", p)
	}
}
