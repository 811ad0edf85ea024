package embed

import (
	"sync"
	"sync/atomic"
	"time"
)

// queryCache keeps recent query embeddings without a mutex of its own:
// two generations of sync.Map behind an atomic pointer; when the current one holds max
// entries it becomes the previous one and a new, empty one starts, so at
// most 2×max entries are held and a hot entry survives by being copied
// forward on use.
type queryCache struct {
	max int
	ttl time.Duration
	gen atomic.Pointer[cacheGens]
}

type cacheGens struct {
	cur, prev *cacheGen
}

type cacheGen struct {
	m sync.Map // string → cached
	n atomic.Int64
}

type cached struct {
	v  []float32
	at time.Time
}

func newQueryCache(max int, ttl time.Duration) *queryCache {
	c := &queryCache{max: max, ttl: ttl}
	c.gen.Store(&cacheGens{cur: &cacheGen{}, prev: &cacheGen{}})
	return c
}

func (c *queryCache) get(key string, now time.Time) ([]float32, bool) {
	g := c.gen.Load()
	if e, ok := g.cur.m.Load(key); ok {
		if ce := e.(cached); now.Sub(ce.at) < c.ttl {
			return ce.v, true
		}
		return nil, false
	}
	if e, ok := g.prev.m.Load(key); ok {
		if ce := e.(cached); now.Sub(ce.at) < c.ttl {
			c.store(g, key, ce)
			return ce.v, true
		}
	}
	return nil, false
}

func (c *queryCache) put(key string, v []float32, now time.Time) {
	c.store(c.gen.Load(), key, cached{v: v, at: now})
}

func (c *queryCache) store(g *cacheGens, key string, e cached) {
	if _, loaded := g.cur.m.Swap(key, e); !loaded && g.cur.n.Add(1) >= int64(c.max) {
		// Rotate once: only the caller whose CAS wins starts the new generation.
		c.gen.CompareAndSwap(g, &cacheGens{cur: &cacheGen{}, prev: g.cur})
	}
}
