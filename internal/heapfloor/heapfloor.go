// Package heapfloor keeps the Go garbage collector's heap goal at or above a
// floor, without changing it for a heap that is already larger.
//
// With GOGC=100 the collector runs each time the heap has grown by the heap
// that survived the last collection. A gateway with a small catalog keeps a
// few megabytes live and allocates hundreds of objects per request, so it
// collected every hundred or so requests and spent a tenth or more of its
// CPU on it. Raising GOGC for good would not do: a gateway holding a
// million tools keeps gigabytes live and would let its heap grow by as much
// again. The floor instead sets, after each collection, the percentage
// that puts the next goal at the floor when the live heap is small, and
// the configured percentage (GOGC, default 100) once the live heap is large
// enough that this goal is above the floor anyway. A memory limit
// (GOMEMLIMIT, debug.SetMemoryLimit) still bounds the heap: the floor is
// kept at most half of it.
package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the percentage set, whatever the live heap: with a
// nearly empty heap the percentage for the floor would be huge.
const maxPercent = 100_000

var (
	mu sync.Mutex
	// holders are the floors held, each by its own holder.
	holders = map[*holder]struct{}{}
	// base is the percentage in force before the first holder (GOGC), put
	// back when the last one releases.
	base int
	// floor is the largest floor held, 0 with no holder.
	floor uint64
	// armed says a sentinel is waiting for the next collection.
	armed bool
	// set is the percentage last set.
	set int
)

// holder is one Hold's floor. It must not be zero-size: pointers to
// zero-size values may all be equal, and then every Hold would share one key
// and the first release would drop every floor.
type holder struct{ floor uint64 }

// Hold applies floor bytes as the heap goal's floor until release is called.
// Several holders may hold at once (tests run several servers in one
// process); the largest floor applies. A floor of 0, or GOGC=off, holds
// nothing.
func Hold(floor uint64) (release func()) {
	if floor == 0 {
		return func() {}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(holders) == 0 {
		base = debug.SetGCPercent(100)
		debug.SetGCPercent(base)
		set = base
	}
	if base < 0 {
		// GOGC=off: the operator wants no collections by growth.
		return func() {}
	}
	h := &holder{floor}
	holders[h] = struct{}{}
	update()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			delete(holders, h)
			update()
		})
	}
}

// update recomputes the floor and the percentage; mu is held.
func update() {
	floor = 0
	for h := range holders {
		floor = max(floor, h.floor)
	}
	if floor == 0 {
		if set != base {
			debug.SetGCPercent(base)
			set = base
		}
		return
	}
	adjust()
	if !armed {
		armed = true
		arm()
	}
}

// sentinel is allocated to be collected: its cleanup runs after the
// collection that found it unreachable. It holds a pointer so that it is
// not a tiny allocation, which may share a block with live objects and be
// collected late.
type sentinel struct {
	_ *byte
	_ [8]byte
}

// arm waits for the next collection.
func arm() {
	runtime.AddCleanup(new(sentinel), func(struct{}) { afterGC() }, struct{}{})
}

// afterGC runs on the runtime's cleanup goroutine after a collection.
func afterGC() {
	mu.Lock()
	defer mu.Unlock()
	if floor == 0 {
		armed = false
		return
	}
	adjust()
	arm()
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// adjust sets the percentage for the live heap of the last collection;
// mu is held.
func adjust() {
	metrics.Read(liveSample)
	live := uint64(0)
	if liveSample[0].Value.Kind() == metrics.KindUint64 {
		live = liveSample[0].Value.Uint64()
	}
	p := Percent(floor, live, base, debug.SetMemoryLimit(-1))
	// Small changes are not worth a new pacing target.
	if p != set && (p > set+set/10 || p < set-set/10) {
		debug.SetGCPercent(p)
		set = p
	}
}

// Percent is the GOGC percentage that makes the next heap goal at least
// floor bytes with live bytes surviving the last collection, and never
// less than base. The floor is at most half of limit (the memory limit,
// math.MaxInt64 without one).
func Percent(floor, live uint64, base int, limit int64) int {
	if limit > 0 && limit != math.MaxInt64 {
		floor = min(floor, uint64(limit)/2)
	}
	// Before the first collection nothing is measured; 4 MiB is the
	// runtime's smallest heap goal.
	live = max(live, 4<<20)
	if floor <= live {
		return base
	}
	p := (floor - live) * 100 / live
	return max(base, int(min(p, maxPercent)))
}
