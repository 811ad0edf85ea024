package extproc

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/mcp"
)

// A 401 from an upstream whose call carried an OAuth token
// (docs/identity.md, "When the upstream answers 401"). A 401 says the
// request "has not been applied because it lacks valid authentication
// credentials" (RFC 9110 section 15.5.2): the upstream refused it before
// running it, so sending it once more with a new token cannot run it twice.
// Envoy has already sent the request, and ext_proc cannot make it send it
// again; the gateway holds the request and sends it once more itself, with
// a new token, and that answer replaces the 401's (CONTINUE_AND_REPLACE on
// the response headers), as a lost session is re-issued (federated.go):
//
//   - a federated MCP server's request is one JSON-RPC message (federatedCall.body).
//     A server whose authorization server is discovered (no issuer or
//     tokenUrl in the entry) and not discovered yet is discovered here,
//     from the 401's challenge;
//   - a Tool Service's call is the request routedCall built
//     (callplan.Held), sent to the Tool Service's URL; its answer becomes
//     the call's result as the routed answer would have.
//
// Both are bounded by the upstream call timeout (Config.UpstreamCallTimeout,
// below the ext_proc message_timeout), the new token's request included. A
// second 401 evicts the new token too and is answered with a tool error.

// toolServiceUnauthorized answers the response headers of a Tool Service's
// 401 to the OAuth token the routed call carried: the call sent once more
// with a new token (resendCall), whose answer is the client's result, or
// nil when the call carried no such token (the 401 is the Tool Service's
// answer, converted as any other). WWW-Authenticate goes: it was the
// gateway's token that was refused, not the client's.
func (x *request) toolServiceUnauthorized(k *nativeCall) *extprocv3.ProcessingResponse {
	if k.up.status != http.StatusUnauthorized || k.oauth == nil || k.held == nil || x.call == nil || x.tool == nil {
		return nil
	}
	out := x.resendCall(k)
	m := callplan.ResultHeaders()
	m.RemoveHeaders = append(m.RemoveHeaders, "www-authenticate")
	return procmsg.ResponseHeaders(&extprocv3.CommonResponse{
		Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
		// Envoy drops content-length itself when CONTINUE_AND_REPLACE
		// adds a body.
		HeaderMutation: m,
		BodyMutation:   procmsg.ReplaceBody(out),
	})
}

// resendCall evicts the refused token, obtains a new one and sends the held
// call once more to the Tool Service, and returns the client's body: the
// call's result made from the answer, or the tool error of a second 401,
// of a token that cannot be obtained, or of an answer that did not come.
func (x *request) resendCall(k *nativeCall) []byte {
	svc, held := x.tool.Service, k.held
	k.oauth.Refused()
	k.oauth, k.held = nil, nil
	log := func(level slog.Level, msg string, attrs ...slog.Attr) {
		x.s.log.LogAttrs(x.ctx, level, msg, append([]slog.Attr{slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("service", svc)}, attrs...)...)
	}
	log(slog.LevelInfo, "tool call: the upstream refused its OAuth token; evicted, sending the call again")
	ctx, cancel := context.WithTimeout(x.ctx, x.s.upstreamTimeout())
	defer cancel()
	creds, tok, err := x.credentialsWith(ctx, svc)
	if tok != nil {
		k.oauth = tok
	}
	if err != nil {
		log(slog.LevelWarn, "tool call: no new token after a 401", slog.String("error", err.Error()))
		k.resultSent, x.callOutcome = true, callNoCredentials
		return x.filtered(x.s.proto.ToolError(x.call, "the Tool Service "+svc+" is not available: "+upstreamcred.Reason(err)))
	}
	target := ""
	for _, s := range x.snap.ToolServices() {
		if s.Name == svc {
			target = held.URL(s.URL)
		}
	}
	if target == "" {
		log(slog.LevelWarn, "tool call: the Tool Service has no usable URL in the snapshot; not sent again")
		out := x.result(&k.callReply, mcp.Upstream{Status: http.StatusServiceUnavailable, Failure: mcp.FailureUnavailable})
		x.callOutcome = callUnavailable
		return out
	}
	a, err := x.s.upstreamClient().Post(ctx, target, held.Header(x.headers, creds), held.Body, x.s.cfg.MaxResponseBytes)
	if err != nil {
		log(slog.LevelWarn, "tool call: sent again with a new token, failed", slog.String("error", err.Error()))
		f, outcome := mcp.FailureUnavailable, callUnavailable
		if ctx.Err() != nil {
			f, outcome = mcp.FailureTimeout, callTimeout
		}
		out := x.result(&k.callReply, mcp.Upstream{Failure: f})
		x.callOutcome = outcome
		return out
	}
	k.up.status, k.up.contentType = a.Status, a.ContentType
	switch {
	case a.Status == http.StatusUnauthorized:
		k.oauth.Refused()
		log(slog.LevelWarn, "tool call: the upstream refused the new OAuth token too; evicted")
		k.resultSent, x.callOutcome = true, callUpstream4xx
		return x.filtered(x.s.proto.ToolError(x.call, mcp.ToolFailed(x.call.Tool, "unauthorized: the Tool Service "+svc+
			" refused the token the gateway obtained for it twice (HTTP 401); the token is dropped")))
	case a.Over:
		return x.result(&k.callReply, mcp.Upstream{Status: a.Status, ContentType: a.ContentType, Failure: mcp.FailureTooLarge})
	case isNDJSON(a.ContentType) && a.Status >= 200 && a.Status <= 299:
		// A progress stream, taken whole (progress.go); the request's
		// kind stays, its result made here.
		return x.progressFeed(&progressCall{callReply: &k.callReply}, a.Body, true)
	}
	return x.result(&k.callReply, mcp.Upstream{Status: a.Status, ContentType: a.ContentType, Body: a.Body})
}

// fedUnauthorized answers a federated server's 401 for an oauth entry: the
// token evicted (or the authorization server discovered from the
// challenge), a new one obtained, and the request sent once more from
// here. It returns the client's body, or false when the entry has no oauth
// (the 401 is the server's answer, passed on as any other).
func (x *request) fedUnauthorized(f *federatedCall, h *extprocv3.HttpHeaders) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(redirectPolicy(x.ctx, f.svc), x.s.upstreamTimeout())
	defer cancel()
	log := func(msg string, err error) {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, msg, slog.String("request_id", x.requestID), slog.String("route", x.routeKey),
			slog.String("service", f.svc.Name), slog.String("error", err.Error()))
	}
	var challenges []string
	for _, hv := range h.GetHeaders().GetHeaders() {
		if strings.EqualFold(hv.GetKey(), "www-authenticate") {
			challenges = append(challenges, procmsg.HeaderValue(hv))
		}
	}
	used := f.oauth
	f.oauth = nil
	retry, err := x.rt.UpstreamAuth.Unauthorized(ctx, f.svc.Name, f.svc.URL, challenges, used)
	if err != nil {
		log("federated call: no authorization server discovered from the 401", err)
	}
	if !retry {
		return nil, false
	}
	fail := func(msg string) []byte {
		f.resultSent = true
		if x.call != nil && f.method == "tools/call" {
			x.callOutcome = callNoCredentials
			return x.filtered(x.s.proto.ToolError(x.call, msg))
		}
		return mcp.ErrorReply(200, f.id, mcp.CodeInternalError, msg, nil).Body
	}
	auth, tok, err := x.credentialsWith(ctx, f.svc.Name)
	if tok != nil {
		f.oauth = tok
	}
	if err != nil {
		log("federated call: no new token after a 401", err)
		return fail("the MCP server " + f.svc.Name + " is not available: " + upstreamcred.Reason(err)), true
	}
	hdr := f.headers.Clone()
	for k, v := range auth {
		hdr.Set(k, v)
	}
	f.headers = hdr
	status, msg, err := x.s.upstreamClient().Exchange(ctx, f.svc.URL, hdr, f.body, f.upID)
	f.up.status = status
	if err != nil {
		if status == http.StatusUnauthorized {
			f.oauth.Refused()
		}
		log("federated call: sent again with a new token, failed", err)
		if status == http.StatusUnauthorized {
			return fail("the MCP server " + f.svc.Name + " refused the token the gateway obtained for it twice (HTTP 401)"), true
		}
		return x.fedFailed(f, mcp.Upstream{Status: status, Failure: mcp.FailureUnavailable}, "unavailable: the call to the MCP server "+f.svc.Name+" could not be sent again"), true
	}
	f.resultSent = true
	if f.method == "tools/call" {
		x.callOutcome = callOK
	}
	return x.fedFiltered(f, x.clientMessage(f, msg)), true
}
