package wasm

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// benchTimeout is generous: the benchmarks measure cost, and a shared
// machine can stall a call past the default limit.
const benchTimeout = 5 * time.Second

// BenchmarkFilter measures one pooled call into a guest against a baseline
// that does everything but the guest call (building the same input), so the
// difference is the per-call overhead a WebAssembly filter adds.
func BenchmarkFilter(b *testing.B) {
	h := newTestHost(b, nil)
	in := &Input{
		Stage: StageRequest, Route: "core", Era: "stateless", Version: "2026-07-28",
		Method: "tools/call", Tool: "get_weather",
		Arguments: json.RawMessage(`{"city":"Paris","units":"metric","days":3}`),
		Headers:   map[string]string{"x-tenant": "acme", "user-agent": "bench"},
	}
	b.Run("none", func(b *testing.B) {
		ctx := context.Background()
		var buf []byte
		for b.Loop() {
			buf = appendEnvelope(buf[:0], "none", in)
			_ = ctx
		}
	})
	for _, c := range []struct {
		name  string
		guest string
		opts  Options
	}{
		{"add-header", "add-header", Options{CallTimeout: benchTimeout}},
		{"rawabi", "rawabi", Options{CallTimeout: benchTimeout}},
		{"deny-argument", "deny-argument", Options{CallTimeout: benchTimeout}},
		{"add-header/uninterruptible", "add-header", Options{Uninterruptible: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := loadGuest(b, h, c.guest, c.opts)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Filter(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("add-header/parallel", func(b *testing.B) {
		m := loadGuest(b, h, "add-header", Options{Name: "parallel", PoolSize: 4, Prewarm: 4, CallTimeout: benchTimeout})
		ctx := context.Background()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := m.Filter(ctx, in); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
