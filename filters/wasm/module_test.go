package wasm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// instanceOf returns the misbehave guest's instance id and call count.
func instanceOf(t *testing.T, d Decision) (id, calls string) {
	t.Helper()
	id, calls = d.Headers["x-instance"], d.Headers["x-calls"]
	if id == "" || calls == "" {
		t.Fatalf("decision %+v lacks the misbehave guest's headers", d)
	}
	return id, calls
}

func TestFailuresAreIsolated(t *testing.T) {
	h := newTestHost(t, nil)
	tests := []struct {
		name      string
		args      string
		opts      Options
		wantErr   error
		wantMsg   string
		sameAfter bool // the failed instance is reused (the SDK recovered)
	}{
		{"loop is cut off at the time limit", `{"mode":"loop"}`, Options{CallTimeout: 50 * time.Millisecond}, ErrTimeout, "deadline", false},
		{"memory exhaustion traps", `{"mode":"oom"}`, Options{MemoryPages: 256, CallTimeout: 10 * time.Second}, ErrTrap, "", false},
		{"unrecoverable runtime crash traps", `{"mode":"crash"}`, Options{}, ErrTrap, "", false},
		{"proc_exit traps", `{"mode":"exit"}`, Options{}, ErrTrap, "exit_code(3)", false},
		{"panic is reported by the SDK", `{"mode":"panic"}`, Options{}, ErrGuest, "panic: boom", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Name, opts.PoolSize = "misbehave", 1
			m := loadGuest(t, h, "misbehave", opts)
			before, err := m.Filter(t.Context(), call(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			id, _ := instanceOf(t, before)

			_, err = m.Filter(t.Context(), call(tt.args))
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("error = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}

			after, err := m.Filter(t.Context(), call(`{}`))
			if err != nil {
				t.Fatalf("call after the failure: %v", err)
			}
			newID, calls := instanceOf(t, after)
			if tt.sameAfter {
				if newID != id || calls != "3" {
					t.Fatalf("after a recovered panic: instance %s call %s, want instance %s call 3", newID, calls, id)
				}
				return
			}
			if newID == id || calls != "1" {
				t.Fatalf("after the failure: instance %s call %s, want a fresh instance (not %s) on its first call", newID, calls, id)
			}
		})
	}
}

func TestABIViolations(t *testing.T) {
	h := newTestHost(t, nil)
	for _, mode := range []string{"badjson", "badaction", "badptr", "notobject", "badalloc"} {
		t.Run(mode, func(t *testing.T) {
			m := loadGuest(t, h, "rawabi", Options{Name: "rawabi-" + mode, Config: []byte(`"` + mode + `"`)})
			args := `{}`
			if mode == "badalloc" { // larger than the buffer configure left behind
				args = `{"blob":"` + strings.Repeat("x", 3*allocGranule) + `"}`
			}
			_, err := m.Filter(t.Context(), call(args))
			if !errors.Is(err, ErrABI) {
				t.Fatalf("error = %v, want ErrABI", err)
			}
		})
	}
	t.Run("well-behaved", func(t *testing.T) {
		m := loadGuest(t, h, "rawabi", Options{})
		d, err := m.Filter(t.Context(), call(`{}`))
		if err != nil || d.Action != ActionPass {
			t.Fatalf("decision = %+v, %v; want pass", d, err)
		}
	})
}

func TestLoadErrors(t *testing.T) {
	h := newTestHost(t, nil)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.wasm", []byte("\x00asm\x01\x00\x00\x00"))
	handmade := write("handmade.wasm", abiModule(1, []byte{i64}, true))
	version := write("version.wasm", abiModule(99, []byte{i64}, true))
	signature := write("signature.wasm", abiModule(1, []byte{i32}, true))
	command := write("command.wasm", abiModule(1, []byte{i64}, false))
	garbage := write("garbage.wasm", []byte("not wasm at all"))
	raw := guestModule(t, "rawabi")
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"missing file", Options{Name: "f", Path: filepath.Join(dir, "absent.wasm")}, "no such file"},
		{"not wasm", Options{Name: "f", Path: garbage}, "compile"},
		{"no exports", Options{Name: "f", Path: empty}, `does not export function "abi_version"`},
		{"wrong ABI version", Options{Name: "f", Path: version}, "ABI version 99"},
		{"wrong signature", Options{Name: "f", Path: signature}, `export "filter" has signature [i32 i32] -> [i32]`},
		{"not a reactor", Options{Name: "f", Path: command}, "not a reactor"},
		{"configure refuses", Options{Name: "f", Path: raw, Config: []byte(`"refuse"`)}, "refusing this configuration"},
		{"bad name", Options{Name: "Bad Name", Path: raw}, "invalid filter name"},
		{"no path", Options{Name: "f"}, "path is required"},
		{"memory limit too small", Options{Name: "f", Path: raw, MemoryPages: 8}, "memoryPages"},
		{"negative pool", Options{Name: "f", Path: raw, PoolSize: -1}, "negative"},
		{"poll too fast", Options{Name: "f", Path: raw, PollInterval: time.Millisecond}, "pollInterval"},
	}
	t.Run("hand-assembled module works", func(t *testing.T) {
		m := loadGuest(t, h, "handmade", Options{Path: handmade})
		d, err := m.Filter(t.Context(), call(`{}`))
		if err != nil || d.Action != ActionPass {
			t.Fatalf("decision = %+v, %v; want pass", d, err)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := h.Load(t.Context(), tt.opts)
			if err == nil {
				_ = m.Close(context.Background())
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestEnvelopeTooLarge(t *testing.T) {
	h := newTestHost(t, nil)
	m := loadGuest(t, h, "rawabi", Options{MaxEnvelopeBytes: 1024})
	_, err := m.Filter(t.Context(), call(`{"blob":"`+strings.Repeat("x", 2048)+`"}`))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error = %v, want ErrTooLarge", err)
	}
}

func TestPoolBound(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newTestHost(t, reg)
	const size = 2
	// A call that times out closes its instance and a new one takes its
	// place: the 30s call timeout keeps a loaded machine from making this a
	// test of the default 250ms one.
	m := loadGuest(t, h, "misbehave", Options{PoolSize: size, QueueTimeout: 30 * time.Second, CallTimeout: 30 * time.Second})
	gauge := h.metrics.instances.WithLabelValues("misbehave")

	var (
		mu      sync.Mutex
		ids     = map[string]bool{}
		maxSeen float64
		wg      sync.WaitGroup
	)
	for range 4 * size {
		wg.Go(func() {
			for range 5 {
				d, err := m.Filter(context.Background(), call(`{"mode":"hold","ms":"3"}`))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids[d.Headers["x-instance"]] = true
				maxSeen = max(maxSeen, value(t, gauge))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(ids) > size || maxSeen > size {
		t.Fatalf("saw %d instances (gauge peaked at %v), pool size is %d", len(ids), maxSeen, size)
	}
	if len(ids) < 2 {
		t.Fatalf("saw %d instance(s): the pool never grew under concurrent load", len(ids))
	}
	if got := value(t, h.metrics.calls.WithLabelValues("misbehave")); got != 40 {
		t.Fatalf("calls_total = %v, want 40", got)
	}
}

func TestBusyPoolTimesOut(t *testing.T) {
	h := newTestHost(t, nil)
	m := loadGuest(t, h, "misbehave", Options{PoolSize: 1, QueueTimeout: 20 * time.Millisecond, CallTimeout: 10 * time.Second})
	p := m.cur.Load()
	done := make(chan error, 1)
	go func() {
		_, err := m.Filter(context.Background(), call(`{"mode":"hold","ms":"500"}`))
		done <- err
	}()
	// Wait until the only instance is taken.
	for deadline := time.Now().Add(10 * time.Second); len(p.idle) > 0 || len(p.slots) < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the holding call never took the instance")
		}
		time.Sleep(time.Millisecond)
	}
	_, err := m.Filter(t.Context(), call(`{}`))
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("error = %v, want ErrBusy", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newTestHost(t, reg)
	deny := loadGuest(t, h, "deny-argument", Options{})
	for _, args := range []string{`{"path":"/etc/x"}`, `{"path":"/tmp"}`, `{"path":"/etc/y"}`} {
		in := call(args)
		in.Tool = "delete_file"
		if _, err := deny.Filter(t.Context(), in); err != nil {
			t.Fatal(err)
		}
	}
	bad := loadGuest(t, h, "misbehave", Options{PoolSize: 1})
	if _, err := bad.Filter(t.Context(), call(`{"mode":"crash"}`)); err == nil {
		t.Fatal("crash did not fail")
	}
	for _, c := range []struct {
		metric *prometheus.CounterVec
		labels []string
		want   float64
	}{
		{h.metrics.calls, []string{"deny-argument"}, 3},
		{h.metrics.denials, []string{"deny-argument"}, 2},
		{h.metrics.calls, []string{"misbehave"}, 1},
		{h.metrics.errors, []string{"misbehave", "trap"}, 1},
		{h.metrics.discards, []string{"misbehave", "error"}, 1},
	} {
		if got := value(t, c.metric.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if n := series(h.metrics.latency); n != 2 {
		t.Errorf("latency series = %d, want 2", n)
	}
	// A second Host on the same registry shares the collectors.
	if _, err := NewHost(HostConfig{Cache: sharedCache, Registerer: reg}); err != nil {
		t.Fatalf("second host on the same registry: %v", err)
	}
}

func TestClose(t *testing.T) {
	h := newTestHost(t, nil)
	m, err := h.Load(t.Context(), Options{Name: "misbehave", Path: guestModule(t, "misbehave"), CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		_, err := m.Filter(context.Background(), call(`{"mode":"hold","ms":"200"}`))
		done <- err
	}()
	<-started
	for p := m.cur.Load(); p != nil && p.refs.Load() == 0; {
		time.Sleep(time.Millisecond)
	}
	if err := m.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("in-flight call during Close: %v", err)
	}
	if _, err := m.Filter(t.Context(), call(`{}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
	if err := m.Reload(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reload after Close: %v, want ErrClosed", err)
	}
	if err := m.Close(t.Context()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
