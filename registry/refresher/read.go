package refresher

import (
	"slices"
	"time"

	"github.com/toolmesh/toolmesh/registry"
)

// Lookup finds the route served at path (the request path without its query
// string), matching public paths exactly. ok is false for an unknown path;
// snap is nil while the route has no snapshot yet. It never locks.
func (r *Registry) Lookup(path string) (key string, snap *registry.Snapshot, ok bool) {
	e := r.state.Load().byPath[path]
	if e == nil {
		return "", nil, false
	}
	return e.route.Key, e.snap, true
}

// Snapshot returns the current snapshot of the route, or nil.
func (r *Registry) Snapshot(key string) *registry.Snapshot {
	if e := r.state.Load().entries[key]; e != nil {
		return e.snap
	}
	return nil
}

// Routes returns the listed routes sorted by key (for the xDS translator).
// The slice is a copy; the routes' inner slices and pointers are shared and
// must not be modified.
func (r *Registry) Routes() []registry.Route {
	return slices.Clone(r.state.Load().routes)
}

// Subscribe returns a channel that receives a value whenever the routes or
// any snapshot change. Wake-ups coalesce (buffer 1): after one, read the
// current state with Routes and Snapshot. The func unsubscribes; the channel
// is not closed.
func (r *Registry) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	r.subMu.Lock()
	id := r.nextSub
	r.nextSub++
	r.subs[id] = ch
	r.subMu.Unlock()
	return ch, func() {
		r.subMu.Lock()
		delete(r.subs, id)
		r.subMu.Unlock()
	}
}

// Ready reports whether at least one route has a snapshot (docs/operators.md,
// "Failure modes and what they look like").
func (r *Registry) Ready() bool { return r.state.Load().ready }

// Health returns the /health detail (docs/operators.md): every listed route,
// sorted by key, with its snapshot and errors.
func (r *Registry) Health() registry.Health {
	st := r.state.Load()
	now := r.now()
	h := registry.Health{
		Ready:                 st.ready,
		Routes:                make([]registry.RouteStatus, 0, len(st.routes)),
		RoutesWithoutSnapshot: []string{},
		PortalError:           st.portalErr,
		PortalErrorAt:         timePtr(st.portalErrAt),
		PortalNextRetryAt:     timePtr(st.portalRetryAt),
		LastListing:           timePtr(st.lastListing),
		ListingRestored:       st.listingRestored,
	}
	if sr, ok := r.store.(registry.StatusReporter); ok {
		ss := sr.Status()
		h.Store = &ss
	}
	for _, rt := range st.routes {
		e := st.entries[rt.Key]
		rs := registry.RouteStatus{
			Key:         rt.Key,
			PublicPath:  rt.Path(),
			LastRefresh: timePtr(e.lastRefresh),
			LastError:   e.lastErr,
			LastErrorAt: timePtr(e.lastErrAt),
			StoreError:  e.storeErr,
			Restored:    e.restored,
			NextRetryAt: timePtr(e.retryAt),
		}
		if !e.lastRefresh.IsZero() {
			rs.LastSuccessAge = age(now, e.lastRefresh)
		}
		if s := e.snap; s != nil {
			rs.SnapshotVersion = s.Version
			rs.SnapshotAge = age(now, s.FetchedAt)
			rs.FetchedAt = timePtr(s.FetchedAt)
			rs.Tools = len(s.Tools)
			rs.Ambiguous = slices.Clone(s.Ambiguous)
			rs.Rejected = slices.Clone(s.Rejected)
			rs.AmbiguousItems = slices.Clone(s.AmbiguousItems)
			rs.Shadowed = slices.Clone(s.Shadowed)
			rs.Quarantined = slices.Clone(s.Quarantined)
			rs.SurfaceErrors = slices.Clone(s.SurfaceErrors)
		} else {
			h.RoutesWithoutSnapshot = append(h.RoutesWithoutSnapshot, rt.Key)
		}
		rs.Services = r.serviceStatus(rt, e.snap)
		h.Routes = append(h.Routes, rs)
	}
	return h
}

// age is the /health form of the time since t, whole seconds.
func age(now, t time.Time) string { return max(now.Sub(t), 0).Round(time.Second).String() }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
