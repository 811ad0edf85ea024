package filters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/filters/wasm"
)

// RetireDelay is how long a filter removed by Set.Update keeps working
// before it is closed, so a request that captured its chain before the
// update can still run the result stage.
const RetireDelay = time.Minute

// Set is every configured filter and the chain of every route. Chain is the
// hot path: one atomic load and a map lookup, no locks. Update, Reload and
// Close are serialized among themselves.
type Set struct {
	log     *slog.Logger
	reg     prometheus.Registerer
	metrics *chainMetrics

	state atomic.Pointer[setState]

	mu       sync.Mutex // guards host, retiring, closed
	host     *wasm.Host
	cacheDir string
	retiring map[*built]*time.Timer
	closed   bool
}

type setState struct {
	defaults *Chain
	routes   map[string]*Chain
	filters  map[string]*built // by name
}

// built is one constructed filter with the definition it came from; an
// Update reuses it when the definition is unchanged.
type built struct {
	def Definition
	f   Filter
}

// closer is implemented by filters that hold resources (WebAssembly
// modules).
type closer interface {
	Close(ctx context.Context) error
}

// reloader is implemented by filters that can re-read their code (Reload).
type reloader interface {
	Reload(ctx context.Context) error
}

// Build validates cfg and constructs every filter and every route's chain.
// WebAssembly modules are compiled and warmed here, once each. Metrics go to
// reg (nil: none). Build fails, and holds nothing, if any part fails.
func Build(ctx context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Set, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newChainMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register filter metrics: %w", err)
	}
	s := &Set{log: log, reg: reg, metrics: m, cacheDir: cfg.WasmCacheDir, retiring: map[*built]*time.Timer{}}
	st, err := s.build(ctx, cfg, nil)
	if err != nil {
		_ = s.closeHost(ctx)
		return nil, err
	}
	s.state.Store(st)
	return s, nil
}

// Chain returns the chain of a route; routes without a list of their own
// get the defaults chain. It never returns nil.
func (s *Set) Chain(route string) *Chain {
	st := s.state.Load()
	if c, ok := st.routes[route]; ok {
		return c
	}
	return st.defaults
}

// Update replaces the configuration. Filters whose definition is unchanged
// are kept as they are (a WebAssembly module keeps its warm pool); new ones
// are built; removed ones keep serving requests that already hold their
// chain for RetireDelay, then close. On error nothing changes.
func (s *Set) Update(ctx context.Context, cfg Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("filters: set is closed")
	}
	old := s.state.Load()
	st, err := s.build(ctx, cfg, old.filters)
	if err != nil {
		return err
	}
	s.state.Store(st)
	for name, b := range old.filters {
		if st.filters[name] == b {
			continue
		}
		if _, ok := b.f.(closer); ok {
			s.retiring[b] = time.AfterFunc(RetireDelay, func() { s.retire(b) })
		}
	}
	return nil
}

func (s *Set) retire(b *built) {
	s.mu.Lock()
	_, pending := s.retiring[b]
	delete(s.retiring, b)
	s.mu.Unlock()
	if !pending {
		return // Close got there first
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.f.(closer).Close(ctx); err != nil {
		s.log.Warn("close retired filter", "filter", b.def.Name, "error", err)
	}
}

// Reload makes every WebAssembly filter re-read its module file and swap in
// a changed module without dropping requests. Wire it to SIGHUP. Filters
// whose reload fails keep their current module; the errors are joined.
func (s *Set) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, name := range sortedKeys(s.state.Load().filters) {
		if r, ok := s.state.Load().filters[name].f.(reloader); ok {
			if err := r.Reload(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Close closes every filter, waiting for calls in flight (bounded by ctx).
// Chains obtained before Close fail their WebAssembly filters afterwards.
func (s *Set) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for b, t := range s.retiring {
		t.Stop()
		errs = append(errs, b.f.(closer).Close(ctx))
	}
	clear(s.retiring)
	for _, b := range s.state.Load().filters {
		if c, ok := b.f.(closer); ok {
			errs = append(errs, c.Close(ctx))
		}
	}
	errs = append(errs, s.closeHost(ctx))
	return errors.Join(errs...)
}

func (s *Set) closeHost(ctx context.Context) error {
	if s.host == nil {
		return nil
	}
	err := s.host.Close(ctx)
	s.host = nil
	return err
}

// builder carries what filter types need while a Set is built.
type builder struct {
	ctx context.Context
	s   *Set
}

// wasmHost returns the Set's WebAssembly host, creating it on first use so
// configurations without WebAssembly filters never start one.
func (b *builder) wasmHost() (*wasm.Host, error) {
	if b.s.host == nil {
		h, err := wasm.NewHost(wasm.HostConfig{CacheDir: b.s.cacheDir, Logger: b.s.log, Registerer: b.s.reg})
		if err != nil {
			return nil, err
		}
		b.s.host = h
	}
	return b.s.host, nil
}

// build constructs a state for cfg, reusing filters from prev whose
// definitions are unchanged. On error it closes what it built.
func (s *Set) build(ctx context.Context, cfg Config, prev map[string]*built) (*setState, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &builder{ctx: ctx, s: s}
	defs := cfg.definitions()
	st := &setState{routes: make(map[string]*Chain, len(cfg.Routes)), filters: make(map[string]*built, len(defs))}
	var fresh []*built
	fail := func(err error) (*setState, error) {
		for _, nb := range fresh {
			if c, ok := nb.f.(closer); ok {
				_ = c.Close(ctx)
			}
		}
		return nil, err
	}
	for _, d := range defs {
		if p, ok := prev[d.Name]; ok && sameDefinition(p.def, d) {
			st.filters[d.Name] = p
			continue
		}
		f, err := types[d.Type](b, d)
		if err != nil {
			return fail(fmt.Errorf("build filter %q: %w", d.Name, err))
		}
		nb := &built{def: d, f: f}
		fresh = append(fresh, nb)
		st.filters[d.Name] = nb
	}
	st.defaults = s.chain("", cfg, st.filters)
	for route := range cfg.Routes {
		st.routes[route] = s.chain(route, cfg, st.filters)
	}
	for _, route := range cfg.SchemaValidationOff {
		st.routes[route] = s.chain(route, cfg, st.filters)
		// Said at every load: an operator must not lose track of it.
		s.log.Warn("input-schema validation is off for this route (filters.schemaValidationOff): tool arguments reach its Tool Services unchecked",
			"route", route)
	}
	return st, nil
}

func (s *Set) chain(route string, cfg Config, filters map[string]*built) *Chain {
	c := &Chain{route: route}
	byName := make(map[string]Definition, len(cfg.Definitions)+1)
	for _, d := range cfg.definitions() {
		byName[d.Name] = d
	}
	for _, name := range cfg.chainFor(route) {
		f := filters[name].f
		e := &entry{
			f: f, name: name, failOpen: byName[name].FailOpen, request: true, result: true,
			log:  s.log.With("filter", name),
			mReq: s.metrics.forFilter(name, StageRequest),
			mRes: s.metrics.forFilter(name, StageResult),
		}
		if sf, ok := f.(StageFilter); ok {
			e.request, e.result = sf.Runs(StageRequest), sf.Runs(StageResult)
		}
		c.entries = append(c.entries, e)
		if l, ok := f.(ToolLister); ok {
			c.listers = append(c.listers, l)
		}
	}
	return c
}

func sameDefinition(a, b Definition) bool {
	if a.Name != b.Name || a.Type != b.Type || a.FailOpen != b.FailOpen {
		return false
	}
	return bytes.Equal(compactJSON(a.Config), compactJSON(b.Config))
}

func compactJSON(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}
