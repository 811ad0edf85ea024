package extproc

import (
	"context"
	"log/slog"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/extproc/callfilter"
	"github.com/toolmesh/toolmesh/extproc/catalog"
	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/extproc/reqtrace"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Outcomes of one request, the outcome label of toolmesh_extproc_requests_total.
const (
	outcomeUnknownRoute = "unknown_route"
	outcomeNotReady     = "not_ready"
	outcomeRejected     = "rejected" // an HTTP or JSON-RPC rule failed (4xx/5xx reply)
	outcomeAnswered     = "answered" // answered locally (2xx/202), JSON-RPC errors under 200 included
	outcomeInvalidArgs  = "invalid_arguments"
	outcomeDenied       = "denied"     // a filter denied the call
	outcomeRouted       = "routed"     // sent to a Tool Service; replaced by the call's outcome when the stream ends
	outcomeIncomplete   = "incomplete" // the stream ended before a decision
	outcomeStreamError  = "stream_error"
)

// ImmediateResponse details (Envoy's %RESPONSE_CODE_DETAILS%). They all start
// with "toolmesh_" so local_reply_config mappers and access logs can tell the
// gateway's own answers from Envoy's.
const (
	detailsUnknownRoute      = "toolmesh_unknown_route"
	detailsRouteNotReady     = "toolmesh_route_not_ready"
	detailsRejected          = "toolmesh_http_rejected"
	detailsEmptyBody         = "toolmesh_empty_body"
	detailsReply             = "toolmesh_reply"
	detailsError             = "toolmesh_error_reply"
	detailsInvalidArguments  = "toolmesh_invalid_arguments"
	detailsDenied            = "toolmesh_filter_denied"
	detailsHeadersNotHandled = "toolmesh_headers_not_processed"
	detailsBodyTooLarge      = "toolmesh_body_too_large"
)

// Outcomes of one tool call, the outcome label of toolmesh_tool_calls_total.
// A routed call's outcome is also its request's outcome in
// toolmesh_extproc_requests_total (docs/metrics.md lists every value).
const (
	callOK          = "ok"
	callUpstream4xx = "upstream_4xx"   // the Tool Service answered 4xx
	callUpstream5xx = "upstream_5xx"   // the Tool Service answered 5xx
	callToolError   = "upstream_error" // another non-2xx status (1xx, 3xx, none), a broken progress stream
	callTooLarge    = "too_large"
	callInvalidArgs = callfilter.OutcomeInvalidArgs // the arguments failed the tool's inputSchema
	callDenied      = callfilter.OutcomeDenied      // a filter denied the call or its result
	callRejected    = "rejected"                    // answered at HTTP level before routing (413)
	// Envoy answered itself (its local reply, marked by local_reply_config
	// and seen on the response path, response.go localReplyHeaders):
	// callTimeout for the route or per-try timeout (504), callUnavailable
	// for a 503 (no healthy upstream, connect failure, reset, overflow).
	callTimeout     = "timeout"
	callUnavailable = "unavailable"
	// callNoResponse: the stream ended with neither the Tool Service's nor
	// Envoy's reply: the client went away (Envoy resets the stream), or
	// Envoy failed the call after the Tool Service's headers arrived (its
	// reply then goes out directly, bypassing ext_proc).
	callNoResponse = "no_response"
)

// request is the state of one HTTP request: one Process stream. It is owned
// by the stream's goroutine and never shared.
type request struct {
	s     *Server
	rt    *Runtime // the configuration in force when the stream opened (runtime.go)
	ctx   context.Context
	start time.Time

	req       mcp.HTTPRequest
	requestID string
	sessionID string
	logHeads  []slog.Attr // request headers, redacted; only at debug level

	routeKey    string             // known once the route resolved
	snap        *registry.Snapshot // captured once in the request-headers phase
	unknownPath bool               // no route: the body phase answers 404 with its id

	headersDone bool // request headers processed
	bodyDone    bool // request body processed
	answered    bool // an ImmediateResponse was sent: the request is over
	method      string
	era         string
	outcome     string
	status      int // HTTP status of a local answer

	headers     *corev3.HeaderMap // the client's request headers, for filters
	caller      *identity.Caller  // set in the request-headers phase by authentication; nil: anonymous
	pol         policyState       // authorization (policy.go)
	cat         catalog.Catalog   // the catalog the body phase answers from (policy.go catalog)
	chain       *filters.Chain    // the route's filters, captured with the call
	call        *mcp.Call         // the request's tools/call, once Handle returned one
	tool        *registry.Tool    // the tool it resolved to
	headerRoute *registry.Tool    // tool routed in the request-headers phase
	permit      ratelimit.Permit  // in-flight slots of concurrency limits (limits.go)
	callOutcome string

	// attributes are the request_attributes Envoy sent with the request
	// headers (mesh.go).
	attributes map[string]*structpb.Struct

	streamErr error
	tr        reqtrace.Request // tracing.go

	prepared *procmsg.Wire // the answer when dispatch returned sendPrepared

	// kind is what the request turned out to be (kinds.go): it answers
	// the response phases and holds their state. localAnswer until
	// something is routed.
	kind requestKind
	// mode is how the response body reaches this server: as configured,
	// or FULL_DUPLEX_STREAMED since the request headers (duplexresp.go).
	mode responseMode

	// listener is the level the stream's listener declares, read from the
	// stream's metadata on first use (listenerLevel, routedeadline.go).
	listener     int
	listenerRead bool

	// immediate is room for the request's answer in wire format (answer):
	// last, as it holds no pointers but its Wire's.
	immediate procmsg.ImmediateWire
}

// sendPrepared, returned by dispatch, means "send x.prepared": an answer
// already in wire format (procmsg.Wire). It is never sent itself.
var sendPrepared = &extprocv3.ProcessingResponse{}

func (s *Server) newRequest(ctx context.Context) *request {
	start := time.Now()
	return &request{
		s:       s,
		rt:      s.runtime.Load(),
		ctx:     ctx,
		start:   start,
		req:     mcp.HTTPRequest{ContentLength: -1},
		outcome: outcomeIncomplete,
		kind:    localAnswer{},
		mode:    bufferedResponse{},
		tr:      reqtrace.New(s.tracer, start),
	}
}

// next answers one ProcessingRequest with what the stream sends: a
// *extprocv3.ProcessingResponse or a *procmsg.Wire. nil means "send nothing".
func (x *request) next(req *extprocv3.ProcessingRequest) any {
	var resp *extprocv3.ProcessingResponse
	if x.tr.On() {
		resp = x.handleTraced(req)
	} else {
		resp = x.dispatch(req)
	}
	switch {
	case resp == nil:
		return nil
	case resp == sendPrepared:
		m := x.prepared
		if m == nil {
			// Unreachable: answer sets both. Sent, a nil message would be
			// an empty ProcessingResponse; Process turns this into a 500.
			panic("extproc: sendPrepared without a prepared answer")
		}
		x.prepared = nil
		return m
	}
	return resp
}

// dispatch answers one ProcessingRequest by its kind.
func (x *request) dispatch(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if x.headersDone {
			x.anomaly("second request_headers message")
			return procmsg.RequestHeaders(&extprocv3.CommonResponse{})
		}
		x.headersDone = true
		x.attributes = req.GetAttributes()                         // Envoy's request_attributes ride on the first message
		return x.duplexRequest(x.requestHeaders(r.RequestHeaders)) // duplexresp.go
	case *extprocv3.ProcessingRequest_RequestBody:
		if !x.headersDone {
			// request_header_mode is not SEND: without the headers phase
			// the route is unknown and client routing headers were never
			// stripped, so fail closed.
			x.anomaly("request_body before request_headers")
			x.outcome, x.status = outcomeRejected, 500
			return procmsg.Immediate(mcp.ErrorReply(500, nullID, mcp.CodeInternalError,
				"gateway misconfigured: request headers were not processed", nil), detailsHeadersNotHandled)
		}
		if x.answered || x.bodyDone {
			// Only BUFFERED is supported: the first body message was taken
			// as the whole body; later chunks pass unchanged.
			x.anomaly("request_body after the request was answered or processed")
			return procmsg.RequestBody(&extprocv3.CommonResponse{})
		}
		x.bodyDone = true
		return x.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		// Trailers are SKIPped by configuration; let them pass untouched.
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if resp := x.mode.headers(x, r.ResponseHeaders); resp != nil {
			return withoutRouteTimeout(resp, r.ResponseHeaders) // routedeadline.go
		}
		return nil
	case *extprocv3.ProcessingRequest_ResponseBody:
		return x.mode.body(x, r.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return x.mode.trailers(x)
	default:
		// A message kind this server does not know (a newer Envoy); it
		// expects no answer we could give correctly.
		x.anomaly("unknown processing request", slog.String("type", typeName(r)))
		return nil
	}
}

// responseMode is how the response body reaches this server; the
// request's kind answers it either way.
type responseMode interface {
	headers(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse
	body(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse
	trailers(x *request) *extprocv3.ProcessingResponse
	// fullDuplex reports whether the body is FULL_DUPLEX_STREAMED.
	fullDuplex() bool
	// takeQueued returns and clears the messages to send after the
	// current answer.
	takeQueued() []*extprocv3.ProcessingResponse
}

var (
	_ responseMode = bufferedResponse{}
	_ responseMode = (*duplexResponseMode)(nil)
)

// bufferedResponse is the configured mode (BUFFERED, which the headers
// reply may switch to STREAMED or NONE): each message goes to the kind.
type bufferedResponse struct{}

func (bufferedResponse) headers(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	return x.kind.responseHeaders(x, h)
}
func (bufferedResponse) body(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	return x.kind.responseBody(x, b)
}
func (bufferedResponse) trailers(*request) *extprocv3.ProcessingResponse {
	return procmsg.ResponseTrailers
}
func (bufferedResponse) fullDuplex() bool                            { return false }
func (bufferedResponse) takeQueued() []*extprocv3.ProcessingResponse { return nil }

// duplexResponseMode is FULL_DUPLEX_STREAMED since the request headers
// (duplexresp.go).
type duplexResponseMode struct {
	// dx is the state of the response, queued the messages to send after
	// the current answer.
	dx     *duplexResponse
	queued []*extprocv3.ProcessingResponse
}

func (m *duplexResponseMode) headers(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	return x.duplexHeaders(m, h)
}
func (m *duplexResponseMode) body(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	return x.duplexBody(m, b)
}
func (m *duplexResponseMode) trailers(x *request) *extprocv3.ProcessingResponse {
	return x.duplexTrailers(m)
}
func (*duplexResponseMode) fullDuplex() bool { return true }

// fullDuplex reports whether the request-headers reply switched the
// response body to FULL_DUPLEX_STREAMED (duplexresp.go).
func (x *request) fullDuplex() bool { return x.mode.fullDuplex() }

// anomaly logs a message sequence Envoy should not send with the settings of
// ADR 0001.
func (x *request) anomaly(msg string, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("request_id", x.requestID), slog.String("route", x.routeKey))
	x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "ext_proc: "+msg, attrs...)
}

// finish records the request's metrics and its debug log line.
func (x *request) finish() {
	x.permit.Release()
	elapsed := time.Since(x.start)
	callOut := x.callOutcome
	if x.tool != nil && callOut == "" {
		callOut = callNoResponse
		if x.answered {
			callOut = callRejected
		}
	}
	if x.kind.routed() {
		x.outcome = callOut // what became of the routed call
	}
	if x.streamErr != nil {
		x.outcome = outcomeStreamError
	}
	method := x.method
	if method == "" {
		method = metrics.MethodNone
	}
	era := x.era
	if era == "" {
		era = mcp.EraOfHeader(&x.req).Label()
	}
	x.finishTrace(method, era)
	m := x.s.metrics
	series := m.Request(x.routeKey, method, era, x.outcome)
	series.Requests.Inc()
	series.Duration.Observe(elapsed.Seconds())
	if x.tool != nil {
		m.ToolCalls.WithLabelValues(x.routeKey, m.Tools.Label(x.routeKey, x.tool.Name), callOut).Inc()
	}

	log := x.s.log
	if x.streamErr != nil {
		log.LogAttrs(x.ctx, slog.LevelWarn, "ext_proc stream failed",
			slog.String("request_id", x.requestID), slog.String("route", x.routeKey),
			slog.String("error", x.streamErr.Error()))
	}
	if !log.Enabled(x.ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", x.requestID),
		slog.String("route", x.routeKey),
		slog.String("path", x.req.Path),
		slog.String("caller", x.caller.String()), // never the token
		slog.String("method", method),
		slog.String("era", era),
		slog.String("outcome", x.outcome),
		slog.Float64("duration_seconds", elapsed.Seconds()),
	}
	if x.sessionID != "" {
		attrs = append(attrs, slog.String("mcp_session_id", x.sessionID))
	}
	if x.status != 0 {
		attrs = append(attrs, slog.Int("status", x.status))
	}
	if x.call != nil {
		attrs = append(attrs, slog.String("jsonrpc_id", string(x.call.ID)), slog.String("tool", x.call.Tool))
		if x.call.Via != "" { // search mode: the call came through call_tool
			attrs = append(attrs, slog.String("via", x.call.Via))
		}
	} else if x.headerRoute != nil {
		attrs = append(attrs, slog.String("tool", x.headerRoute.Name))
	}
	if x.tool != nil {
		upStatus, streamed := x.kind.report()
		attrs = append(attrs, slog.String("tool_service", x.tool.Service),
			slog.String("tool_outcome", callOut), slog.Int("upstream_status", upStatus))
		if streamed {
			attrs = append(attrs, slog.Bool("streamed", true))
		}
	}
	if len(x.logHeads) > 0 {
		attrs = append(attrs, slog.Attr{Key: "headers", Value: slog.GroupValue(x.logHeads...)})
	}
	log.LogAttrs(x.ctx, slog.LevelDebug, "mcp request", attrs...)
}
