package extproc

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

	"github.com/toolmesh/toolmesh/internal/tracing"
	"github.com/toolmesh/toolmesh/registry"
)

// Tracing (docs/operators.md, "Tracing"). With Config.TracerProvider set,
// each Process stream is one span, with a child per ext_proc phase and,
// under those, the filter chain, schema validation and search_tools. The
// parent comes from, in order:
//
//  1. the gRPC metadata of the stream (traceparent/tracestate): Envoy's
//     span for its ext_proc call, when Envoy traces and puts it there
//     (the ext_proc client passes the request's span to its gRPC stream,
//     source/extensions/filters/http/ext_proc/client_impl.cc; whether
//     Envoy v1.40 injects it into the stream's metadata is [verify]);
//  2. the client's W3C headers among the request headers Envoy forwards;
//  3. the MCP request's params._meta keys traceparent, tracestate and
//     baggage (the 2026-07-28 protocol revision).
//
// A request without any starts a new trace. The third source is read from
// the body, so when only it can name the parent, the exchange span and its
// request-headers child are started in the body phase with the times they
// really began.

// Span names.
const (
	spanExchange        = "envoy.service.ext_proc.v3.ExternalProcessor/Process"
	spanRequestHeaders  = "ext_proc request_headers"
	spanRequestBody     = "ext_proc request_body"
	spanResponseHeaders = "ext_proc response_headers"
	spanResponseBody    = "ext_proc response_body"
	spanValidate        = "schema validation"
	spanSearch          = "search_tools"
)

// propagator reads and writes W3C trace context and baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// newTracer is the server's tracer, nil with tracing off.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracing.ScopeName)
}

// requestTrace is the tracing state of one request; the zero value is
// tracing off.
type requestTrace struct {
	tracer trace.Tracer    // nil: tracing off
	ctx    context.Context // the exchange span's context, once started
	span   trace.Span      // the exchange span; nil until started
	// headersStart and headersEnd time a request-headers phase that ran
	// before its parent was known.
	headersStart, headersEnd time.Time
}

// handleTraced is handle with tracing on: it starts the exchange span as
// soon as its parent is known and wraps each phase in a child span, which
// x.ctx carries while the phase runs.
func (x *request) handleTraced(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	var name string
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		name = spanRequestHeaders
		if x.tr.span == nil {
			if c := headerCarrier(x.ctx, r.RequestHeaders.GetHeaders()); c != nil {
				x.startExchange(c)
			}
		}
	case *extprocv3.ProcessingRequest_RequestBody:
		name = spanRequestBody
		if x.tr.span == nil {
			x.startExchange(metaCarrier(r.RequestBody.GetBody()))
		}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		name = spanResponseHeaders
	case *extprocv3.ProcessingRequest_ResponseBody:
		name = spanResponseBody
	default:
		return x.dispatch(req)
	}
	start := time.Now()
	if x.tr.span == nil {
		// Request headers whose parent may be in the body: time the phase
		// now, record its span once the exchange span exists.
		resp := x.dispatch(req)
		x.tr.headersStart, x.tr.headersEnd = start, time.Now()
		return resp
	}
	ctx, span := x.tr.tracer.Start(x.tr.ctx, name, trace.WithTimestamp(start))
	streamCtx := x.ctx
	x.ctx = ctx
	resp := x.dispatch(req)
	x.ctx = streamCtx
	span.End()
	return resp
}

// startExchange starts the exchange span under the parent carrier names
// (nil or empty: a new trace), at the time the stream began, and records a
// request-headers phase that ran before.
func (x *request) startExchange(c propagation.TextMapCarrier) {
	parent := x.ctx
	if c != nil {
		parent = propagator.Extract(parent, c)
	}
	ctx, span := x.tr.tracer.Start(parent, spanExchange, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(x.start), trace.WithAttributes(
			tracing.RPCSystem.String("grpc"),
			tracing.RPCService.String("envoy.service.ext_proc.v3.ExternalProcessor"),
			tracing.RPCMethod.String("Process")))
	x.tr.ctx, x.tr.span = tracing.WithTracer(ctx, x.tr.tracer), span
	if !x.tr.headersStart.IsZero() {
		_, hs := x.tr.tracer.Start(x.tr.ctx, spanRequestHeaders, trace.WithTimestamp(x.tr.headersStart))
		hs.End(trace.WithTimestamp(x.tr.headersEnd))
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
				c[k] = headerValue(h)
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

// traceHeaders are the header mutations that carry the exchange span's
// context to the Tool Service (traceparent, tracestate, baggage); none
// with tracing off.
func (x *request) traceHeaders() []*corev3.HeaderValueOption {
	c := x.traceContext()
	if c == nil {
		return nil
	}
	set := make([]*corev3.HeaderValueOption, 0, len(c))
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if v := c[k]; v != "" {
			set = append(set, setHeader(k, v))
		}
	}
	return set
}

// TraceMetaForUpstream is what a federated MCP call puts in the upstream
// request's params._meta (traceparent, tracestate, baggage), beside the
// same trace headers, so the MCP server continues the trace; nil with
// tracing off.
func (x *request) TraceMetaForUpstream() map[string]string { return x.traceContext() }

func (x *request) traceContext() propagation.MapCarrier {
	if x.tr.span == nil {
		return nil
	}
	c := propagation.MapCarrier{}
	propagator.Inject(x.tr.ctx, c)
	if c["traceparent"] == "" {
		return nil
	}
	return c
}

// validate is t.ValidateArguments in a span, for a route without filters
// (a route with filters validates in its input_schema filter, which has a
// span of its own).
func (x *request) validate(t *registry.Tool, args json.RawMessage) []string {
	if x.tr.span == nil {
		return t.ValidateArguments(args)
	}
	_, span := tracing.Start(x.ctx, spanValidate, trace.WithAttributes(tracing.GenAIToolName.String(t.Name)))
	msgs := t.ValidateArguments(args)
	if len(msgs) > 0 {
		span.SetAttributes(tracing.Outcome.String(callInvalidArgs))
	}
	span.End()
	return msgs
}

// finishTrace ends the exchange span with what became of the request.
// Called from finish, after the outcome is settled.
func (x *request) finishTrace(method, era string) {
	if x.tr.tracer == nil {
		return
	}
	if x.tr.span == nil {
		// Answered before any parent could be read: a trace of its own.
		x.startExchange(nil)
	}
	span := x.tr.span
	attrs := []attribute.KeyValue{tracing.Route.String(x.routeKey), tracing.Era.String(era),
		tracing.Outcome.String(x.outcome)}
	if method != methodNone && method != methodOther {
		attrs = append(attrs, tracing.MCPMethodName.String(method))
	}
	if x.call != nil {
		attrs = append(attrs, tracing.MCPProtocolVersion.String(x.call.Version))
	}
	tool := ""
	switch {
	case x.tool != nil:
		tool = x.tool.Name
		attrs = append(attrs, tracing.ToolService.String(x.tool.Service))
	case x.headerRoute != nil:
		tool = x.headerRoute.Name
	}
	if tool != "" {
		attrs = append(attrs, tracing.GenAIToolName.String(tool), tracing.GenAIOperationName.String("execute_tool"))
	}
	if x.status != 0 {
		attrs = append(attrs, tracing.HTTPStatusCode.Int(x.status))
	} else if x.upStatus != 0 {
		attrs = append(attrs, tracing.HTTPStatusCode.Int(x.upStatus))
	}
	span.SetAttributes(attrs...)
	switch x.outcome {
	case outcomeStreamError, callUpstream5xx, callToolError, callNoResponse, callTooLarge, callTimeout, callUnavailable:
		span.SetAttributes(tracing.ErrorType.String(x.outcome))
		span.SetStatus(codes.Error, x.outcome)
	}
	span.End()
}
