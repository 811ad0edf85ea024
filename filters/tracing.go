package filters

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolmesh/toolmesh/internal/tracing"
)

// startSpan starts the span of one filter run, a child of ctx's span when
// the caller traces (internal/tracing). The span names the filter, its kind
// and stage, and later its decision; never the arguments or the result.
func (e *entry) startSpan(ctx context.Context, stage Stage) (context.Context, trace.Span) {
	if !tracing.Enabled(ctx) {
		return ctx, trace.SpanFromContext(context.Background())
	}
	kind := "builtin"
	if _, ok := e.f.(*wasmFilter); ok {
		kind = "wasm"
	}
	return tracing.Start(ctx, "filter "+e.name, trace.WithAttributes(
		tracing.Filter.String(e.name), tracing.FilterKind.String(kind), tracing.Stage.String(stage.String())))
}

// endSpan records a filter's decision and ends its span.
func endSpan(span trace.Span, a Action, err error) {
	switch {
	case !span.IsRecording():
	case err != nil:
		span.SetAttributes(tracing.Outcome.String("error"), tracing.ErrorType.String("filter_error"))
		span.SetStatus(codes.Error, "filter failed")
	default:
		span.SetAttributes(tracing.Outcome.String(a.String()))
	}
	span.End()
}

// validateTraced runs r.Validate in a "schema validation" span.
func validateTraced(ctx context.Context, r *Request) []string {
	if !tracing.Enabled(ctx) {
		return r.Validate(r.Arguments)
	}
	_, span := tracing.Start(ctx, "schema validation", trace.WithAttributes(tracing.GenAIToolName.String(r.Tool)))
	msgs := r.Validate(r.Arguments)
	if len(msgs) > 0 {
		span.SetAttributes(tracing.Outcome.String("invalid_arguments"))
	}
	span.End()
	return msgs
}
