package extproc

import (
	"log/slog"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// The response path of a routed tools/call. Envoy holds the response headers
// while the BUFFERED body is processed, so the body reply can still fix
// :status, content-type and content-length: every call that reached a Tool
// Service becomes HTTP 200 with a JSON-RPC result (docs/contracts/mcp.md).
//
// A 2xx text/event-stream answer to a client that accepts event streams, on
// a route without result filters, is passed through instead: the
// response_headers reply switches the response body to NONE (mode_override),
// so Envoy sends the body on to the client as the Tool Service sends it,
// without a message to ext_proc per chunk (nothing in it is rewritten). Any
// other event-stream answer is buffered like other replies and becomes one
// result once it ends (result filters need the whole body).

// noteResponseHeaders remembers the upstream status and content type, for
// native and federated answers alike.
func (x *request) noteResponseHeaders(h *extprocv3.HttpHeaders) {
	x.upHeadersSeen = true
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch hv.GetKey() {
		case ":status":
			x.upStatus, _ = strconv.Atoi(headerValue(hv))
		case "content-type":
			if x.upContentType == "" {
				x.upContentType = headerValue(hv)
			}
		}
	}
}

// localReplyKind returns the call outcome an Envoy local reply's headers
// carry (callTimeout or callUnavailable), or "" for a Tool Service's
// response. Envoy >= 1.37 passes its local replies through ext_proc's
// encoder path (envoy/dataplane/internal/rules/rules.go, "Local replies and ext_proc") after
// local_reply_config reshaped them into the client's tool result and added
// wire.LocalReplyHeader (xds/localreply.go). The marker counts only
// without x-envoy-upstream-service-time, which the router adds to every
// proxied response (router.cc onUpstreamHeaders; the listener never sets
// suppress_envoy_headers) and never to a local reply: a Tool Service that
// sends the header itself cannot pass as Envoy and skip the result
// translation and filters.
func localReplyKind(h *extprocv3.HttpHeaders) string {
	kind := ""
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch hv.GetKey() {
		case "x-envoy-upstream-service-time":
			return ""
		case wire.LocalReplyHeader:
			switch headerValue(hv) {
			case wire.LocalReplyTimeout:
				kind = callTimeout
			case wire.LocalReplyUnavailable:
				kind = callUnavailable
			}
		}
	}
	return kind
}

// localReplyHeaders answers the headers of Envoy's local reply to a routed
// call: it is already the client's tool result (local_reply_config wrote
// it), so the call is counted by kind, the marker header removed, and its
// body passes unchanged (resultSent).
func (x *request) localReplyHeaders(kind string) *extprocv3.ProcessingResponse {
	x.resultSent, x.callOutcome = true, kind
	return responseHeadersResponse(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		RemoveHeaders: []string{wire.LocalReplyHeader},
	}})
}

// responseHeaders remembers the upstream status and content type. When no
// body follows, the result is produced here (CONTINUE_AND_REPLACE), because
// no response_body message will come.
func (x *request) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	x.noteResponseHeaders(h)
	if x.call != nil && isNDJSON(x.upContentType) && x.upStatus >= 200 && x.upStatus <= 299 {
		return x.progressHeaders(h.GetEndOfStream())
	}
	if !h.GetEndOfStream() {
		if x.upStatus >= 200 && x.upStatus <= 299 && !x.chain.FiltersResults() &&
			isEventStream(x.upContentType) && acceptsEventStream(x.req.Accept) {
			return x.streamResponse()
		}
		return continueResponseHeaders
	}
	out := x.result(mcp.Upstream{Status: x.upStatus, ContentType: x.upContentType})
	return responseHeadersResponse(&extprocv3.CommonResponse{
		Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
		// Envoy drops content-length itself when CONTINUE_AND_REPLACE adds a
		// body.
		HeaderMutation: resultHeaders(),
		BodyMutation:   replaceBody(out),
	})
}

// streamOverride switches the response body to STREAMED. Envoy (>= 1.34,
// source/extensions/filters/http/ext_proc/ext_proc.cc effectiveModeOverride)
// fills the DEFAULT header and trailer modes in from its processing_mode but
// takes both body modes as given, so request_body_mode repeats BUFFERED:
// only then is the effective mode the listener's allowed_override_modes
// entry (xds/listener.go buildExtProc); anything else is ignored.
func streamOverride() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestBodyMode:  extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED,
	}
}

// passThroughOverride stops sending the response body to ext_proc: a body
// that passes unchanged needs no message per chunk. The effective mode
// (effectiveModeOverride, as for streamOverride) is the listener's second
// allowed_override_modes entry: response_body_mode NONE, the rest as
// configured (xds/listener.go buildExtProc). Should Envoy ignore it (a
// listener without that entry), the body arrives BUFFERED and is answered
// unchanged, as every body of a call whose result was sent.
func passThroughOverride() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestBodyMode:  extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode: extprocfilterv3.ProcessingMode_NONE,
	}
}

// streamResponse answers the response headers of an event stream: HTTP 200,
// the Tool Service's content type, and a body passed through from now on
// (passThroughOverride). content-length goes, as it always has for streamed
// answers (docs/contracts/toolservice.md). The call counts as answered now.
func (x *request) streamResponse() *extprocv3.ProcessingResponse {
	x.resultSent, x.streaming, x.callOutcome = true, true, callOK
	resp := responseHeadersResponse(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		SetHeaders:    []*corev3.HeaderValueOption{setHeader(":status", "200")},
		RemoveHeaders: []string{"content-length"},
	}})
	resp.ModeOverride = passThroughOverride()
	return resp
}

// isEventStream reports whether a content type is text/event-stream.
func isEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// acceptsEventStream reports whether an Accept header names
// text/event-stream with a non-zero weight. Wildcards do not count: a
// client that did not ask for a stream gets one JSON result.
func acceptsEventStream(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}

// responseBody turns the whole (BUFFERED) Tool Service reply into the
// client's JSON-RPC response.
func (x *request) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	u, _ := x.upstreamReply(b)
	return x.resultResponse(u)
}

// upstreamReply is the Tool Service's whole (BUFFERED) reply; over when it
// is larger than the limit, and u then a "too large" failure.
func (x *request) upstreamReply(b *extprocv3.HttpBody) (u mcp.Upstream, over bool) {
	if !x.upHeadersSeen {
		// response_header_mode is not SEND: the status is unknown and is
		// reported as 0, which maps to an error result rather than a guess.
		x.anomaly("response_body before response_headers")
	}
	body := b.GetBody()
	if int64(len(body)) > x.s.cfg.MaxResponseBytes {
		return mcp.Upstream{Status: x.upStatus, ContentType: x.upContentType, Failure: mcp.FailureTooLarge}, true
	}
	return mcp.Upstream{Status: x.upStatus, ContentType: x.upContentType, Body: body}, false
}

// resultResponse answers the response body with the call's result made
// from u.
func (x *request) resultResponse(u mcp.Upstream) *extprocv3.ProcessingResponse {
	out := x.result(u)
	if x.s.wire.Load() {
		x.prepared = resultWire(out) // the same message, in wire format (callwire.go)
		return sendPrepared
	}
	return responseBodyResponse(&extprocv3.CommonResponse{
		// BUFFERED + SEND keeps content-length; it must match the new body.
		HeaderMutation: resultHeaders(setHeader("content-length", strconv.Itoa(len(out)))),
		BodyMutation:   replaceBody(out),
	})
}

// result builds the client's response body and records the call's outcome.
func (x *request) result(u mcp.Upstream) []byte {
	x.resultSent = true
	x.callOutcome = upstreamOutcome(u)
	if x.callOutcome != callOK {
		x.s.log.LogAttrs(x.ctx, slog.LevelDebug, "tool call failed",
			slog.String("request_id", x.requestID), slog.String("route", x.routeKey),
			slog.String("tool", x.call.Tool), slog.Int("upstream_status", u.Status),
			slog.String("tool_outcome", x.callOutcome))
	}
	return x.filtered(x.s.proto.CallResult(x.call, u))
}

// filtered runs the route's result filters on a response body built for
// the call and returns what the client gets.
func (x *request) filtered(body []byte) []byte {
	if x.chain == nil {
		return body
	}
	res := &filters.Result{Route: x.routeKey, Era: x.call.Era.String(), Version: x.call.Version,
		Tool: x.tool.Name, ToolVersion: x.tool.Version, Body: mcp.ResultOf(x.call, body)}
	out := x.chain.RunResult(x.ctx, res)
	if out.Err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "result filter failed", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("tool", x.tool.Name), slog.Any("error", out.Err))
	}
	switch {
	case out.Denied():
		x.callOutcome = callDenied
		if out.DenyAs == filters.RPCError {
			return mcp.ErrorReply(200, x.call.ID, out.Code, out.Reason, nil).Body
		}
		return x.s.proto.ToolError(x.call, denyText(x.tool.Name, &out))
	case out.Action == filters.ActionRewrite:
		return x.s.proto.WithResult(x.call, res.Body)
	}
	return body
}

// The constant headers of every result, shared read only (callplan.go).
var (
	status200             = setHeader(":status", "200")
	contentTypeJSONHeader = setHeader("content-type", contentTypeJSON)
)

// resultHeaders are the response headers of a tool result: HTTP 200 and
// JSON whatever the Tool Service said. content-encoding goes because the new
// body is never compressed (the request's accept-encoding was removed, but a
// Tool Service may compress regardless).
func resultHeaders(extra ...*corev3.HeaderValueOption) *extprocv3.HeaderMutation {
	set := make([]*corev3.HeaderValueOption, 0, 2+len(extra))
	set = append(set, status200, contentTypeJSONHeader)
	for _, e := range extra {
		if e != nil {
			set = append(set, e)
		}
	}
	return &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: []string{"content-encoding"}}
}
