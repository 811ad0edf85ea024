package oauthclient

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// cache holds tokens by request key. Lookups read a sync.Map without a
// lock; inserts take a mutex (they follow a request to the authorization
// server anyway) and, when the cache is full, drop expired entries and then
// the ones used least recently, a tenth of the capacity at a time.
type cache struct {
	max  int
	m    sync.Map // key -> *entry
	mu   sync.Mutex
	n    atomic.Int64
	tick atomic.Int64 // logical clock for recency
}

type entry struct {
	tok  Token
	used atomic.Int64
}

func newCache(max int) *cache { return &cache{max: max} }

func (c *cache) get(key string, now time.Time) (Token, bool) {
	v, ok := c.m.Load(key)
	if !ok {
		return Token{}, false
	}
	e := v.(*entry)
	if !now.Before(e.tok.Expiry) {
		return Token{}, false
	}
	e.used.Store(c.tick.Add(1))
	return e.tok, true
}

func (c *cache) put(key string, t Token, now time.Time) {
	e := &entry{tok: t}
	e.used.Store(c.tick.Add(1))
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, loaded := c.m.Swap(key, e); !loaded {
		c.n.Add(1)
	}
	if int(c.n.Load()) > c.max {
		c.shrink(now)
	}
}

func (c *cache) del(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m.LoadAndDelete(key); ok {
		c.n.Add(-1)
	}
}

// shrink runs with mu held.
func (c *cache) shrink(now time.Time) {
	target := c.max - c.max/10
	if target < 1 {
		target = 1
	}
	type kv struct {
		k    string
		used int64
	}
	var live []kv
	c.m.Range(func(k, v any) bool {
		e := v.(*entry)
		if !now.Before(e.tok.Expiry) {
			c.m.Delete(k)
			c.n.Add(-1)
		} else {
			live = append(live, kv{k.(string), e.used.Load()})
		}
		return true
	})
	if len(live) <= target {
		return
	}
	// Drop the least recently used down to target.
	slices.SortFunc(live, func(a, b kv) int { return cmp.Compare(a.used, b.used) })
	for _, x := range live[:len(live)-target] {
		c.m.Delete(x.k)
		c.n.Add(-1)
	}
}
