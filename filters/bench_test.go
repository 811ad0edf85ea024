package filters

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkChain measures RunRequest with no filter, with built-in filters
// and with a pooled WebAssembly filter, in the same run, so the differences
// are the per-call cost each adds.
func BenchmarkChain(b *testing.B) {
	args := json.RawMessage(`{"city":"Paris","units":"metric","days":3}`)
	headers := map[string]string{"x-tenant": "acme", "user-agent": "bench", "accept": "application/json"}
	defs := []Definition{
		{Name: "acl", Type: TypeToolACL, Config: json.RawMessage(`{"allow":["get_*"],"deny":["*_admin"]}`)},
		{Name: "size", Type: TypeArgumentSize, Config: json.RawMessage(`{"maxBytes":65536}`)},
		{Name: "tenant", Type: TypeHeaderPropagation, Config: json.RawMessage(`{"headers":["x-tenant"]}`)},
		wasmDef("wasm", guest(b, "add-header"), false, `,"poolSize":2`),
	}
	cfg := Config{
		WasmCacheDir: cacheDir,
		Definitions:  defs,
		Routes: map[string][]string{
			"none":     {},
			"acl":      {"acl"},
			"builtins": {"acl", "size", "tenant"},
			"wasm":     {"wasm"},
		},
	}
	s, err := Build(context.Background(), cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	for _, route := range []string{"none", "acl", "builtins", "wasm"} {
		b.Run(route, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				r := Request{Route: route, Era: EraStateless, Method: "tools/call", Tool: "get_weather", Arguments: args, Headers: headers}
				if out := s.Chain(route).RunRequest(ctx, &r); out.Denied() {
					b.Fatal(out.Reason)
				}
			}
		})
	}
}
