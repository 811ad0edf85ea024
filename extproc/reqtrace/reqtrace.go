// Package reqtrace traces one ext_proc stream (docs/operators.md,
// "Tracing"): the stream is one span, with a child per ext_proc phase and,
// under those, the filter chain, schema validation and search_tools. The
// parent comes from, in order:
//
//  1. the gRPC metadata of the stream (traceparent/tracestate): Envoy's
//     span for its ext_proc call, when Envoy traces (the gRPC client injects
//     it into the stream's headers, source/common/grpc/async_client_impl.cc
//     AsyncStreamImpl::initialize, current_span_->injectContext; at v1.40.0
//     ext_proc.proto ExternalProcessor.emit_client_span says that with the
//     span switched off "trace context (e.g. traceparent) will still be
//     propagated to the external processor", changelogs/1.40.0.yaml
//     new_features, area ext_proc);
//  2. the client's W3C headers among the request headers Envoy forwards;
//  3. the MCP request's params._meta keys traceparent, tracestate and
//     baggage (the 2026-07-28 protocol revision).
//
// A request without any starts a new trace. The third source is read from
// the body, so when only it can name the parent, the exchange span and its
// request-headers child are started in the body phase with the times they
// really began. The stream handler (package extproc) owns the request; a
// Request here holds only its tracing state.
package reqtrace

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/tracing"
	"github.com/toolmesh/toolmesh/registry"
)

// Span names.
const (
	SpanExchange        = "envoy.service.ext_proc.v3.ExternalProcessor/Process"
	SpanRequestHeaders  = "ext_proc request_headers"
	SpanRequestBody     = "ext_proc request_body"
	SpanResponseHeaders = "ext_proc response_headers"
	SpanResponseBody    = "ext_proc response_body"
	SpanValidate        = "schema validation"
)

// propagator reads and writes W3C trace context and baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// NewTracer is the server's tracer, nil with tracing off.
func NewTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracing.ScopeName)
}

// Request is the tracing state of one request; the zero value is tracing
// off.
type Request struct {
	tracer trace.Tracer    // nil: tracing off
	start  time.Time       // when the stream began
	ctx    context.Context // the exchange span's context, once started
	span   trace.Span      // the exchange span; nil until started
	// headersStart and headersEnd time a request-headers phase that ran
	// before its parent was known.
	headersStart, headersEnd time.Time
}

// New is the tracing state of a stream that began at start; tracer nil is
// tracing off.
func New(tracer trace.Tracer, start time.Time) Request {
	return Request{tracer: tracer, start: start}
}

// On reports whether the request is traced.
func (t *Request) On() bool { return t.tracer != nil }

// Started reports whether the exchange span has started: its parent was
// known by now.
func (t *Request) Started() bool { return t.span != nil }

// Phase is one ext_proc phase under way, for EndPhase.
type Phase struct {
	span    trace.Span // nil: a phase timed until its parent is known, or not traced
	start   time.Time
	untimed bool // a message that is not a phase
}

// StartPhase starts the span of the phase req begins, starting the
// exchange span as soon as its parent is known (ctx is the stream's).
// The phase runs in the context it returns; EndPhase ends it.
func (t *Request) StartPhase(ctx context.Context, req *extprocv3.ProcessingRequest) (context.Context, Phase) {
	var name string
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		name = SpanRequestHeaders
		if t.span == nil {
			if c := headerCarrier(ctx, r.RequestHeaders.GetHeaders()); c != nil {
				t.startExchange(ctx, c)
			}
		}
	case *extprocv3.ProcessingRequest_RequestBody:
		name = SpanRequestBody
		if t.span == nil {
			t.startExchange(ctx, metaCarrier(r.RequestBody.GetBody()))
		}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		name = SpanResponseHeaders
	case *extprocv3.ProcessingRequest_ResponseBody:
		name = SpanResponseBody
	default:
		return ctx, Phase{untimed: true}
	}
	start := time.Now()
	if t.span == nil {
		// Request headers whose parent may be in the body: time the phase
		// now, record its span once the exchange span exists.
		return ctx, Phase{start: start}
	}
	pctx, span := t.tracer.Start(t.ctx, name, trace.WithTimestamp(start))
	return pctx, Phase{span: span, start: start}
}

// EndPhase ends a phase StartPhase started.
func (t *Request) EndPhase(p Phase) {
	switch {
	case p.untimed:
	case p.span != nil:
		p.span.End()
	default:
		t.headersStart, t.headersEnd = p.start, time.Now()
	}
}

// startExchange starts the exchange span under the parent carrier names
// (nil or empty: a new trace), at the time the stream began, and records a
// request-headers phase that ran before.
func (t *Request) startExchange(ctx context.Context, c propagation.TextMapCarrier) {
	parent := ctx
	if c != nil {
		parent = propagator.Extract(parent, c)
	}
	sctx, span := t.tracer.Start(parent, SpanExchange, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(t.start), trace.WithAttributes(
			tracing.RPCSystem.String("grpc"),
			tracing.RPCService.String("envoy.service.ext_proc.v3.ExternalProcessor"),
			tracing.RPCMethod.String("Process")))
	t.ctx, t.span = tracing.WithTracer(sctx, t.tracer), span
	if !t.headersStart.IsZero() {
		_, hs := t.tracer.Start(t.ctx, SpanRequestHeaders, trace.WithTimestamp(t.headersStart))
		hs.End(trace.WithTimestamp(t.headersEnd))
	}
}

// headerCarrier returns the trace context of the stream's gRPC metadata or,
// failing that, of the client's request headers; nil when neither has a
// traceparent.
func headerCarrier(ctx context.Context, hm *corev3.HeaderMap) propagation.TextMapCarrier {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("traceparent")) > 0 {
		c := propagation.MapCarrier{}
		for _, k := range []string{"traceparent", "tracestate", "baggage"} {
			if v := md.Get(k); len(v) > 0 {
				c[k] = v[0]
			}
		}
		return c
	}
	var c propagation.MapCarrier
	for _, h := range hm.GetHeaders() {
		switch k := strings.ToLower(h.GetKey()); k {
		case "traceparent", "tracestate", "baggage":
			if c == nil {
				c = propagation.MapCarrier{}
			}
			if _, seen := c[k]; !seen {
				c[k] = procmsg.HeaderValue(h)
			}
		}
	}
	if c["traceparent"] == "" {
		return nil
	}
	return c
}

// metaCarrier returns the trace context in a JSON-RPC request's
// params._meta, nil when there is none (or the body is not one request).
func metaCarrier(body []byte) propagation.TextMapCarrier {
	var req struct {
		Params struct {
			Meta struct {
				Traceparent string `json:"traceparent"`
				Tracestate  string `json:"tracestate"`
				Baggage     string `json:"baggage"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil || req.Params.Meta.Traceparent == "" {
		return nil
	}
	m := req.Params.Meta
	return propagation.MapCarrier{"traceparent": m.Traceparent, "tracestate": m.Tracestate, "baggage": m.Baggage}
}

// Headers are the header mutations that carry the exchange span's context
// to the Tool Service (traceparent, tracestate, baggage); none with
// tracing off.
func (t *Request) Headers() []*corev3.HeaderValueOption {
	c := t.Context()
	if c == nil {
		return nil
	}
	set := make([]*corev3.HeaderValueOption, 0, len(c))
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if v := c[k]; v != "" {
			set = append(set, procmsg.SetHeader(k, v))
		}
	}
	return set
}

// Context is the exchange span's context as W3C keys (traceparent,
// tracestate, baggage), what a federated MCP call puts in the upstream
// request's params._meta; nil with tracing off or before the span started.
func (t *Request) Context() map[string]string {
	if t.span == nil {
		return nil
	}
	c := propagation.MapCarrier{}
	propagator.Inject(t.ctx, c)
	if c["traceparent"] == "" {
		return nil
	}
	return c
}

// Validate is tool.ValidateArguments in a span of ctx (a phase's), for a
// route without filters (a route with filters validates in its
// input_schema filter, which has a span of its own); a failure sets the
// span's outcome to invalid.
func (t *Request) Validate(ctx context.Context, tool *registry.Tool, args json.RawMessage, invalid string) []string {
	if t.span == nil {
		return tool.ValidateArguments(args)
	}
	_, span := tracing.Start(ctx, SpanValidate, trace.WithAttributes(tracing.GenAIToolName.String(tool.Name)))
	msgs := tool.ValidateArguments(args)
	if len(msgs) > 0 {
		span.SetAttributes(tracing.Outcome.String(invalid))
	}
	span.End()
	return msgs
}

// Ending is what became of a request, for its exchange span.
type Ending struct {
	Route, Era, Outcome string
	Method              string // the MCP method; "": none to name
	Call                bool   // a tools/call: Version is its protocol version
	Version             string
	Tool                string // the tool called or routed, "" for none
	Resolved            bool   // a resolved call: ToolService is its Tool Service
	ToolService         string
	Status              int  // the HTTP status, 0 for none
	Failed              bool // the outcome is a failure: the span's status is an error
}

// Finish ends the exchange span with e; a request answered before any
// parent could be read is a trace of its own (ctx is the stream's).
func (t *Request) Finish(ctx context.Context, e Ending) {
	if t.tracer == nil {
		return
	}
	if t.span == nil {
		t.startExchange(ctx, nil)
	}
	span := t.span
	attrs := []attribute.KeyValue{tracing.Route.String(e.Route), tracing.Era.String(e.Era),
		tracing.Outcome.String(e.Outcome)}
	if e.Method != "" {
		attrs = append(attrs, tracing.MCPMethodName.String(e.Method))
	}
	if e.Call {
		attrs = append(attrs, tracing.MCPProtocolVersion.String(e.Version))
	}
	if e.Resolved {
		attrs = append(attrs, tracing.ToolService.String(e.ToolService))
	}
	if e.Tool != "" {
		attrs = append(attrs, tracing.GenAIToolName.String(e.Tool), tracing.GenAIOperationName.String("execute_tool"))
	}
	if e.Status != 0 {
		attrs = append(attrs, tracing.HTTPStatusCode.Int(e.Status))
	}
	span.SetAttributes(attrs...)
	if e.Failed {
		span.SetAttributes(tracing.ErrorType.String(e.Outcome))
		span.SetStatus(codes.Error, e.Outcome)
	}
	span.End()
}
