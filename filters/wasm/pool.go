package wasm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// instantiateTimeout bounds creating one instance (the Go runtime's
// _initialize plus the guest's configure).
const instantiateTimeout = 10 * time.Second

// allocGranule is the unit in which the host asks for input buffers.
const allocGranule = 4 << 10

// pool holds the warm instances of one compiled version of a module. A
// reload builds a new pool and retires the old one: calls already inside the
// old pool finish there, and the old pool closes once the last one leaves.
type pool struct {
	m   *Module
	cm  wazero.CompiledModule
	sum [32]byte

	idle  chan *instance // free instances; cap PoolSize, so a put never blocks
	slots chan struct{}  // one token per live instance; cap PoolSize

	refs    atomic.Int64 // calls and refills inside the pool
	retired atomic.Bool
	once    sync.Once
	drained chan struct{} // closed when the retired pool has shut down
}

// instance is one module instance. Only one goroutine uses it at a time:
// Go guests have a single-threaded runtime inside.
type instance struct {
	mod    api.Module
	mem    api.Memory
	alloc  api.Function
	filter api.Function
	stack  [2]uint64
	calls  uint64
	// buf and bufCap describe the input buffer the guest's alloc returned;
	// it is reused while inputs fit (see docs/wasm-abi.md).
	buf    uint32
	bufCap int
}

// newPool returns an empty pool. The caller holds reloadMu (or owns m
// exclusively) and has checked that m is not closed.
func newPool(m *Module, cm wazero.CompiledModule, sum [32]byte) *pool {
	m.refs.Add(1)
	return &pool{
		m: m, cm: cm, sum: sum,
		idle:    make(chan *instance, m.opts.PoolSize),
		slots:   make(chan struct{}, m.opts.PoolSize),
		drained: make(chan struct{}),
	}
}

// enter registers a call in the pool. It fails once the pool is retired, and
// the caller then moves on to the module's current pool.
func (p *pool) enter() bool {
	p.refs.Add(1)
	if p.retired.Load() {
		p.leave()
		return false
	}
	return true
}

func (p *pool) leave() {
	if p.refs.Add(-1) == 0 && p.retired.Load() {
		p.once.Do(p.shutdown)
	}
}

// retire stops new calls from entering; the pool shuts down when the calls
// inside it have left. Both sides check the other's flag after publishing
// their own, so exactly one of them sees the pool empty and retired.
func (p *pool) retire() {
	p.retired.Store(true)
	if p.refs.Load() == 0 {
		p.once.Do(p.shutdown)
	}
}

// shutdown closes every instance and the compiled module. With no call
// inside the pool, every live instance is idle.
func (p *pool) shutdown() {
	for {
		select {
		case in := <-p.idle:
			p.discard(in, p.m.mm.discardRetire, false)
		default:
			_ = p.cm.Close(context.Background())
			close(p.drained)
			p.m.unref()
			return
		}
	}
}

// prewarm creates n instances before the pool takes traffic; it fails if the
// module cannot be instantiated or configured at all.
func (p *pool) prewarm(ctx context.Context, n int) error {
	for range n {
		p.slots <- struct{}{}
		in, err := p.newInstance(ctx)
		if err != nil {
			<-p.slots
			return err
		}
		p.idle <- in
	}
	return nil
}

// acquire returns a free instance, creating one when the pool has room, or
// waits for one up to QueueTimeout.
func (p *pool) acquire(ctx context.Context) (*instance, error) {
	select {
	case in := <-p.idle:
		return in, nil
	default:
	}
	select {
	case in := <-p.idle:
		return in, nil
	case p.slots <- struct{}{}:
		return p.grow(ctx)
	default:
	}
	t := time.NewTimer(p.m.opts.QueueTimeout)
	defer t.Stop()
	select {
	case in := <-p.idle:
		return in, nil
	case p.slots <- struct{}{}:
		return p.grow(ctx)
	case <-t.C:
		return nil, fmt.Errorf("%w: no free instance within %s (pool size %d)", ErrBusy, p.m.opts.QueueTimeout, p.m.opts.PoolSize)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
	}
}

// grow creates an instance for a slot the caller has taken.
func (p *pool) grow(ctx context.Context) (*instance, error) {
	in, err := p.newInstance(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return in, nil
}

// release returns an instance after a call. An instance whose call failed
// in any way is never reused: a trap or timeout leaves the guest's runtime
// in an unknown state, and wazero does not always mark it closed.
func (p *pool) release(in *instance, healthy bool) {
	in.calls++
	switch {
	case !healthy || in.mod.IsClosed():
		p.discard(in, p.m.mm.discardError, true)
	case p.m.opts.RecycleAfter > 0 && in.calls >= p.m.opts.RecycleAfter:
		p.discard(in, p.m.mm.discardRecycle, true)
	default:
		p.idle <- in
	}
}

// discard closes an instance and frees its slot. With replace set, and
// fewer than Prewarm instances left, it starts a replacement in the
// background so the next call does not pay for booting a guest runtime.
func (p *pool) discard(in *instance, reason interface{ Inc() }, replace bool) {
	_ = in.mod.Close(context.Background())
	<-p.slots
	p.m.mm.instances.Dec()
	reason.Inc()
	if replace && len(p.slots) < p.m.opts.Prewarm && p.enter() {
		go p.refill()
	}
}

// refill adds one idle instance if there is room. The caller has entered
// the pool.
func (p *pool) refill() {
	defer p.leave()
	select {
	case p.slots <- struct{}{}:
	default:
		return
	}
	in, err := p.newInstance(context.Background())
	if err != nil {
		<-p.slots
		p.m.log.Warn("replace wasm filter instance", "error", err)
		return
	}
	p.idle <- in
}

func (p *pool) newInstance(ctx context.Context) (*instance, error) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), instantiateTimeout)
	defer cancel()
	mod, err := p.m.rt.InstantiateModule(ictx, p.cm, p.m.modCfg)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", classify(err))
	}
	in := &instance{
		mod:    mod,
		mem:    mod.Memory(),
		alloc:  mod.ExportedFunction(exportAlloc),
		filter: mod.ExportedFunction(exportFilter),
	}
	if err := in.checkVersion(ictx); err != nil {
		_ = mod.Close(ctx)
		return nil, err
	}
	if cfg := mod.ExportedFunction(exportConfigure); cfg != nil {
		config := p.m.opts.Config
		if len(config) == 0 {
			config = []byte("null")
		}
		out, err := in.call(ictx, cfg, config, len(config)+64<<10)
		if err == nil {
			_, err = ParseDecision(out)
		}
		if err != nil {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("configure: %w", err)
		}
	}
	p.m.mm.instances.Inc()
	return in, nil
}

func (in *instance) checkVersion(ctx context.Context) error {
	res, err := in.mod.ExportedFunction(exportABIVersion).Call(ctx)
	if err != nil {
		return fmt.Errorf("call %s: %w", exportABIVersion, classify(err))
	}
	if v := api.DecodeI32(res[0]); v != ABIVersion {
		return fmt.Errorf("%w: module speaks mcpfilter ABI version %d, host speaks %d", ErrABI, v, ABIVersion)
	}
	return nil
}

// call copies input into the guest, runs fn and returns a view of the
// output in guest memory, valid until the instance's next call.
func (in *instance) call(ctx context.Context, fn api.Function, input []byte, maxOut int) ([]byte, error) {
	if len(input) > in.bufCap || in.bufCap == 0 {
		// Round up so that calls of similar size share one buffer.
		size := (len(input) + allocGranule) &^ (allocGranule - 1)
		in.stack[0] = uint64(size)
		if err := in.alloc.CallWithStack(ctx, in.stack[:1]); err != nil {
			return nil, classify(err)
		}
		in.buf, in.bufCap = api.DecodeU32(in.stack[0]), size
	}
	ptr := in.buf
	if !in.mem.Write(ptr, input) {
		in.bufCap = 0
		return nil, fmt.Errorf("%w: alloc returned %#x, out of memory bounds for %d bytes", ErrABI, ptr, len(input))
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(input))
	if err := fn.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, classify(err)
	}
	optr, olen := uint32(in.stack[0]>>32), uint32(in.stack[0])
	if int(olen) > maxOut {
		return nil, fmt.Errorf("%w: output of %d bytes exceeds %d", ErrABI, olen, maxOut)
	}
	out, ok := in.mem.Read(optr, olen)
	if !ok {
		return nil, fmt.Errorf("%w: output %#x+%d out of memory bounds", ErrABI, optr, olen)
	}
	return out, nil
}

// classify maps a wazero call error onto ErrTimeout or ErrTrap.
func classify(err error) error {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded, sys.ExitCodeContextCanceled:
			return fmt.Errorf("%w: %v", ErrTimeout, err)
		}
	}
	return fmt.Errorf("%w: %v", ErrTrap, err)
}
