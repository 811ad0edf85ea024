package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
)

// HostConfig configures a Host.
type HostConfig struct {
	// CacheDir keeps compiled machine code on disk so a restart compiles a
	// module in tens of milliseconds instead of about a second. Empty keeps
	// the cache in memory only (shared by the Host's modules and reloads).
	CacheDir string
	// Cache, when set, is used instead of a cache of the Host's own. Tests
	// share one so every module is compiled once per test binary. The Host
	// does not close a cache it was given.
	Cache wazero.CompilationCache
	// Logger receives load, reload and guest output lines. Default: discard.
	Logger *slog.Logger
	// Registerer receives the toolmesh_wasm_filter_* metrics. Nil: none.
	Registerer prometheus.Registerer
}

// Host loads and runs WebAssembly filter modules. It owns the compilation
// cache and the metrics; every module has its own wazero runtime so its
// memory limit and interruption setting are its own.
type Host struct {
	cache     wazero.CompilationCache
	ownsCache bool
	log       *slog.Logger
	metrics   *metrics

	// The cache's engine serves every module's running code, so an owned
	// cache closes only when Close was called and no module's runtime is
	// open (a module whose Close ended early closes after its last call).
	mu      sync.Mutex
	open    int
	closing bool
}

// NewHost returns a Host.
func NewHost(cfg HostConfig) (*Host, error) {
	h := &Host{cache: cfg.Cache, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.cache == nil {
		h.ownsCache = true
		if cfg.CacheDir != "" {
			c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
			if err != nil {
				return nil, fmt.Errorf("open wasm compilation cache %q: %w", cfg.CacheDir, err)
			}
			h.cache = c
		} else {
			h.cache = wazero.NewCompilationCache()
		}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register wasm filter metrics: %w", err)
	}
	h.metrics = m
	return h, nil
}

// Close releases the compilation cache. Close the Host's modules first; one
// whose Close returned before its calls ended keeps the cache until its
// runtime closes.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil
	}
	h.closing = true
	now := h.open == 0
	h.mu.Unlock()
	if now && h.ownsCache {
		return h.cache.Close(ctx)
	}
	return nil
}

// hold registers a loaded module's open runtime.
func (h *Host) hold() {
	h.mu.Lock()
	h.open++
	h.mu.Unlock()
}

// release unregisters a module whose runtime has closed, and closes the
// cache if it was the last one after Close.
func (h *Host) release() {
	h.mu.Lock()
	h.open--
	last := h.closing && h.open == 0
	h.mu.Unlock()
	if last && h.ownsCache {
		if err := h.cache.Close(context.Background()); err != nil {
			h.log.Warn("close wasm compilation cache", "error", err)
		}
	}
}
