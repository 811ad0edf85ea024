package extproc

import (
	"log/slog"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/callfilter"
	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
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

// note remembers the upstream status and content type, for every routed
// kind alike.
func (u *upstreamHead) note(h *extprocv3.HttpHeaders) {
	u.seen = true
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch hv.GetKey() {
		case ":status":
			u.status, _ = strconv.Atoi(procmsg.HeaderValue(hv))
		case "content-type":
			if u.contentType == "" {
				u.contentType = procmsg.HeaderValue(hv)
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
			switch procmsg.HeaderValue(hv) {
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
// body passes unchanged (the kind's resultSent).
func (x *request) localReplyHeaders(kind string) *extprocv3.ProcessingResponse {
	x.callOutcome = kind
	return procmsg.ResponseHeaders(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		RemoveHeaders: []string{wire.LocalReplyHeader},
	}})
}

// responseHeaders remembers the upstream status and content type. When no
// body follows, the result is produced here (CONTINUE_AND_REPLACE), because
// no response_body message will come.
func (x *request) responseHeaders(k *nativeCall, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	up := &k.up
	up.note(h)
	if r := x.toolServiceUnauthorized(k); r != nil { // a 401 to the gateway's token: sent again (upstream401.go)
		return r
	}
	if x.call != nil && isNDJSON(up.contentType) && up.status >= 200 && up.status <= 299 {
		return x.progressHeaders(k, h.GetEndOfStream())
	}
	if !h.GetEndOfStream() {
		if up.status >= 200 && up.status <= 299 && !x.chain.FiltersResults() &&
			reqheaders.IsEventStream(up.contentType) && reqheaders.AcceptsEventStream(x.req.Accept) {
			return x.streamResponse(k)
		}
		return procmsg.ContinueResponseHeaders
	}
	out := x.result(&k.callReply, mcp.Upstream{Status: up.status, ContentType: up.contentType})
	return procmsg.ResponseHeaders(&extprocv3.CommonResponse{
		Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
		// Envoy drops content-length itself when CONTINUE_AND_REPLACE adds a
		// body.
		HeaderMutation: callplan.ResultHeaders(),
		BodyMutation:   procmsg.ReplaceBody(out),
	})
}

// streamResponse answers the response headers of an event stream: HTTP 200,
// the Tool Service's content type, and a body passed through from now on
// (passThroughOverride). content-length goes, as it always has for streamed
// answers (docs/contracts/toolservice.md). The call counts as answered now.
func (x *request) streamResponse(k *nativeCall) *extprocv3.ProcessingResponse {
	k.resultSent, k.streaming, x.callOutcome = true, true, callOK
	resp := procmsg.ResponseHeaders(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		SetHeaders:    []*corev3.HeaderValueOption{procmsg.SetHeader(":status", "200")},
		RemoveHeaders: []string{"content-length"},
	}})
	resp.ModeOverride = procmsg.PassThroughOverride()
	return resp
}

// responseBody turns the whole (BUFFERED) Tool Service reply into the
// client's JSON-RPC response.
func (x *request) responseBody(k *nativeCall, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	u, _ := x.upstreamReply(&k.callReply, b)
	return x.resultResponse(&k.callReply, u)
}

// upstreamReply is the Tool Service's whole (BUFFERED) reply; over when it
// is larger than the limit, and u then a "too large" failure.
func (x *request) upstreamReply(r *callReply, b *extprocv3.HttpBody) (u mcp.Upstream, over bool) {
	up := r.up
	if !up.seen {
		// response_header_mode is not SEND: the status is unknown and is
		// reported as 0, which maps to an error result rather than a guess.
		x.anomaly("response_body before response_headers")
	}
	body := b.GetBody()
	if int64(len(body)) > x.s.cfg.MaxResponseBytes {
		return mcp.Upstream{Status: up.status, ContentType: up.contentType, Failure: mcp.FailureTooLarge}, true
	}
	return mcp.Upstream{Status: up.status, ContentType: up.contentType, Body: body}, false
}

// resultResponse answers the response body with the call's result made
// from u.
func (x *request) resultResponse(r *callReply, u mcp.Upstream) *extprocv3.ProcessingResponse {
	out := x.result(r, u)
	if x.s.wire.Load() {
		x.prepared = callplan.ResultWire(out) // the same message, in wire format
		return sendPrepared
	}
	return procmsg.ResponseBody(&extprocv3.CommonResponse{
		// BUFFERED + SEND keeps content-length; it must match the new body.
		HeaderMutation: callplan.ResultHeaders(procmsg.SetHeader("content-length", strconv.Itoa(len(out)))),
		BodyMutation:   procmsg.ReplaceBody(out),
	})
}

// result builds the client's response body and records the call's outcome.
func (x *request) result(r *callReply, u mcp.Upstream) []byte {
	r.resultSent = true
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
	out, denied, err := callfilter.Result(x.ctx, x.chain, x.s.proto, x.filterCall(), body)
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "result filter failed", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("tool", x.tool.Name), slog.Any("error", err))
	}
	if denied {
		x.callOutcome = callDenied
	}
	return out
}
