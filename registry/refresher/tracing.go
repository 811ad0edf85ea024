package refresher

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolmesh/toolmesh/internal/tracing"
	"github.com/toolmesh/toolmesh/registry"
)

// Spans of a refresh cycle (docs/operators.md, "Tracing"): the cycle is a
// trace of its own, with a child per Tool Service fetch and per route build.

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(tracing.ScopeName)
	}
	return tp.Tracer(tracing.ScopeName)
}

// startCycle starts the span of one manifest refresh cycle.
func (r *Registry) startCycle(ctx context.Context, routes, services int) (context.Context, trace.Span) {
	return r.tracer.Start(ctx, "registry refresh", trace.WithAttributes(
		tracing.RoutesCount.Int(routes), tracing.ServicesCount.Int(services)))
}

// startFetch starts the span of one Tool Service's manifest or MCP listing
// fetch.
func (r *Registry) startFetch(ctx context.Context, svc registry.ToolService) (context.Context, trace.Span) {
	proto := "native"
	if svc.IsMCP() {
		proto = "mcp"
	}
	return r.tracer.Start(ctx, "registry fetch", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		tracing.ToolService.String(svc.Name), tracing.ServiceProtocol.String(proto)))
}

// startRoute starts the span of one route's snapshot build.
func (r *Registry) startRoute(ctx context.Context, key string) (context.Context, trace.Span) {
	return r.tracer.Start(ctx, "registry refresh route", trace.WithAttributes(tracing.Route.String(key)))
}

// endSpan ends a registry span with its outcome: ok, or failed with the
// error's text (a route, service or URL name; never a credential, which
// the fetchers keep out of their errors).
func endSpan(span trace.Span, outcome string, err error) {
	if err != nil {
		outcome = "failed"
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(tracing.Outcome.String(outcome))
	span.End()
}

// routeOutcome says what a successful route build did.
func routeOutcome(b built) string {
	if b.snap != nil {
		return "updated"
	}
	return "unchanged"
}
