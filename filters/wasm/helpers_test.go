package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tetratelabs/wazero"

	"github.com/toolmesh/toolmesh/internal/wasmtest"
)

// Guest modules are built once per source state and shared between test
// binaries (internal/wasmtest), and compiled once: every Host in the tests
// shares one compilation cache, backed by the directory `make test` fills
// with every guest's machine code when it names one.
var (
	sharedCache wazero.CompilationCache
	pinMu       sync.Mutex
	pins        = map[string]*pinResult{}
)

type pinResult struct {
	once sync.Once
	err  error
}

func TestMain(m *testing.M) {
	if dir := wasmtest.CompiledDir(); dir != "" {
		c, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "wazero cache %s: %v\n", dir, err)
			os.Exit(1)
		}
		sharedCache = c
	} else {
		sharedCache = wazero.NewCompilationCache()
	}
	code := m.Run()
	if err := wasmtest.CheckCompiledDir(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	for _, rt := range pinned.rts {
		_ = rt.Close(context.Background())
	}
	_ = sharedCache.Close(context.Background())
	os.Exit(code)
}

// guestModule returns the path of the built guest name (a wasmtest.Guests
// key), built and pinned on first use. Tests must not modify the file.
func guestModule(t testing.TB, name string) string {
	t.Helper()
	path := wasmtest.Module(t, name)
	pinMu.Lock()
	p := pins[path]
	if p == nil {
		p = &pinResult{}
		pins[path] = p
	}
	pinMu.Unlock()
	p.once.Do(func() { p.err = pin(path) })
	if p.err != nil {
		t.Fatalf("compile guest %s: %v", name, p.err)
	}
	return path
}

// pinned keeps one compiled copy of every guest open for the whole test
// binary. wazero's in-memory cache drops machine code when the last module
// compiled from it closes, and each test closes its modules; without a pin
// every test would compile its guests again (seconds each, minutes under
// -race).
var pinned = struct {
	sync.Mutex
	rts []wazero.Runtime
}{}

func pin(path string) error {
	bin, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pinned.Lock()
	defer pinned.Unlock()
	if pinned.rts == nil {
		// Interruptible, as modules load by default (the setting is part
		// of the cache key).
		cfg := wazero.NewRuntimeConfig().WithCompilationCache(sharedCache).WithCloseOnContextDone(true)
		pinned.rts = append(pinned.rts, wazero.NewRuntimeWithConfig(ctx, cfg))
	}
	for _, rt := range pinned.rts {
		if _, err := rt.CompileModule(ctx, bin); err != nil {
			return err
		}
	}
	return nil
}

// copyModule copies a built guest to dst (so a test can swap files under a
// module without touching the shared build).
func copyModule(t testing.TB, name, dst string) {
	t.Helper()
	b, err := os.ReadFile(guestModule(t, name))
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

func newTestHost(t testing.TB, reg prometheus.Registerer) *Host {
	t.Helper()
	h, err := NewHost(HostConfig{Cache: sharedCache, Logger: testLogger(t), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// loadGuest loads a built guest with opts (Name and Path filled in when
// empty) and closes it when the test ends.
func loadGuest(t testing.TB, h *Host, name string, opts Options) *Module {
	t.Helper()
	if opts.Name == "" {
		opts.Name = name
	}
	if opts.Path == "" {
		opts.Path = guestModule(t, name)
	}
	m, err := h.Load(context.Background(), opts)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	return m
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func call(args string) *Input {
	return &Input{
		Stage: StageRequest, Route: "core", Era: "stateless", Version: "2026-07-28",
		Method: "tools/call", Tool: "probe", Arguments: []byte(args),
	}
}

// value reads a counter's or gauge's current value.
func value(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	if c := pb.GetCounter(); c != nil {
		return c.GetValue()
	}
	return pb.GetGauge().GetValue()
}

// series counts the series a collector exports.
func series(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}
