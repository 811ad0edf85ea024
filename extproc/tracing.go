package extproc

import (
	"encoding/json"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/extproc/reqtrace"
	"github.com/toolmesh/toolmesh/registry"
)

// Tracing (docs/operators.md, "Tracing"; package reqtrace): with
// Config.TracerProvider set, each Process stream is one span, with a child
// per ext_proc phase, which x.ctx carries while the phase runs.

// handleTraced is dispatch with tracing on: the phase runs in its span.
func (x *request) handleTraced(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	streamCtx := x.ctx
	ctx, phase := x.tr.StartPhase(streamCtx, req)
	x.ctx = ctx
	resp := x.dispatch(req)
	x.ctx = streamCtx
	x.tr.EndPhase(phase)
	return resp
}

// traceHeaders are the header mutations that carry the exchange span's
// context to the upstream; none with tracing off.
func (x *request) traceHeaders() []*corev3.HeaderValueOption { return x.tr.Headers() }

// TraceMetaForUpstream is what a federated MCP call puts in the upstream
// request's params._meta (traceparent, tracestate, baggage), beside the
// same trace headers, so the MCP server continues the trace; nil with
// tracing off.
func (x *request) TraceMetaForUpstream() map[string]string { return x.tr.Context() }

// validate is t.ValidateArguments, in a span when the request is traced.
func (x *request) validate(t *registry.Tool, args json.RawMessage) []string {
	return x.tr.Validate(x.ctx, t, args, callInvalidArgs)
}

// finishTrace ends the exchange span with what became of the request.
// Called from finish, after the outcome is settled.
func (x *request) finishTrace(method, era string) {
	if !x.tr.On() {
		return
	}
	e := reqtrace.Ending{Route: x.routeKey, Era: era, Outcome: x.outcome, Status: x.status}
	if method != metrics.MethodNone && method != metrics.MethodOther {
		e.Method = method
	}
	if x.call != nil {
		e.Call, e.Version = true, x.call.Version
	}
	switch {
	case x.tool != nil:
		e.Tool, e.Resolved, e.ToolService = x.tool.Name, true, x.tool.Service
	case x.headerRoute != nil:
		e.Tool = x.headerRoute.Name
	}
	if e.Status == 0 {
		e.Status, _ = x.kind.report()
	}
	switch x.outcome {
	case outcomeStreamError, callUpstream5xx, callToolError, callNoResponse, callTooLarge, callTimeout, callUnavailable:
		e.Failed = true
	}
	x.tr.Finish(x.ctx, e)
}
