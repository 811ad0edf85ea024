package refresher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/parallel"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/fetch"
	"github.com/toolmesh/toolmesh/registry/memstore"
	"github.com/toolmesh/toolmesh/registry/surface"
)

// errEmptyListing is the failure of a listing that names no route.
var errEmptyListing = errors.New("the portal listed no routes (set allowEmptyListing to let an empty listing remove every route)")

// Refresher defaults.
const (
	DefaultInterval     = 30 * time.Second
	DefaultFetchTimeout = 10 * time.Second
	DefaultWorkers      = 8
	DefaultStoreWorkers = 32
	// DefaultRetryBackoff is the first wait before a failed route or Portal
	// listing is tried again; the wait doubles up to RetryBackoffMax.
	DefaultRetryBackoff = time.Second
)

// Options configures a [Registry].
type Options struct {
	Source  registry.Source          // the Portal; required
	Fetcher registry.ManifestFetcher // default NewHTTPFetcher(nil, 0)
	Store   registry.Store           // default memstore.New()
	// Interval is the time between refresh cycles of Run (default 30s).
	Interval time.Duration
	// FetchTimeout bounds each Portal listing, manifest fetch and Store call
	// (the warm start's loads together count as one), default 10s, so one
	// hanging peer cannot stall a cycle for long. A Store may bound its own
	// operations more tightly (redisstore.RedisOptions.OpTimeout).
	FetchTimeout time.Duration
	// Workers bounds concurrent manifest fetches and snapshot builds (default 8).
	Workers int
	// StoreWorkers bounds concurrent Store loads during a warm start, for a
	// Store that cannot load many routes at once (default 32).
	StoreWorkers int
	// RetryBackoff is the first wait before Run tries a failed route (a
	// manifest fetch or build failed; a route without a snapshot is one) or
	// a failed Portal listing again, instead of waiting for the next cycle
	// (default 1s). Each further failure doubles the wait, up to
	// RetryBackoffMax (default and ceiling: Interval); a success resets it.
	// Every wait is jittered down by up to a quarter, so replicas that
	// failed together do not retry together.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// Jitter returns a number in [0, 1) for each backoff wait (default
	// math/rand/v2 Float64); tests fix it to check the schedule.
	Jitter func() float64
	// ReadyAfterWarmStart makes Start return as soon as the warm start has
	// made the registry ready (some route has a stored snapshot), and run
	// the rest of the first cycle, the manifests, in the background; Refresh
	// and Run wait for it. Without it, or when nothing was stored, Start
	// returns after the whole first cycle.
	ReadyAfterWarmStart bool
	Logger              *slog.Logger     // default: discard
	Now                 func() time.Time // default time.Now
	// AllowEmptyListing lets a Portal listing that names no route remove
	// every route. By default such a listing is treated as a failed one: a
	// Portal answering "nothing" is far more often broken than emptied on
	// purpose, and ADR 0005: no failure may empty a route.
	AllowEmptyListing bool
	// Registerer receives the registry's metrics (refreshes and listings by
	// outcome, snapshot age and size per route, readiness); nil registers none.
	Registerer prometheus.Registerer
	// TracerProvider, when set, traces refresh cycles (tracing.go);
	// nil traces nothing.
	TracerProvider trace.TracerProvider

	// MCPLister lists the federated MCP servers (protocol mcp), default
	// NewMCPLister(nil, 0, Credentials).
	MCPLister registry.MCPLister
	// Credentials are the toolmesh config file's credentials, by name: the
	// values of the headers a Portal entry sends to an MCP server.
	Credentials map[string]config.CredentialSource

	// Embeddings are the embedding services search-mode routes may name
	// (catalog.embedding), by name, and DefaultEmbedding the one a
	// search-mode route without catalog.embedding uses ("" none); ADR 0007.
	// EmbeddingClient is their HTTP client (default: a plain one).
	Embeddings       map[string]registry.EmbeddingService
	DefaultEmbedding string
	EmbeddingClient  *http.Client

	// Pins keeps pinned tool definitions and the ones held back
	// (docs/surface.md): surface.RedisStore shares them among replicas
	// and across restarts; default a surface.MemStore, per process.
	Pins surface.Store
}

// Registry keeps the Portal's routes and a snapshot per route up to date
// (ADR 0005). Readers (Lookup, Snapshot, Routes, Health) never lock: they load
// one immutable state through an atomic pointer. Writers (refresh cycles)
// are serialized and publish a new state.
type Registry struct {
	src     registry.Source
	fetcher registry.ManifestFetcher
	mcp     registry.MCPLister
	fetches fetches   // per Tool Service: last fetch, re-listing schedule (fetch.go)
	canon   canonMemo // per Tool Service: the last fetched manifest's canonical form (fetch.go)
	store   registry.Store
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	tracer  trace.Tracer

	cycle   sync.Mutex // serializes refresh cycles, the only writers of state
	state   atomic.Pointer[state]
	metrics *metrics

	// overrides replace the Portal's catalog object of a route (SetCatalogOverrides).
	overrides atomic.Pointer[map[string]registry.Catalog]
	// started is closed when Start's first cycle, manifests included, ends.
	started     chan struct{}
	startedOnce sync.Once
	// retryScheduled wakes Run to re-arm its retry timer when a cycle it
	// did not run (Start's background part, a direct Refresh) scheduled one.
	retryScheduled chan struct{}

	subMu   sync.Mutex
	subs    map[int]chan struct{}
	nextSub int

	// surface is the config's surface block (SetSurface) and pins its
	// store (surface.go).
	surface atomic.Pointer[surface.Config]
	pins    surface.Store

	// embedders are Options.Embeddings, ready to call (nil: none).
	embedders *registry.Embedders
}

// state is one immutable view of the registry. A cycle that changes
// anything copies it (and the entries it changes) and publishes the copy.
type state struct {
	routes      []registry.Route  // listed routes, sorted by key
	entries     map[string]*entry // route key → entry
	byPath      map[string]*entry // public path → entry
	ready       bool              // some route has a snapshot
	portalErr   string
	portalErrAt time.Time
	lastListing time.Time
	// listingRestored: the routes come from the listing saved in the Store,
	// because the Portal has not answered since this process started.
	listingRestored bool
	// portalFailures counts listings failed in a row; portalRetryAt is when
	// Run lists again before the next cycle (zero: no retry pending).
	portalFailures int
	portalRetryAt  time.Time
}

// entry is one route's slot: its definition, last good snapshot and status.
type entry struct {
	route       registry.Route
	snap        *registry.Snapshot
	lastRefresh time.Time
	lastErr     string
	lastErrAt   time.Time
	storeErr    string
	// restored: snap was loaded from the Store and no refresh has confirmed
	// or replaced it yet.
	restored bool
	// failures counts refreshes failed in a row; retryAt is when Run tries
	// the route again before the next cycle (zero: no retry pending).
	failures int
	retryAt  time.Time
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
		opts.Fetcher = fetch.NewHTTPFetcher(nil, 0)
	}
	if opts.MCPLister == nil {
		opts.MCPLister = fetch.NewMCPLister(nil, 0, opts.Credentials)
	}
	if opts.Store == nil {
		opts.Store = memstore.New()
	}
	if opts.Pins == nil {
		opts.Pins = surface.NewMemStore()
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
	if opts.StoreWorkers <= 0 {
		opts.StoreWorkers = DefaultStoreWorkers
	}
	if opts.RetryBackoffMax <= 0 || opts.RetryBackoffMax > opts.Interval {
		opts.RetryBackoffMax = opts.Interval
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = DefaultRetryBackoff
	}
	opts.RetryBackoff = min(opts.RetryBackoff, opts.RetryBackoffMax)
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
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
		mcp:     opts.MCPLister,
		store:   opts.Store,
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		tracer:  newTracer(opts.TracerProvider),
		subs:    map[int]chan struct{}{},
		started: make(chan struct{}),

		retryScheduled: make(chan struct{}, 1),
		pins:           opts.Pins,
	}
	r.surface.Store(&surface.Config{})
	empty := &state{entries: map[string]*entry{}}
	empty.index()
	r.state.Store(empty)
	r.metrics = newMetrics(opts.Registerer, r)
	r.embedders = Embedders(opts)
	return r
}

// Embedders are the embedding services of opts, as a Registry made with
// opts ranks its search-mode routes with them; eval-search ranks with the
// same (nil when opts names none).
func Embedders(opts Options) *registry.Embedders {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return registry.NewEmbedders(opts.Embeddings, opts.DefaultEmbedding, opts.Credentials, opts.EmbeddingClient,
		opts.Registerer, log, opts.FetchTimeout)
}

// Start runs the first cycle in the start-up order of ADR 0005: Portal
// listing, warm start from the Store for the listed routes, then manifests.
// Failures are recorded in the health detail, not returned: the registry
// serves what it has. The registry serves (Lookup, Ready) from the moment
// the warm start publishes, even while the manifests are still being
// fetched; with Options.ReadyAfterWarmStart, Start also returns then. It
// returns an error only when ctx is done. Call it once.
func (r *Registry) Start(ctx context.Context) error {
	r.cycle.Lock()
	listed, listErr := r.list(ctx)
	if ctx.Err() == nil {
		r.warmStart(ctx)
	}
	finish := func() {
		defer r.startedOnce.Do(func() { close(r.started) })
		defer r.cycle.Unlock()
		if ctx.Err() != nil {
			return
		}
		r.saveListing(ctx, listed)
		if err := errors.Join(listErr, r.refreshManifests(ctx, nil)); err != nil && ctx.Err() == nil {
			r.log.Warn("first registry refresh incomplete", "err", err)
		}
	}
	if r.opts.ReadyAfterWarmStart && ctx.Err() == nil && r.Ready() {
		r.log.Info("serving stored snapshots; first manifest refresh continues in the background")
		go finish()
		return nil
	}
	finish()
	return ctx.Err()
}

// Run refreshes every Interval until ctx is done. In between, it retries
// what failed with a jittered exponential backoff (Options.RetryBackoff):
// the Portal listing, and each failed route on its own schedule. A gateway
// started just before its Tool Services is ready a second or two after
// they answer, not a whole Interval later.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		// Timers of Go >= 1.23: Reset and Stop drop a pending expiry.
		if at, ok := r.state.Load().nextRetry(); ok {
			retry.Reset(max(at.Sub(r.now()), 0))
		} else {
			retry.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
				r.log.Debug("registry refresh incomplete", "err", err)
			}
		case <-retry.C:
			if err := r.retryDue(ctx); err != nil && ctx.Err() == nil {
				r.log.Debug("registry retry incomplete", "err", err)
			}
		case <-r.retryScheduled: // re-arm with the new schedule
		}
	}
}

// scheduled tells Run that a retry time was set.
func (r *Registry) scheduled() {
	select {
	case r.retryScheduled <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// nextRetry returns the earliest pending retry.
func (s *state) nextRetry() (time.Time, bool) {
	next := s.portalRetryAt
	for _, e := range s.entries {
		if !e.retryAt.IsZero() && (next.IsZero() || e.retryAt.Before(next)) {
			next = e.retryAt
		}
	}
	return next, !next.IsZero()
}

// retryDue runs the retries whose time has come: the Portal listing (with
// the warm start of routes it adds), then the manifests of the routes that
// are due and of the routes never tried yet (added by that listing). Routes
// that are not due are left to their own schedule or the next cycle.
func (r *Registry) retryDue(ctx context.Context) error {
	r.cycle.Lock()
	defer r.cycle.Unlock()
	now := r.now()
	var errs []error
	if at := r.state.Load().portalRetryAt; !at.IsZero() && !now.Before(at) {
		err := r.listAndRestore(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, err)
	}
	st := r.state.Load()
	due := map[string]bool{}
	for _, rt := range st.routes {
		e := st.entries[rt.Key]
		if e.retryAt.IsZero() && e.snap == nil || !e.retryAt.IsZero() && !now.Before(e.retryAt) {
			due[rt.Key] = true
		}
	}
	if len(due) > 0 {
		errs = append(errs, r.refreshManifests(ctx, due))
	}
	return errors.Join(errs...)
}

// backoff returns the wait before the next try after failures failures in
// a row: RetryBackoff doubled per failure, at most RetryBackoffMax, less a
// jitter of up to a quarter.
func (r *Registry) backoff(failures int) time.Duration {
	d := r.opts.RetryBackoffMax
	if shift := failures - 1; shift < 32 {
		if b := r.opts.RetryBackoff << max(shift, 0); b > 0 && b < d {
			d = b
		}
	}
	j := min(max(r.opts.Jitter(), 0), 1)
	return d - time.Duration(j*float64(d/4))
}

// Refresh runs one cycle: list the Portal (a failure keeps the previous
// routes), warm-start listed routes that have no snapshot from the Store,
// fetch each Tool Service's manifest once, and rebuild every route whose
// inputs changed. A route that fails keeps its last good snapshot. The error
// joins everything that failed; it is informational.
func (r *Registry) Refresh(ctx context.Context) error {
	r.cycle.Lock()
	defer r.cycle.Unlock()
	listErr := r.listAndRestore(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(listErr, r.refreshManifests(ctx, nil))
}

// listAndRestore lists the Portal (a failure keeps the previous routes),
// warm-starts listed routes without a snapshot from the Store and saves the
// listing. It returns the listing's error; the caller checks ctx.
func (r *Registry) listAndRestore(ctx context.Context) error {
	listed, err := r.list(ctx)
	if ctx.Err() != nil {
		return err
	}
	r.warmStart(ctx)
	if ctx.Err() != nil {
		return err
	}
	r.saveListing(ctx, listed)
	return err
}

// list asks the Portal for its routes and applies a successful answer, which
// it returns for saveListing. When the Portal fails before this process ever
// had a listing, the routes of the listing last saved in the Store are used
// instead (see restoreListing).
func (r *Registry) list(ctx context.Context) (*registry.Listing, error) {
	lctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	l, err := r.src.List(lctx)
	cancel()
	if err == nil {
		err = l.Validate() // a custom Source may skip it; Validate is idempotent
	}
	if err == nil && len(l.Routes) == 0 && !r.opts.AllowEmptyListing {
		err = errEmptyListing
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	old := r.state.Load()
	now := r.now()
	r.metrics.listing(err)
	if err != nil {
		st := old.clone()
		st.portalErr, st.portalErrAt = err.Error(), now
		st.portalFailures++
		wait := r.backoff(st.portalFailures)
		st.portalRetryAt = now.Add(wait)
		if len(old.routes) > 0 {
			r.log.Warn("portal listing failed; keeping the previous routes", "err", err, "retryIn", wait)
		} else {
			r.log.Warn("portal listing failed; no routes yet", "err", err, "retryIn", wait)
		}
		changed := false
		if old.lastListing.IsZero() && len(old.routes) == 0 {
			if saved := r.restoreListing(ctx); saved != nil {
				st, _ = r.applyListing(st, saved)
				st.listingRestored, changed = true, true
			}
		}
		r.publish(st, changed)
		r.scheduled()
		return nil, fmt.Errorf("portal listing: %w", err)
	}
	st := old.clone()
	st.portalErr, st.portalErrAt, st.lastListing, st.listingRestored = "", time.Time{}, now, false
	st.portalFailures, st.portalRetryAt = 0, time.Time{}
	st, removed := r.applyListing(st, l)
	r.publish(st, !reflect.DeepEqual(old.routes, st.routes))
	for _, key := range removed {
		r.log.Info("route no longer listed by the portal; removed", "route", key)
	}
	sctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	defer cancel()
	parallel.ForEach(len(removed), r.opts.StoreWorkers, func(i int) {
		if err := r.store.Delete(sctx, removed[i]); err != nil {
			r.log.Warn("delete stored snapshot", "route", removed[i], "err", err)
		}
	})
	return l, nil
}

// applyListing makes l's routes, with the catalog overrides applied, the
// routes of st (a clone it may modify), keeping the entries of routes that
// stay. It returns st and the keys of the routes that are gone.
func (r *Registry) applyListing(st *state, l *registry.Listing) (*state, []string) {
	routes := slices.Clone(l.Routes)
	if ov := r.overrides.Load(); ov != nil {
		for i := range routes {
			if c, ok := (*ov)[routes[i].Key]; ok {
				routes[i].Catalog = &c
			}
		}
	}
	slices.SortFunc(routes, func(a, b registry.Route) int { return strings.Compare(a.Key, b.Key) })
	prev := st.entries
	st.routes = routes
	st.entries = make(map[string]*entry, len(routes))
	for _, rt := range routes {
		e := &entry{route: rt}
		if p := prev[rt.Key]; p != nil {
			cp := *p
			cp.route = rt
			e = &cp
		}
		st.entries[rt.Key] = e
	}
	st.index()
	var removed []string
	for key := range prev {
		if st.entries[key] == nil {
			removed = append(removed, key)
		}
	}
	slices.Sort(removed)
	return st, removed
}

// SetCatalogOverrides sets per-route catalog settings (ADR 0004; the toolmesh
// config file can override the Portal per route). An override replaces the
// Portal's catalog object of that route as a whole: a field the override
// leaves zero takes its default, not the Portal's value, so the config file
// states the complete setting. Overrides are checked like the listing's
// catalog (mode "full" or "search", pageSize 0..10000, shortlist 0..50) and
// take effect at the next refresh (before Start, at once). A nil or empty
// map removes every override.
func (r *Registry) SetCatalogOverrides(overrides map[string]registry.Catalog) error {
	var errs []error
	cp := make(map[string]registry.Catalog, len(overrides))
	for key, c := range overrides {
		if err := registry.CheckCatalogOverride(key, c); err != nil {
			errs = append(errs, err)
		}
		cp[key] = c
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.overrides.Store(&cp)
	return nil
}

// fetched is the outcome of one manifest fetch.
type fetched struct {
	m   *registry.Canonical // canonicalized once, for every route of the service
	err error
}

// built is the outcome of one route's refresh.
type built struct {
	key  string
	snap *registry.Snapshot // nil when the version is unchanged
	err  error
}

// refreshManifests fetches the manifest of every Tool Service of the routes
// once and rebuilds the routes whose inputs changed. The routes are every
// listed route, or only those in only when it is not nil (a retry). A failed
// route gets its next retry time; a successful one loses it.
func (r *Registry) refreshManifests(ctx context.Context, only map[string]bool) error {
	st := r.state.Load()
	routes := st.routes
	if only != nil {
		routes = slices.DeleteFunc(slices.Clone(routes), func(rt registry.Route) bool { return !only[rt.Key] })
	}
	if len(routes) == 0 {
		return nil
	}
	services, seen := servicesOf(routes)
	ctx, cycleSpan := r.startCycle(ctx, len(routes), len(services))
	defer cycleSpan.End()
	byName := r.fetchServices(ctx, services)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if only == nil {
		r.canon.keep(seen)
	}
	fetchedAt := r.now()

	outcomes := make([]built, len(routes))
	r.parallel(len(routes), func(i int) {
		rt := routes[i]
		_, span := r.startRoute(ctx, rt.Key)
		outcomes[i] = r.refreshRoute(ctx, rt, st.entries[rt.Key].snap, byName, fetchedAt)
		endSpan(span, routeOutcome(outcomes[i]), outcomes[i].err)
	})

	next := st.clone()
	changed := false
	var errs []error
	var saves, current []*registry.Snapshot
	for _, o := range outcomes {
		cp := r.applyOutcome(*next.entries[o.key], o, fetchedAt)
		if o.err != nil {
			errs = append(errs, o.err)
		} else if o.snap != nil {
			changed = true
			saves = append(saves, o.snap)
		}
		if cp.snap != nil {
			current = append(current, cp.snap)
		}
		next.entries[o.key] = &cp
	}
	next.index()
	r.publish(next, changed)
	if len(errs) > 0 {
		r.scheduled()
	}
	r.persist(ctx, saves, current)
	r.embedSnapshots(current, st)
	return errors.Join(errs...)
}

// servicesOf is the Tool Services of routes, each once (by name, the
// first route's definition), and the set of their names.
func servicesOf(routes []registry.Route) ([]registry.ToolService, map[string]bool) {
	var services []registry.ToolService
	seen := map[string]bool{}
	for _, rt := range routes {
		for _, s := range rt.ToolServices {
			if !seen[s.Name] {
				seen[s.Name] = true
				services = append(services, s)
			}
		}
	}
	return services, seen
}

// fetchServices fetches and canonicalizes the manifest of each service, in
// parallel, each within FetchTimeout; the results are by service name.
func (r *Registry) fetchServices(ctx context.Context, services []registry.ToolService) map[string]fetched {
	results := make([]fetched, len(services))
	r.parallel(len(services), func(i int) {
		fctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
		defer cancel()
		fctx, span := r.startFetch(fctx, services[i])
		m, err := r.fetchService(fctx, services[i])
		if err == nil && m == nil {
			err = errors.New("fetcher returned no manifest")
		}
		endSpan(span, "ok", err)
		var c *registry.Canonical
		if err == nil {
			c, err = r.canon.of(services[i].Name, m)
		}
		results[i] = fetched{m: c, err: err}
	})
	byName := make(map[string]fetched, len(services))
	for i, s := range services {
		byName[s.Name] = results[i]
	}
	return byName
}

// applyOutcome is a route's entry after its refresh o: a failure keeps the
// last good snapshot and schedules a retry with backoff; a success clears
// the failures and takes the new snapshot, if any.
func (r *Registry) applyOutcome(cp entry, o built, fetchedAt time.Time) entry {
	r.metrics.refresh(o.key, o.err)
	if o.err != nil {
		cp.failures++
		wait := r.backoff(cp.failures)
		cp.retryAt = fetchedAt.Add(wait)
		r.log.Warn("route refresh failed; keeping its last good snapshot", "route", o.key, "err", o.err, "retryIn", wait)
		cp.lastErr, cp.lastErrAt = o.err.Error(), fetchedAt
		return cp
	}
	cp.lastErr, cp.lastErrAt, cp.lastRefresh, cp.restored = "", time.Time{}, fetchedAt, false
	cp.failures, cp.retryAt = 0, time.Time{}
	if o.snap != nil {
		r.log.Info("route snapshot updated", "route", o.key, "version", o.snap.Version,
			"tools", len(o.snap.Tools), "ambiguous", len(o.snap.Ambiguous), "rejected", len(o.snap.Rejected))
		r.logSurface(o.key, cp.snap, o.snap)
		cp.snap = o.snap
	}
	return cp
}

// refreshRoute builds one route's snapshot from this cycle's manifests,
// with its surface (surface.go): pinning's decisions, which read and write
// the pin store, and the route's virtual tools.
func (r *Registry) refreshRoute(ctx context.Context, rt registry.Route, cur *registry.Snapshot, results map[string]fetched, fetchedAt time.Time) built {
	out := built{key: rt.Key}
	manifests := make(map[string]*registry.Canonical, len(rt.ToolServices))
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
	rt = r.withSurface(ctx, rt, manifests, fetchedAt)
	snap, err := registry.RebuildCanonical(rt, cur, manifests, fetchedAt)
	out.snap, out.err = snap, err
	return out
}

// parallel runs fn(0..n-1) on at most Workers goroutines and waits.
func (r *Registry) parallel(n int, fn func(i int)) { parallel.ForEach(n, r.opts.Workers, fn) }

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
