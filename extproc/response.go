package extproc

import (
	"log/slog"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
)

// The response path of a routed tools/call. Envoy holds the response headers
// while the BUFFERED body is processed, so the body reply can still fix
// :status, content-type and content-length: every call that reached a Tool
// Service becomes HTTP 200 with a JSON-RPC result (SPEC §2).
//
// Limitation: a Tool Service answering text/event-stream is buffered like any
// other reply (no mode_override to STREAMED yet); its whole stream becomes
// one result once it ends.

// responseHeaders remembers the upstream status and content type. When no
// body follows, the result is produced here (CONTINUE_AND_REPLACE), because
// no response_body message will come.
func (x *exchange) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
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
	if !h.GetEndOfStream() {
		return responseHeadersResponse(&extprocv3.CommonResponse{})
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

// responseBody turns the whole (BUFFERED) Tool Service reply into the
// client's JSON-RPC response.
func (x *exchange) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if !x.upHeadersSeen {
		// response_header_mode is not SEND: the status is unknown and is
		// reported as 0, which maps to an error result rather than a guess.
		x.anomaly("response_body before response_headers")
	}
	body := b.GetBody()
	u := mcp.Upstream{Status: x.upStatus, ContentType: x.upContentType, Body: body}
	if int64(len(body)) > x.s.cfg.MaxResponseBytes {
		u = mcp.Upstream{Status: x.upStatus, ContentType: x.upContentType, Failure: mcp.FailureTooLarge}
	}
	out := x.result(u)
	return responseBodyResponse(&extprocv3.CommonResponse{
		// BUFFERED + SEND keeps content-length; it must match the new body.
		HeaderMutation: resultHeaders(setHeader("content-length", strconv.Itoa(len(out)))),
		BodyMutation:   replaceBody(out),
	})
}

// result builds the client's response body and records the call's outcome.
func (x *exchange) result(u mcp.Upstream) []byte {
	x.resultSent = true
	switch {
	case u.Failure == mcp.FailureTooLarge:
		x.callOutcome = callTooLarge
	case u.Failure != mcp.FailureNone, u.Status < 200 || u.Status > 299:
		x.callOutcome = callToolError
	default:
		x.callOutcome = callOK
	}
	if x.callOutcome != callOK {
		x.s.log.LogAttrs(x.ctx, slog.LevelDebug, "tool call failed",
			slog.String("request_id", x.requestID), slog.String("route", x.routeKey),
			slog.String("tool", x.call.Tool), slog.Int("upstream_status", u.Status),
			slog.String("tool_outcome", x.callOutcome))
	}
	body := x.s.proto.CallResult(x.call, u)
	if x.chain == nil {
		return body
	}
	res := &filters.Result{Route: x.routeKey, Era: filterEra(x.call.Era), Version: x.call.Version,
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
		return x.s.proto.ToolError(x.call, out.Reason)
	case out.Action == filters.ActionRewrite:
		return x.s.proto.WithResult(x.call, res.Body)
	}
	return body
}

// resultHeaders are the response headers of a tool result: HTTP 200 and
// JSON whatever the Tool Service said. content-encoding goes because the new
// body is never compressed (the request's accept-encoding was removed, but a
// Tool Service may compress regardless).
func resultHeaders(extra ...*corev3.HeaderValueOption) *extprocv3.HeaderMutation {
	set := make([]*corev3.HeaderValueOption, 0, 2+len(extra))
	set = append(set, setHeader(":status", "200"), setHeader("content-type", contentTypeJSON))
	for _, e := range extra {
		if e != nil {
			set = append(set, e)
		}
	}
	return &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: []string{"content-encoding"}}
}
