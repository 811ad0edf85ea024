package xds

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolmesh/toolmesh/internal/tracing"
)

// SetTracerProvider traces the pushes of later builds: one span per node
// group whose snapshot changed (docs/operators.md, "Tracing"). nil traces
// nothing. Call it before the first Update.
func (s *Server) SetTracerProvider(tp trace.TracerProvider) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	s.tracer = tp.Tracer(tracing.ScopeName)
}

// startPush starts the span of one node group's snapshot push.
func (s *Server) startPush(ctx context.Context, g Group, version string) (context.Context, trace.Span) {
	t := s.tracer
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	r := g.Resources
	return t.Start(ctx, "xds push", trace.WithAttributes(tracing.NodeGroup.String(g.Key),
		tracing.Version.String(version),
		tracing.Resources.Int(len(r.Listeners)+len(r.Routes)+len(r.Clusters)+len(r.Endpoints))))
}

// endPush ends a push span.
func endPush(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(tracing.Outcome.String("failed"))
	} else {
		span.SetAttributes(tracing.Outcome.String("pushed"))
	}
	span.End()
}
