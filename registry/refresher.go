package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Refresher defaults.
const (
	DefaultInterval     = 30 * time.Second
	DefaultFetchTimeout = 10 * time.Second
	DefaultWorkers      = 8
)

// Options configures a [Registry].
type Options struct {
	Source  Source          // the Portal; required
	Fetcher ManifestFetcher // default NewHTTPFetcher(nil, 0)
	Store   Store           // default NewMemoryStore()
	// Interval is the time between refresh cycles of Run (default 30s).
	Interval time.Duration
	// FetchTimeout bounds each Portal listing, manifest fetch and Store call
	// (default 10s), so one hanging peer cannot stall a cycle for long.
	FetchTimeout time.Duration
	// Workers bounds concurrent manifest fetches and snapshot builds (default 8).
	Workers int
	Logger  *slog.Logger     // default: discard
	Now     func() time.Time // default time.Now
}

// Registry keeps the Portal's routes and a snapshot per route up to date
// (SPEC §5). Readers (Lookup, Snapshot, Routes, Health) never lock: they load
// one immutable state through an atomic pointer. Writers (refresh cycles)
// are serialized and publish a new state.
type Registry struct {
	src     Source
	fetcher ManifestFetcher
	store   Store
	opts    Options
	log     *slog.Logger
	now     func() time.Time

	cycle sync.Mutex // serializes refresh cycles, the only writers of state
	state atomic.Pointer[state]

	subMu   sync.Mutex
	subs    map[int]chan struct{}
	nextSub int
}

// state is one immutable view of the registry. A cycle that changes
// anything copies it (and the entries it changes) and publishes the copy.
type state struct {
	routes      []Route           // listed routes, sorted by key
	entries     map[string]*entry // route key → entry
	byPath      map[string]*entry // public path → entry
	ready       bool              // some route has a snapshot
	portalErr   string
	portalErrAt time.Time
	lastListing time.Time
}

// entry is one route's slot: its definition, last good snapshot and status.
type entry struct {
	route       Route
	snap        *Snapshot
	lastRefresh time.Time
	lastErr     string
	lastErrAt   time.Time
	storeErr    string
}

func (s *state) clone() *state {
	c := *s
	c.entries = make(map[string]*entry, len(s.entries))
	for k, e := range s.entries {
		c.entries[k] = e
	}
	return &c
}

// index recomputes the derived fields after entries or routes changed.
func (s *state) index() {
	s.byPath = make(map[string]*entry, len(s.entries))
	s.ready = false
	for _, e := range s.entries {
		s.byPath[e.route.Path()] = e
		if e.snap != nil {
			s.ready = true
		}
	}
}

// New returns a Registry with no routes; call Start, then Run. It panics
// without a Source, which is a wiring mistake.
func New(opts Options) *Registry {
	if opts.Source == nil {
		panic("registry: Options.Source is required")
	}
	if opts.Fetcher == nil {
		opts.Fetcher = NewHTTPFetcher(nil, 0)
	}
	if opts.Store == nil {
		opts.Store = NewMemoryStore()
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Registry{
		src:     opts.Source,
		fetcher: opts.Fetcher,
		store:   opts.Store,
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		subs:    map[int]chan struct{}{},
	}
	empty := &state{entries: map[string]*entry{}}
	empty.index()
	r.state.Store(empty)
	return r
}

// Start runs the first cycle in the start-up order of SPEC §5: Portal
// listing, warm start from the Store for the listed routes, then manifests.
// Failures are recorded in the health detail, not returned: the registry
// serves what it has. It returns an error only when ctx is done.
func (r *Registry) Start(ctx context.Context) error {
	if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("first registry refresh incomplete", "err", err)
	}
	return ctx.Err()
}

// Run refreshes every Interval until ctx is done.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
				r.log.Debug("registry refresh incomplete", "err", err)
			}
		}
	}
}

// Refresh runs one cycle: list the Portal (a failure keeps the previous
// routes), warm-start listed routes that have no snapshot from the Store,
// fetch each Tool Service's manifest once, and rebuild every route whose
// inputs changed. A route that fails keeps its last good snapshot. The error
// joins everything that failed; it is informational.
func (r *Registry) Refresh(ctx context.Context) error {
	r.cycle.Lock()
	defer r.cycle.Unlock()
	listErr := r.list(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.warmStart(ctx)
	return errors.Join(listErr, r.refreshManifests(ctx))
}

// list asks the Portal for its routes and applies a successful answer.
func (r *Registry) list(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	l, err := r.src.List(lctx)
	cancel()
	if err == nil {
		err = l.Validate() // a custom Source may skip it; Validate is idempotent
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	old := r.state.Load()
	st := old.clone()
	now := r.now()
	if err != nil {
		r.log.Warn("portal listing failed; keeping the previous routes", "err", err)
		st.portalErr, st.portalErrAt = err.Error(), now
		r.publish(st, false)
		return fmt.Errorf("portal listing: %w", err)
	}
	st.portalErr, st.portalErrAt, st.lastListing = "", time.Time{}, now
	routes := slices.Clone(l.Routes)
	slices.SortFunc(routes, func(a, b Route) int { return strings.Compare(a.Key, b.Key) })
	st.routes = routes
	st.entries = make(map[string]*entry, len(routes))
	for _, rt := range routes {
		e := &entry{route: rt}
		if prev := old.entries[rt.Key]; prev != nil {
			cp := *prev
			cp.route = rt
			e = &cp
		}
		st.entries[rt.Key] = e
	}
	st.index()
	var removed []string
	for key := range old.entries {
		if st.entries[key] == nil {
			removed = append(removed, key)
		}
	}
	slices.Sort(removed)
	r.publish(st, !reflect.DeepEqual(old.routes, routes))
	for _, key := range removed {
		r.log.Info("route no longer listed by the portal; removed", "route", key)
		sctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
		if err := r.store.Delete(sctx, key); err != nil {
			r.log.Warn("delete stored snapshot", "route", key, "err", err)
		}
		cancel()
	}
	return nil
}

// warmStart loads a stored snapshot for every listed route that has none, so
// a cold start can serve before the Tool Services answer.
func (r *Registry) warmStart(ctx context.Context) {
	old := r.state.Load()
	var st *state
	loaded := false
	for _, rt := range old.routes {
		e := old.entries[rt.Key]
		if e.snap != nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
		snap, err := r.store.Load(sctx, rt.Key)
		cancel()
		if ctx.Err() != nil {
			return
		}
		cp := *e
		switch {
		case err != nil:
			r.log.Warn("warm start: load stored snapshot", "route", rt.Key, "err", err)
			cp.storeErr = "load: " + err.Error()
		case snap == nil:
			cp.storeErr = ""
		case snap.Route != rt.Key:
			cp.storeErr = fmt.Sprintf("load: stored snapshot is for route %q", snap.Route)
		default:
			r.log.Info("warm start from stored snapshot", "route", rt.Key, "version", snap.Version, "fetchedAt", snap.FetchedAt)
			cp.snap, cp.storeErr = snap, ""
			loaded = true
		}
		if cp.snap == e.snap && cp.storeErr == e.storeErr {
			continue
		}
		if st == nil {
			st = old.clone()
		}
		st.entries[rt.Key] = &cp
	}
	if st != nil {
		st.index()
		r.publish(st, loaded)
	}
}

// fetched is the outcome of one manifest fetch.
type fetched struct {
	m   *Manifest
	err error
}

// built is the outcome of one route's refresh.
type built struct {
	key  string
	snap *Snapshot // nil when the version is unchanged
	err  error
}

// refreshManifests fetches every listed Tool Service's manifest once and
// rebuilds the routes whose inputs changed.
func (r *Registry) refreshManifests(ctx context.Context) error {
	st := r.state.Load()
	if len(st.routes) == 0 {
		return nil
	}
	var services []ToolService
	seen := map[string]bool{}
	for _, rt := range st.routes {
		for _, s := range rt.ToolServices {
			if !seen[s.Name] {
				seen[s.Name] = true
				services = append(services, s)
			}
		}
	}
	results := make([]fetched, len(services))
	r.parallel(len(services), func(i int) {
		fctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
		defer cancel()
		m, err := r.fetcher.Fetch(fctx, services[i])
		if err == nil && m == nil {
			err = errors.New("fetcher returned no manifest")
		}
		results[i] = fetched{m: m, err: err}
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	byName := make(map[string]fetched, len(services))
	for i, s := range services {
		byName[s.Name] = results[i]
	}
	fetchedAt := r.now()

	outcomes := make([]built, len(st.routes))
	r.parallel(len(st.routes), func(i int) {
		rt := st.routes[i]
		outcomes[i] = r.refreshRoute(rt, st.entries[rt.Key].snap, byName, fetchedAt)
	})

	next := st.clone()
	changed := false
	var errs []error
	var saves []*Snapshot
	for _, o := range outcomes {
		cp := *next.entries[o.key]
		if o.err != nil {
			r.log.Warn("route refresh failed; keeping its last good snapshot", "route", o.key, "err", o.err)
			cp.lastErr, cp.lastErrAt = o.err.Error(), fetchedAt
			errs = append(errs, o.err)
		} else {
			cp.lastErr, cp.lastErrAt, cp.lastRefresh = "", time.Time{}, fetchedAt
			if o.snap != nil {
				r.log.Info("route snapshot updated", "route", o.key, "version", o.snap.Version,
					"tools", len(o.snap.Tools), "ambiguous", len(o.snap.Ambiguous), "rejected", len(o.snap.Rejected))
				cp.snap = o.snap
				changed = true
				saves = append(saves, o.snap)
			}
		}
		next.entries[o.key] = &cp
	}
	next.index()
	r.publish(next, changed)
	r.save(ctx, saves)
	return errors.Join(errs...)
}

// refreshRoute builds one route's snapshot from this cycle's manifests. It
// is pure apart from reading cur.
func (r *Registry) refreshRoute(rt Route, cur *Snapshot, results map[string]fetched, fetchedAt time.Time) built {
	out := built{key: rt.Key}
	manifests := make(map[string]*Manifest, len(rt.ToolServices))
	var errs []error
	for _, s := range rt.ToolServices {
		res := results[s.Name]
		if res.err != nil {
			errs = append(errs, res.err)
			continue
		}
		manifests[s.Name] = res.m
	}
	if len(errs) > 0 {
		out.err = fmt.Errorf("refresh route %q: %w", rt.Key, errors.Join(errs...))
		return out
	}
	in, err := prepare(rt, manifests)
	if err != nil {
		out.err = err
		return out
	}
	if cur != nil && cur.Version == in.version {
		return out // same content: keep the snapshot (and its pointer)
	}
	out.snap = in.build(fetchedAt)
	return out
}

// save writes new snapshots to the Store after they are served, and records
// store failures in the health detail. The Store never blocks serving.
func (r *Registry) save(ctx context.Context, snaps []*Snapshot) {
	if len(snaps) == 0 {
		return
	}
	storeErrs := make([]string, len(snaps))
	r.parallel(len(snaps), func(i int) {
		sctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
		defer cancel()
		if err := r.store.Save(sctx, snaps[i]); err != nil {
			r.log.Warn("save snapshot to store", "route", snaps[i].Route, "err", err)
			storeErrs[i] = "save: " + err.Error()
		}
	})
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

// parallel runs fn(0..n-1) on at most Workers goroutines and waits.
func (r *Registry) parallel(n int, fn func(i int)) {
	workers := min(r.opts.Workers, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// publish makes st the current state and, when changed, wakes subscribers.
func (r *Registry) publish(st *state, changed bool) {
	r.state.Store(st)
	if !changed {
		return
	}
	r.subMu.Lock()
	defer r.subMu.Unlock()
	for _, ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending; coalesce
		}
	}
}

// Lookup finds the route served at path (the request path without its query
// string), matching public paths exactly. ok is false for an unknown path;
// snap is nil while the route has no snapshot yet. It never locks.
func (r *Registry) Lookup(path string) (key string, snap *Snapshot, ok bool) {
	e := r.state.Load().byPath[path]
	if e == nil {
		return "", nil, false
	}
	return e.route.Key, e.snap, true
}

// Snapshot returns the current snapshot of the route, or nil.
func (r *Registry) Snapshot(key string) *Snapshot {
	if e := r.state.Load().entries[key]; e != nil {
		return e.snap
	}
	return nil
}

// Routes returns the listed routes sorted by key (for the xDS translator).
// The slice is a copy; the routes' inner slices and pointers are shared and
// must not be modified.
func (r *Registry) Routes() []Route {
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

// Ready reports whether at least one route has a snapshot (SPEC §5).
func (r *Registry) Ready() bool { return r.state.Load().ready }

// Health returns the health detail of SPEC §5: every listed route, sorted by
// key, with its snapshot and errors.
func (r *Registry) Health() Health {
	st := r.state.Load()
	now := r.now()
	h := Health{
		Ready:                 st.ready,
		Routes:                make([]RouteStatus, 0, len(st.routes)),
		RoutesWithoutSnapshot: []string{},
		PortalError:           st.portalErr,
		PortalErrorAt:         timePtr(st.portalErrAt),
		LastListing:           timePtr(st.lastListing),
	}
	for _, rt := range st.routes {
		e := st.entries[rt.Key]
		rs := RouteStatus{
			Key:         rt.Key,
			PublicPath:  rt.Path(),
			LastRefresh: timePtr(e.lastRefresh),
			LastError:   e.lastErr,
			LastErrorAt: timePtr(e.lastErrAt),
			StoreError:  e.storeErr,
		}
		if s := e.snap; s != nil {
			confirmed := s.FetchedAt
			if e.lastRefresh.After(confirmed) {
				confirmed = e.lastRefresh
			}
			rs.SnapshotVersion = s.Version
			rs.SnapshotAge = max(now.Sub(confirmed), 0).Round(time.Second).String()
			rs.FetchedAt = timePtr(s.FetchedAt)
			rs.Tools = len(s.Tools)
			rs.Ambiguous = slices.Clone(s.Ambiguous)
			rs.Rejected = slices.Clone(s.Rejected)
		} else {
			h.RoutesWithoutSnapshot = append(h.RoutesWithoutSnapshot, rt.Key)
		}
		h.Routes = append(h.Routes, rs)
	}
	return h
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
