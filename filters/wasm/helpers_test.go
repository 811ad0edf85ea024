package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tetratelabs/wazero"
)

// Guest modules are built once per test binary (go build caches the rest)
// and compiled once: every Host in the tests shares one compilation cache.
var (
	buildRoot    string
	buildMu      sync.Mutex
	builds       = map[string]*buildResult{}
	sharedCache  = wazero.NewCompilationCache()
	guestSources = map[string]string{
		"add-header":    "./examples/add-header",
		"deny-argument": "./examples/deny-argument",
		"redact-result": "./examples/redact-result",
		"misbehave":     "./testdata/misbehave",
		"rawabi":        "./testdata/rawabi",
	}
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toolmesh-wasm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildRoot = dir
	code := m.Run()
	for _, rt := range pinned.rts {
		_ = rt.Close(context.Background())
	}
	_ = sharedCache.Close(context.Background())
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// guestModule returns the path of the built guest module name, building it
// on first use with Go's own toolchain.
func guestModule(t testing.TB, name string) string {
	t.Helper()
	src, ok := guestSources[name]
	if !ok {
		t.Fatalf("unknown guest %q", name)
	}
	buildMu.Lock()
	b := builds[name]
	if b == nil {
		b = &buildResult{}
		builds[name] = b
	}
	buildMu.Unlock()
	b.once.Do(func() {
		b.path = filepath.Join(buildRoot, name+".wasm")
		if b.err = buildGuest(src, b.path); b.err == nil {
			b.err = pin(b.path)
		}
	})
	if b.err != nil {
		t.Fatalf("build guest %s: %v", name, b.err)
	}
	return b.path
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

func buildGuest(src, out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-o", out, src)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, b)
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
