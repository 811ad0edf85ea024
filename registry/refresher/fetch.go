package refresher

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"
	"weak"

	"github.com/toolmesh/toolmesh/registry"
)

// serviceFetch is one Tool Service's latest fetch, for the re-listing
// schedule and the health detail.
type serviceFetch struct {
	def        registry.ToolService // the definition it was fetched with
	manifest   *registry.Manifest   // last good (MCP servers only: reused while fresh)
	fresh      registry.Freshness
	listedAt   time.Time
	freshUntil time.Time
	lastErr    string
	lastErrAt  time.Time
}

// fetches holds every service's serviceFetch. Only refresh cycles write it
// (from their parallel fetches, hence the lock); Health reads it.
type fetches struct {
	mu sync.Mutex
	by map[string]serviceFetch
}

func (f *fetches) get(name string) (serviceFetch, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf, ok := f.by[name]
	return sf, ok
}

func (f *fetches) put(name string, sf serviceFetch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]serviceFetch{}
	}
	f.by[name] = sf
}

// fetchService fetches one Tool Service for a refresh cycle: a native
// manifest every time, an MCP server's listing unless the last one is
// still fresh for the same definition.
func (r *Registry) fetchService(ctx context.Context, svc registry.ToolService) (*registry.Manifest, error) {
	prev, _ := r.fetches.get(svc.Name)
	now := r.now()
	if !svc.IsMCP() {
		m, err := r.fetcher.Fetch(ctx, svc)
		r.fetches.put(svc.Name, recordFetch(prev, svc, nil, registry.Freshness{}, err, now))
		return m, err
	}
	if prev.manifest != nil && now.Before(prev.freshUntil) && reflect.DeepEqual(prev.def.SharedDefinition(), svc.SharedDefinition()) {
		return prev.manifest, nil
	}
	m, fr, err := r.mcp.List(ctx, svc)
	r.fetches.put(svc.Name, recordFetch(prev, svc, m, fr, err, now))
	return m, err
}

func recordFetch(prev serviceFetch, svc registry.ToolService, m *registry.Manifest, fr registry.Freshness, err error, now time.Time) serviceFetch {
	if err != nil {
		prev.lastErr, prev.lastErrAt = err.Error(), now
		prev.freshUntil = time.Time{} // list again next cycle
		return prev
	}
	return serviceFetch{def: svc, manifest: m, fresh: fr, listedAt: now, freshUntil: now.Add(fr.FreshFor())}
}

// serviceStatus builds the service lines of route rt, whose snapshot is
// snap (nil when it has none): what the snapshot serves from each service,
// and its latest fetch.
func (r *Registry) serviceStatus(rt registry.Route, snap *registry.Snapshot) []registry.ServiceStatus {
	out := registry.ServiceLines(rt, snap)
	for i, svc := range rt.ToolServices {
		f, ok := r.fetches.get(svc.Name)
		if !ok {
			continue
		}
		st := &out[i]
		st.LastError, st.LastErrorAt = f.lastErr, timePtr(f.lastErrAt)
		if svc.IsMCP() {
			st.ListedAt, st.CacheScope = timePtr(f.listedAt), f.fresh.CacheScope
			if f.freshUntil.After(f.listedAt) {
				st.FreshUntil = timePtr(f.freshUntil)
			}
		}
	}
	return out
}

// canonMemo remembers, per Tool Service, the last fetched manifest and its
// canonical form, so that a fetcher that hands back the same manifest (an
// MCP server's listing while fresh, an in-memory fetcher) costs no
// canonicalization. It holds the manifest weakly: a fetcher that decodes a
// new manifest every time drops the old one, and the memo keeps no copy.
// A manifest is not modified once a fetcher returned it.
type canonMemo struct {
	mu sync.Mutex
	by map[string]canonEntry
}

type canonEntry struct {
	m *registry.Canonical
	w weak.Pointer[registry.Manifest]
}

// of returns the canonical form of m, fetched for service name.
func (c *canonMemo) of(name string, m *registry.Manifest) (*registry.Canonical, error) {
	w := weak.Make(m)
	c.mu.Lock()
	e, ok := c.by[name]
	c.mu.Unlock()
	if ok && e.w == w {
		return e.m, nil
	}
	canon, err := registry.Canonicalize(m)
	if err != nil {
		return nil, fmt.Errorf("tool service %q: canonicalize manifest: %w", name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]canonEntry{}
	}
	c.by[name] = canonEntry{m: canon, w: w}
	return canon, nil
}

// keep forgets the services not in names (a full cycle's services).
func (c *canonMemo) keep(names map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.by {
		if !names[name] {
			delete(c.by, name)
		}
	}
}
