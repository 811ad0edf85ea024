package xds_test

import (
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolmesh/toolmesh/xds"
)

// TestPushSpans: each node group whose snapshot changes gets one push
// span; an unchanged input pushes nothing and records nothing.
func TestPushSpans(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	s, _, _ := startServerWith(t, sidecarNodes)
	s.SetTracerProvider(tp)
	portal := nodePortal()
	if _, err := s.Update(t.Context(), portal); err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, sp := range sr.Ended() {
		if sp.Name() != "xds push" {
			t.Errorf("unexpected span %q", sp.Name())
			continue
		}
		attrs := map[string]string{}
		for _, a := range sp.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		if attrs["toolmesh.outcome"] != "pushed" || attrs["toolmesh.xds.version"] == "" {
			t.Errorf("push span attributes %v", attrs)
		}
		groups = append(groups, attrs["toolmesh.xds.group"])
	}
	slices.Sort(groups)
	want := []string{xds.AllRoutesGroup, sidecarNodes.GroupKey("billing-1", "billing-sidecar")}
	slices.Sort(want)
	if !slices.Equal(groups, want) {
		t.Errorf("pushed groups %v, want %v", groups, want)
	}
	sr.Reset()
	if _, err := s.Update(t.Context(), portal); err != nil {
		t.Fatal(err)
	}
	if n := len(sr.Ended()); n != 0 {
		t.Errorf("unchanged input recorded %d spans", n)
	}
}
