package wasm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Module is one loaded WebAssembly filter: a compiled module and a bounded
// pool of warm instances, replaced as a whole on reload. It is safe for
// concurrent use.
type Module struct {
	host   *Host
	opts   Options
	log    *slog.Logger
	mm     *moduleMetrics
	rt     wazero.Runtime
	modCfg wazero.ModuleConfig

	// refs counts the pools not yet shut down (current, retired and being
	// built) plus one held until Close. Whoever drops it to zero closes the
	// runtime, so no call and no instantiation runs against a closed one.
	refs     atomic.Int64
	rtClosed chan struct{} // closed once the runtime is closed and the Host told
	closeErr error         // the runtime's Close error; read after rtClosed

	cur    atomic.Pointer[pool]
	closed atomic.Bool

	reloadMu sync.Mutex // serializes Reload, Close and the poller's stat
	stamp    fileStamp

	stopPoll chan struct{}
	pollDone chan struct{}

	bufs sync.Pool // *[]byte envelope buffers
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

// Load compiles the module at opts.Path, checks its exports, starts
// opts.Prewarm instances and, if opts.PollInterval is set, starts watching
// the file. Load fails rather than return a module that cannot serve.
func (h *Host) Load(ctx context.Context, opts Options) (*Module, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("wasm filter %q: %w", opts.Name, err)
	}
	m := &Module{
		host: h,
		opts: o,
		log:  h.log.With("filter", o.Name),
		mm:   h.metrics.forModule(o.Name),

		rtClosed: make(chan struct{}),
	}
	m.refs.Store(1)
	rcfg := wazero.NewRuntimeConfig().
		WithCompilationCache(h.cache).
		WithMemoryLimitPages(o.MemoryPages).
		WithCloseOnContextDone(!o.Uninterruptible)
	m.rt = wazero.NewRuntimeWithConfig(ctx, rcfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		_ = m.rt.Close(ctx)
		return nil, fmt.Errorf("wasm filter %q: instantiate wasi: %w", o.Name, err)
	}
	// No filesystem, arguments or environment: a filter sees only its
	// envelope, real clocks (the Go runtime needs monotonic time for timers
	// and GC pacing) and real randomness (map seeds).
	m.modCfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize").
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader).
		WithStdout(newLineLogger(m.log, slog.LevelInfo)).
		WithStderr(newLineLogger(m.log, slog.LevelWarn))

	p, err := m.build(ctx)
	if err != nil {
		_ = m.rt.Close(ctx)
		return nil, fmt.Errorf("wasm filter %q: %w", o.Name, err)
	}
	m.cur.Store(p)
	h.hold()
	m.log.Info("wasm filter loaded", "path", o.Path, "sha256", hex.EncodeToString(p.sum[:]), "pool_size", o.PoolSize)
	if o.PollInterval > 0 {
		m.stopPoll, m.pollDone = make(chan struct{}), make(chan struct{})
		go m.poll()
	}
	return m, nil
}

// Name returns the filter name.
func (m *Module) Name() string { return m.opts.Name }

// Options returns the module's options with defaults filled in.
func (m *Module) Options() Options { return m.opts }

// build reads, compiles and checks the file, and returns a warmed pool. The
// caller holds reloadMu or owns m exclusively.
func (m *Module) build(ctx context.Context) (*pool, error) {
	bin, stamp, err := readStamped(m.opts.Path)
	if err != nil {
		return nil, err
	}
	m.stamp = stamp
	sum := sha256.Sum256(bin)
	if cur := m.cur.Load(); cur != nil && cur.sum == sum {
		return nil, errUnchanged
	}
	// Two workers halve a first compile; a reload uses one so that traffic
	// keeps a core while the new version compiles.
	workers := 2
	if m.cur.Load() != nil {
		workers = 1
	}
	cm, err := m.rt.CompileModule(experimental.WithCompilationWorkers(ctx, workers), bin)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", m.opts.Path, err)
	}
	if err := checkExports(cm); err != nil {
		_ = cm.Close(ctx)
		return nil, fmt.Errorf("%s: %w", m.opts.Path, err)
	}
	p := newPool(m, cm, sum)
	if err := p.prewarm(ctx, m.opts.Prewarm); err != nil {
		p.retire()
		return nil, fmt.Errorf("%s: %w", m.opts.Path, err)
	}
	return p, nil
}

var errUnchanged = errors.New("module unchanged")

func readStamped(path string) ([]byte, fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("read module: %w", err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("read module: %w", err)
	}
	return bin, fileStamp{size: st.Size(), modTime: st.ModTime()}, nil
}

// checkExports verifies the mcpfilter/v1 exports and their signatures, so a
// wrong module fails at load with a clear message, not on the first call.
func checkExports(cm wazero.CompiledModule) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	want := []struct {
		name     string
		params   []api.ValueType
		results  []api.ValueType
		optional bool
	}{
		{exportABIVersion, nil, []api.ValueType{i32}, false},
		{exportAlloc, []api.ValueType{i32}, []api.ValueType{i32}, false},
		{exportFilter, []api.ValueType{i32, i32}, []api.ValueType{i64}, false},
		{exportConfigure, []api.ValueType{i32, i32}, []api.ValueType{i64}, true},
	}
	fns := cm.ExportedFunctions()
	for _, w := range want {
		def, ok := fns[w.name]
		if !ok {
			if w.optional {
				continue
			}
			return fmt.Errorf("%w: module does not export function %q (is it built with the guest SDK and -buildmode=c-shared?)", ErrABI, w.name)
		}
		if !sameTypes(def.ParamTypes(), w.params) || !sameTypes(def.ResultTypes(), w.results) {
			return fmt.Errorf("%w: export %q has signature %v -> %v, want %v -> %v", ErrABI, w.name,
				typeNames(def.ParamTypes()), typeNames(def.ResultTypes()), typeNames(w.params), typeNames(w.results))
		}
	}
	if _, ok := cm.ExportedMemories()[exportMemory]; !ok {
		return fmt.Errorf("%w: module does not export its memory", ErrABI)
	}
	if _, ok := fns["_initialize"]; !ok {
		return fmt.Errorf("%w: module is not a reactor (no _initialize export): build with -buildmode=c-shared", ErrABI)
	}
	return nil
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func typeNames(ts []api.ValueType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = api.ValueTypeName(t)
	}
	return out
}

// Filter runs one call through the guest and returns its decision. On error
// the caller applies its fail-open or fail-closed policy; the instance that
// failed has already been discarded and replaced.
func (m *Module) Filter(ctx context.Context, in *Input) (Decision, error) {
	start := time.Now()
	d, err := m.filter(ctx, in)
	m.mm.latency.Observe(time.Since(start).Seconds())
	m.mm.calls.Inc()
	if err != nil {
		m.mm.countError(err)
		return Decision{}, fmt.Errorf("wasm filter %q: %w", m.opts.Name, err)
	}
	if d.Action == ActionDeny {
		m.mm.denials.Inc()
	}
	return d, nil
}

func (m *Module) filter(ctx context.Context, in *Input) (Decision, error) {
	bp, _ := m.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	env := appendEnvelope((*bp)[:0], m.opts.Name, in)
	defer func() {
		if cap(env) <= 64<<10 { // don't pin the occasional huge envelope
			*bp = env
			m.bufs.Put(bp)
		}
	}()
	if len(env) > m.opts.MaxEnvelopeBytes {
		return Decision{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(env), m.opts.MaxEnvelopeBytes)
	}

	var p *pool
	for {
		if p = m.cur.Load(); p == nil {
			return Decision{}, ErrClosed
		}
		if p.enter() {
			break
		}
	}
	defer p.leave()

	inst, err := p.acquire(ctx)
	if err != nil {
		return Decision{}, err
	}
	cctx := context.Background()
	if !m.opts.Uninterruptible {
		// The caller's cancellation must not kill a pooled instance; only
		// the filter's own time budget does.
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), m.opts.CallTimeout)
		defer cancel()
	}
	out, err := inst.call(cctx, inst.filter, env, 2*m.opts.MaxEnvelopeBytes)
	var d Decision
	if err == nil {
		// Parse before release: out is a view into the instance's memory.
		d, err = ParseDecision(out)
	}
	// A guest-reported failure leaves the instance healthy (the SDK
	// recovered); every other failure poisons it.
	p.release(inst, err == nil || errors.Is(err, ErrGuest))
	return d, err
}

// Reload re-reads the module file and, if its content changed, compiles it,
// warms a new pool and swaps it in. Calls in flight finish on the old pool,
// which closes when they are done; new calls use the new one. On any error
// the module keeps serving the version it has. Wire it to SIGHUP.
func (m *Module) Reload(ctx context.Context) error {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	if m.closed.Load() {
		return ErrClosed
	}
	p, err := m.build(ctx)
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		m.mm.reloadError.Inc()
		return fmt.Errorf("reload wasm filter %q: %w", m.opts.Name, err)
	}
	old := m.cur.Swap(p)
	old.retire()
	m.mm.reloadOK.Inc()
	m.log.Info("wasm filter reloaded", "path", m.opts.Path, "sha256", hex.EncodeToString(p.sum[:]))
	return nil
}

// poll reloads the module when its file's size or modification time
// changes. A failed reload is logged and not retried until the file changes
// again, so a half-written file costs one failed compile.
func (m *Module) poll() {
	defer close(m.pollDone)
	t := time.NewTicker(m.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stopPoll:
			return
		case <-t.C:
		}
		st, err := os.Stat(m.opts.Path)
		if err != nil {
			continue // being replaced; the next tick sees the new file
		}
		m.reloadMu.Lock()
		changed := st.Size() != m.stamp.size || !st.ModTime().Equal(m.stamp.modTime)
		m.reloadMu.Unlock()
		if !changed {
			continue
		}
		if err := m.Reload(context.Background()); err != nil {
			m.log.Error("wasm filter reload failed; keeping the previous version", "error", err)
		}
	}
}

// Close stops the poller and retires the module: calls after Close fail
// with ErrClosed. It waits until calls in flight have finished and the
// runtime is closed, or until ctx ends; then it returns ctx's error and the
// runtime closes in the background when the last call returns, so an ended
// ctx never closes the runtime under a running call. A reload in progress
// finishes first (Close takes reloadMu), and none starts after.
func (m *Module) Close(ctx context.Context) error {
	m.reloadMu.Lock()
	if m.closed.Swap(true) {
		m.reloadMu.Unlock()
		return nil
	}
	m.reloadMu.Unlock()
	if m.stopPoll != nil {
		close(m.stopPoll)
		<-m.pollDone
	}
	if p := m.cur.Swap(nil); p != nil {
		p.retire()
	}
	// Every pool was counted under reloadMu before closed was set, so the
	// count only falls from here.
	m.unref()
	select {
	case <-m.rtClosed:
		return m.closeErr
	default:
	}
	select {
	case <-m.rtClosed:
		return m.closeErr
	case <-ctx.Done():
		return fmt.Errorf("close wasm filter %q: calls still running, it closes after the last one: %w", m.opts.Name, ctx.Err())
	}
}

// unref drops a reference taken by newPool or Load; the last one closes the
// runtime.
func (m *Module) unref() {
	if m.refs.Add(-1) != 0 {
		return
	}
	m.closeErr = m.rt.Close(context.Background())
	m.host.release()
	close(m.rtClosed)
}
