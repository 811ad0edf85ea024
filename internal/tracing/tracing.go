// Package tracing holds what toolmesh's packages share for OpenTelemetry
// traces: the attribute keys and a tracer carried in the context, so a
// package deep in the call path (filters) starts spans with the caller's
// tracer without a global and without TracerProvider.Tracer, which takes a
// lock, on the hot path.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every toolmesh span.
const ScopeName = "github.com/toolmesh/toolmesh"

// Attribute keys. The MCP, gen_ai, RPC, HTTP and error keys are the
// OpenTelemetry semantic conventions' (opentelemetry.io/docs/specs/semconv:
// gen-ai/mcp.md, rpc/grpc.md, http/http-spans.md); toolmesh.* are
// toolmesh's own. No key ever carries an argument value, a result or a
// credential.
const (
	MCPMethodName      = attribute.Key("mcp.method.name")
	MCPProtocolVersion = attribute.Key("mcp.protocol.version")
	GenAIToolName      = attribute.Key("gen_ai.tool.name")
	GenAIOperationName = attribute.Key("gen_ai.operation.name")
	RPCSystem          = attribute.Key("rpc.system")
	RPCService         = attribute.Key("rpc.service")
	RPCMethod          = attribute.Key("rpc.method")
	HTTPStatusCode     = attribute.Key("http.response.status_code")
	ErrorType          = attribute.Key("error.type")

	Route           = attribute.Key("toolmesh.route")
	Era             = attribute.Key("toolmesh.era")
	Outcome         = attribute.Key("toolmesh.outcome")
	ToolService     = attribute.Key("toolmesh.tool_service")
	Filter          = attribute.Key("toolmesh.filter.name")
	FilterKind      = attribute.Key("toolmesh.filter.kind")
	Stage           = attribute.Key("toolmesh.filter.stage")
	NodeGroup       = attribute.Key("toolmesh.xds.group")
	Resources       = attribute.Key("toolmesh.xds.resources")
	ServiceProtocol = attribute.Key("toolmesh.tool_service.protocol")
	RoutesCount     = attribute.Key("toolmesh.routes")
	ServicesCount   = attribute.Key("toolmesh.tool_services")
	Version         = attribute.Key("toolmesh.xds.version")
)

type tracerKey struct{}

// WithTracer returns ctx carrying t for Start.
func WithTracer(ctx context.Context, t trace.Tracer) context.Context {
	return context.WithValue(ctx, tracerKey{}, t)
}

// noSpan is what Start returns when it starts nothing: a span whose End
// and setters do nothing.
var noSpan = trace.SpanFromContext(context.Background())

// Enabled reports whether Start would start a span: callers test it before
// building a span's name and attributes.
func Enabled(ctx context.Context) bool {
	t, _ := ctx.Value(tracerKey{}).(trace.Tracer)
	return t != nil && trace.SpanFromContext(ctx).IsRecording()
}

// Start starts a child of ctx's span with ctx's tracer. It starts nothing,
// cheaply, when ctx carries no tracer or its span does not record (tracing
// off, or the trace was not sampled: sampling is parent-based).
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	t, _ := ctx.Value(tracerKey{}).(trace.Tracer)
	if t == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	return t.Start(ctx, name, opts...)
}
