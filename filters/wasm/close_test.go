package wasm

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// holdHandler holds the first guest output line inside the host's write
// until release is closed: the guest call that wrote it stays in flight,
// stopped inside a host function.
type holdHandler struct {
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (h *holdHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *holdHandler) WithGroup(string) slog.Handler            { return h }

func (h *holdHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "wasm guest output" {
		h.once.Do(func() {
			close(h.held)
			<-h.release
		})
	}
	return nil
}

// A Close whose context has already ended returns at once but must not
// close the runtime under a call still running, in the current pool or in
// one a reload retired: the call completes, and the runtime closes after it.
func TestCloseWithEndedContext(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reload bool // swap in a new pool while the call holds the old one
	}{
		{"current pool", false},
		{"retired pool", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hh := &holdHandler{held: make(chan struct{}), release: make(chan struct{})}
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(hh.release) }) }
			defer release()
			h, err := NewHost(HostConfig{Cache: sharedCache, Logger: slog.New(hh)})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "filter.wasm")
			copyModule(t, "misbehave", path)
			// The held call must outlive the reload's compilation, which
			// took over a minute under -race on a loaded machine: with
			// a one-minute CallTimeout the call timed out instead.
			m, err := h.Load(t.Context(), Options{Name: "misbehave", Path: path, PoolSize: 1, CallTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				d, err := m.Filter(context.Background(), call(`{"mode":"log"}`))
				if err == nil && d.Action != ActionRewrite {
					err = errors.New("decision " + string(d.Action) + ", want rewrite")
				}
				done <- err
			}()
			select {
			case <-hh.held:
			case <-time.After(time.Minute):
				t.Fatal("the guest call never wrote its line")
			}
			if tc.reload {
				copyModule(t, "add-header", path)
				if err := m.Reload(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			if err := m.Close(ended); !errors.Is(err, context.Canceled) {
				t.Fatalf("Close with an ended context while a call runs: %v, want context.Canceled", err)
			}
			// As filters.Set.Close does: the Host right after its modules.
			if err := h.Close(ended); err != nil {
				t.Fatal(err)
			}
			release()
			if err := <-done; err != nil {
				t.Fatalf("call held across Close: %v, want it to complete", err)
			}
			select {
			case <-m.rtClosed:
			case <-time.After(time.Minute):
				t.Fatal("the runtime was not closed after the last call returned")
			}
			if m.closeErr != nil {
				t.Fatalf("closing the runtime: %v", m.closeErr)
			}
			if _, err := m.Filter(t.Context(), call(`{}`)); !errors.Is(err, ErrClosed) {
				t.Fatalf("call after Close: %v, want ErrClosed", err)
			}
			h.mu.Lock()
			open := h.open
			h.mu.Unlock()
			if open != 0 {
				t.Fatalf("host counts %d open modules after the last one closed", open)
			}
		})
	}
}

type fakeCache struct{ closed int }

func (c *fakeCache) Close(context.Context) error { c.closed++; return nil }

// An owned cache outlives Host.Close while a module's runtime is still open
// (its code runs from the cache's engine), and closes with the last one.
func TestHostKeepsCacheForOpenModules(t *testing.T) {
	c := &fakeCache{}
	h := &Host{cache: c, ownsCache: true, log: slog.New(slog.DiscardHandler)}
	h.hold()
	h.hold()
	if err := h.Close(t.Context()); err != nil || c.closed != 0 {
		t.Fatalf("Close with open modules: err %v, cache closed %d times; want nil, 0", err, c.closed)
	}
	h.release()
	if c.closed != 0 {
		t.Fatal("cache closed while a module's runtime is open")
	}
	h.release()
	if c.closed != 1 {
		t.Fatalf("cache closed %d times after the last module, want 1", c.closed)
	}
	if err := h.Close(t.Context()); err != nil || c.closed != 1 {
		t.Fatalf("second Close: err %v, cache closed %d times; want nil, 1", err, c.closed)
	}
}

// With no call running, Close closes the runtime before it looks at ctx, so
// an ended context is not an error.
func TestCloseIdleWithEndedContext(t *testing.T) {
	m := loadGuest(t, newTestHost(t, nil), "misbehave", Options{})
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Close(ended); err != nil {
		t.Fatalf("Close of an idle module with an ended context: %v", err)
	}
	select {
	case <-m.rtClosed:
	default:
		t.Fatal("Close of an idle module returned before closing the runtime")
	}
}
