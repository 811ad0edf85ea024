package extproc

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkToolsCallTracing is BenchmarkToolsCall (a routed call, all four
// phases, no filters: inline schema validation) with tracing off, on and
// sampled (spans batched to an exporter that drops them, so the export
// itself is not measured), and on but unsampled (ratio 0, no parent), in
// one run so the three are comparable:
//
//	go test ./extproc -run '^$' -bench BenchmarkToolsCallTracing -benchtime 20000x -count 3
func BenchmarkToolsCallTracing(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: tracing off
	}{
		{"off", nil},
		{"sampled", sdktrace.AlwaysSample()},
		{"unsampled", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{}
			if bc.sampler != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(bc.sampler),
					sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				b.Cleanup(func() { _ = tp.Shutdown(b.Context()) })
				cfg.TracerProvider = tp
			}
			routes := testRoutes{"/mcp/core": {key: "core", snap: benchSnapshot(b, 10)}}
			srv, err := New(cfg, routes, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			runRequests(b, serve(b, srv.GRPCServerOptions(), srv.Register), callSeq, isResult)
		})
	}
}
