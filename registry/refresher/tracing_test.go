package refresher

import (
	"testing"

	"github.com/toolmesh/toolmesh/internal/registrytest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestRefreshSpans: a refresh cycle is one span with a child per Tool
// Service fetch and per route build, failures marked.
func TestRefreshSpans(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	e := newEnv(t, func(o *Options) { o.TracerProvider = tp })
	e.b.Set(registrytest.ModeFail, "")
	e.start(t)

	var cycle sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == "registry refresh" {
			cycle = s
		}
	}
	if cycle == nil {
		t.Fatal("no registry refresh span")
	}
	got := map[string]string{} // child → outcome
	for _, s := range sr.Ended() {
		if s.Parent().SpanID() != cycle.SpanContext().SpanID() {
			continue
		}
		var key, outcome string
		for _, a := range s.Attributes() {
			switch a.Key {
			case "toolmesh.tool_service", "toolmesh.route":
				key = a.Value.AsString()
			case "toolmesh.outcome":
				outcome = a.Value.AsString()
			}
		}
		got[s.Name()+" "+key] = outcome
	}
	want := map[string]string{
		"registry fetch a": "ok", "registry fetch shared": "ok", "registry fetch b": "failed",
		"registry refresh route alpha": "updated", "registry refresh route beta": "failed",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("span %q outcome %q, want %q (all: %v)", k, got[k], w, got)
		}
	}
}
