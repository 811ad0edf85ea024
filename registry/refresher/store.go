package refresher

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolmesh/toolmesh/internal/parallel"
	"github.com/toolmesh/toolmesh/registry"
)

// The refresher's use of the Store. Every call is bounded by FetchTimeout
// (a Store bounds its own operations more tightly: the Redis store by
// OpTimeout), runs after the state it concerns is published, and only ever
// records its failures: the Store never stops serving or refreshing.

// warmStartChunk is how many routes the warm start loads, restores and
// publishes at a time. Each chunk has its own FetchTimeout, so the bound
// is on the Store's responsiveness, not on the size of the catalog. With
// one bound on the whole phase, a gateway of 10,000 routes (over a minute
// of loading and decoding on two cores) would have restored only the routes
// loaded within the default 10 s. Chunks also bound the stored bytes held
// at once and let the first routes serve before the last are read.
const warmStartChunk = 256

// warmStart loads a stored snapshot for every listed route that has none, so
// a cold start can serve before the Tool Services answer. The loads run
// concurrently (at most StoreWorkers at once, or in a few round trips for a
// BatchStore), warmStartChunk routes at a time, each chunk bounded by one
// FetchTimeout and published when loaded. A chunk that runs out of time ends
// the warm start: a Store that slow is not worth waiting for, and the
// remaining routes are built from their Tool Services as usual.
func (r *Registry) warmStart(ctx context.Context) {
	var keys []string
	old := r.state.Load()
	for _, rt := range old.routes {
		if old.entries[rt.Key].snap == nil {
			keys = append(keys, rt.Key)
		}
	}
	loaded := 0
	for len(keys) > 0 {
		part := keys[:min(warmStartChunk, len(keys))]
		keys = keys[len(part):]
		wctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
		snaps, errs := r.loadMany(wctx, part)
		timedOut := wctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return
		}
		loaded += r.restoreChunk(part, snaps, errs)
		if timedOut && len(keys) > 0 {
			r.log.Warn("warm start stopped: the store did not answer within fetchTimeout; the remaining routes are built from their tool services",
				"restored", loaded, "remaining", len(keys), "fetchTimeout", r.opts.FetchTimeout)
			break
		}
	}
	if loaded > 0 {
		r.log.Info("warm start from stored snapshots", "routes", loaded)
	}
}

// restoreChunk publishes the stored snapshots loaded for keys (snaps[i] and
// errs[i] belong to keys[i]) on the current state and returns how many it
// restored. A route built meanwhile (a refresh cannot run before Start
// returns, but the listing may have changed the entry) keeps its snapshot.
func (r *Registry) restoreChunk(keys []string, snaps []*registry.Snapshot, errs []error) int {
	old := r.state.Load()
	var st *state
	loaded := 0
	for i, key := range keys {
		e := old.entries[key]
		if e == nil || e.snap != nil {
			continue
		}
		cp := *e
		snap, err := snaps[i], errs[i]
		switch {
		case err != nil:
			r.log.Warn("warm start: load stored snapshot", "route", key, "err", err)
			cp.storeErr = "load: " + err.Error()
		case snap == nil:
			cp.storeErr = ""
		case snap.Route != key:
			cp.storeErr = fmt.Sprintf("load: stored snapshot is for route %q", snap.Route)
		case !servicesListed(snap, e.route):
			// Its tools would be routed to clusters the listing no longer has.
			cp.storeErr = "load: stored snapshot uses tool services the route no longer lists; waiting for the refresh"
		default:
			r.log.Debug("warm start from stored snapshot", "route", key, "version", snap.Version, "fetchedAt", snap.FetchedAt)
			cp.snap, cp.storeErr, cp.restored = snap, "", true
			loaded++
		}
		if cp.snap == e.snap && cp.storeErr == e.storeErr {
			continue
		}
		if st == nil {
			st = old.clone()
		}
		st.entries[key] = &cp
	}
	if st == nil {
		return loaded
	}
	st.index()
	r.publish(st, loaded > 0)
	// Stored tool embeddings are restored now, without a call.
	var restored []*registry.Snapshot
	for _, key := range keys {
		if e := st.entries[key]; e.restored && e.snap != nil {
			restored = append(restored, e.snap)
		}
	}
	r.embedSnapshots(restored, nil)
	return loaded
}

// servicesListed reports whether every Tool Service of snap is still one of
// the route's.
func servicesListed(snap *registry.Snapshot, rt registry.Route) bool {
	for _, s := range snap.ToolServices() {
		if !slices.ContainsFunc(rt.ToolServices, func(t registry.ToolService) bool { return t.Name == s.Name }) {
			return false
		}
	}
	return true
}

// loadMany loads the stored snapshots of keys: out[i] and errs[i] belong to
// keys[i].
func (r *Registry) loadMany(ctx context.Context, keys []string) ([]*registry.Snapshot, []error) {
	if bs, ok := r.store.(registry.BatchStore); ok {
		return bs.LoadMany(ctx, keys)
	}
	snaps, errs := make([]*registry.Snapshot, len(keys)), make([]error, len(keys))
	parallel.ForEach(len(keys), r.opts.StoreWorkers, func(i int) {
		snaps[i], errs[i] = r.store.Load(ctx, keys[i])
	})
	return snaps, errs
}

// restoreListing returns the listing last saved in the Store, or nil when
// the Store keeps none, has none or fails. It is used only while this
// process has never had a Portal listing: a cold start with the Portal down
// then knows which routes to warm-start and serve.
func (r *Registry) restoreListing(ctx context.Context) *registry.Listing {
	ls, ok := r.store.(registry.ListingStore)
	if !ok {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	l, err := ls.LoadListing(lctx)
	cancel()
	if err == nil && l != nil {
		err = l.Validate()
	}
	switch {
	case err != nil:
		r.log.Warn("portal down and the stored listing cannot be used", "err", err)
		return nil
	case l == nil:
		return nil
	}
	r.log.Warn("portal down at start: serving the routes of the stored listing", "routes", len(l.Routes))
	return l
}

// saveListing keeps the Portal's latest listing (as the Portal gave it,
// before catalog overrides) in a ListingStore, for restoreListing. It runs
// after the warm start, so a slow Store delays serving by one load, not by
// a save too; l is nil when the listing failed.
func (r *Registry) saveListing(ctx context.Context, l *registry.Listing) {
	ls, ok := r.store.(registry.ListingStore)
	if !ok || l == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	defer cancel()
	if err := ls.SaveListing(sctx, l); err != nil {
		r.log.Warn("save listing to store", "err", err)
	}
}

// persist makes the Store hold the routes' snapshots after a refresh and
// records failures per route. A BatchStore is asked to sync every route's
// current snapshot (its last good one, even if this refresh failed), which
// rewrites only those it does not hold at that version: a Store that lost
// its data, say a restarted Redis, is filled again by the next refresh.
// Another Store gets the new snapshots only.
func (r *Registry) persist(ctx context.Context, changed, current []*registry.Snapshot) {
	bs, batch := r.store.(registry.BatchStore)
	snaps := changed
	if batch {
		snaps = current
	}
	if len(snaps) == 0 {
		return
	}
	storeErrs := make([]string, len(snaps))
	sctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	defer cancel()
	record := func(i int, err error) {
		if err != nil {
			r.log.Warn("save snapshot to store", "route", snaps[i].Route, "err", err)
			storeErrs[i] = "save: " + err.Error()
		}
	}
	if batch {
		for i, err := range bs.Sync(sctx, snaps) {
			record(i, err)
		}
	} else {
		r.parallel(len(snaps), func(i int) { record(i, r.store.Save(sctx, snaps[i])) })
	}
	old := r.state.Load()
	var st *state
	for i, s := range snaps {
		e := old.entries[s.Route]
		if e == nil || e.storeErr == storeErrs[i] {
			continue
		}
		if st == nil {
			st = old.clone()
		}
		cp := *e
		cp.storeErr = storeErrs[i]
		st.entries[s.Route] = &cp
	}
	if st != nil {
		st.index()
		r.publish(st, false)
	}
}

// embedSnapshots hands snaps to the embedding services (ADR 0007): each
// search-mode snapshot reuses the vectors of the route's snapshot in old,
// the state before this refresh (nil: none), and is saved to the Store
// again once its embeddings are computed, unless a newer snapshot replaced
// it meanwhile.
func (r *Registry) embedSnapshots(snaps []*registry.Snapshot, old *state) {
	var prev func(string) *registry.Snapshot
	if old != nil {
		prev = func(route string) *registry.Snapshot {
			if e := old.entries[route]; e != nil {
				return e.snap
			}
			return nil
		}
	}
	r.embedders.Embed(snaps, prev, func(ctx context.Context, s *registry.Snapshot) {
		if cur := r.state.Load().entries[s.Route]; cur == nil || cur.snap != s {
			return
		}
		if err := r.store.Save(ctx, s); err != nil {
			r.log.Warn("save snapshot with tool embeddings to store", "route", s.Route, "err", err)
		}
	})
}
