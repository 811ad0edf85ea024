package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// bucket is one key's state of one local limit: a GCRA token bucket (the
// theoretical arrival time of the next call, in Unix nanoseconds) and the
// calls in flight. Both change with atomics only.
type bucket struct {
	tat      atomic.Int64
	inflight atomic.Int64
}

// idle reports whether the bucket is as a fresh one would be: full, with
// nothing in flight, so dropping it loses nothing.
func (b *bucket) idle(now int64) bool { return b.tat.Load() <= now && b.inflight.Load() == 0 }

// rate is a compiled requests-per-unit with a burst: a call is admitted when
// it would not push tat further than tau past now.
type rate struct {
	interval int64 // nanoseconds per request
	tau      int64 // interval × burst
	requests int64
	window   time.Duration
}

// take admits one call into b at now, or says how long until one would be
// admitted. remaining is how many more calls would be admitted now, reset
// how long until the bucket is full again.
func (r *rate) take(b *bucket, now int64) (ok bool, wait time.Duration, remaining int64, reset time.Duration) {
	for {
		old := b.tat.Load()
		tat := max(old, now)
		next := tat + r.interval
		if next-now > r.tau {
			return false, time.Duration(next - now - r.tau), 0, time.Duration(tat - now)
		}
		if b.tat.CompareAndSwap(old, next) {
			return true, 0, (r.tau - (next - now)) / r.interval, time.Duration(next - now)
		}
	}
}

// shardCount spreads the keys of one limit over independently locked maps;
// the lock is taken for reading on the hot path.
const shardCount = 64

// table is the keys of one local limit, bounded: a shard that is full drops
// its idle buckets, and when none is idle a new key shares overflow until
// room is free (so a flood of new keys is limited together, never ignored).
type table struct {
	shards   [shardCount]shard
	perShard int
	overflow bucket
	evicted  atomic.Int64 // idle buckets dropped
	spilled  atomic.Int64 // calls counted in overflow
}

type shard struct {
	mu sync.RWMutex
	m  map[uint64]*bucket
	// noRoomUntil: a sweep found nothing idle; until then new keys go to
	// overflow without sweeping again.
	noRoomUntil int64
	_           [40]byte // keep shards on separate cache lines
}

func newTable(maxKeys int) *table {
	t := &table{perShard: max(1, maxKeys/shardCount)}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]*bucket)
	}
	return t
}

// with runs f on h's bucket while the bucket cannot be evicted (an eviction
// takes the shard's write lock and drops only idle buckets).
func (t *table) with(h uint64, now int64, f func(*bucket)) {
	s := &t.shards[h%shardCount]
	s.mu.RLock()
	if b := s.m[h]; b != nil {
		f(b)
		s.mu.RUnlock()
		return
	}
	s.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.m[h]
	if b == nil {
		if len(s.m) >= t.perShard && now >= s.noRoomUntil {
			for k, v := range s.m {
				if v.idle(now) {
					delete(s.m, k)
					t.evicted.Add(1)
				}
			}
			if len(s.m) >= t.perShard {
				s.noRoomUntil = now + int64(time.Second)
			}
		}
		if len(s.m) >= t.perShard {
			t.spilled.Add(1)
			f(&t.overflow)
			return
		}
		b = new(bucket)
		s.m[h] = b
	}
	f(b)
}

// keys is how many keys the table holds now.
func (t *table) keys() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
