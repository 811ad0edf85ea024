package extproc

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/mcp"
)

// A 401 from an upstream whose call carried an OAuth token
// (docs/identity.md, "When the upstream answers 401"). The token is evicted
// in both cases. Envoy has already sent the request, and ext_proc cannot
// make it send it again; what happens next depends on who can:
//
//   - a federated MCP server's request is one JSON-RPC message the gateway
//     holds (fedCall.body): the gateway sends it once more itself, with a
//     new token, and its answer replaces the 401's body, as a lost session
//     is re-issued (federated.go reissue). A server whose authorization
//     server is discovered (no issuer or tokenUrl in the entry) and not
//     discovered yet is discovered here, from the 401's challenge;
//   - a Tool Service's call is answered with a tool error that says the
//     token was refused and dropped: the client's next call gets a new one.

// toolServiceUnauthorized is the tool error of a routed Tool Service call
// answered 401 for the OAuth token it carried, which is evicted; false when
// the call carried none.
func (x *request) toolServiceUnauthorized(u mcp.Upstream) ([]byte, bool) {
	if u.Status != http.StatusUnauthorized || x.oauthUsed == nil || x.call == nil || x.tool == nil {
		return nil, false
	}
	x.oauthUsed.Refused()
	x.oauthUsed = nil
	x.s.log.LogAttrs(x.ctx, slog.LevelInfo, "tool call: the upstream refused its OAuth token; evicted", slog.String("request_id", x.requestID),
		slog.String("route", x.routeKey), slog.String("service", x.tool.Service))
	return x.s.proto.ToolError(x.call, mcp.ToolFailed(x.call.Tool, "unauthorized: the Tool Service "+x.tool.Service+
		" refused the token the gateway obtained for it (HTTP 401); the token is dropped and the next call obtains a new one, so the call may be retried")), true
}

// fedUnauthorized answers a federated server's 401 for an oauth entry: the
// token evicted (or the authorization server discovered from the
// challenge), a new one obtained, and the request sent once more from
// here. It returns the client's body, or false when the entry has no oauth
// (the 401 is the server's answer, passed on as any other).
func (x *request) fedUnauthorized(h *extprocv3.HttpHeaders) ([]byte, bool) {
	f := x.fed
	ctx, cancel := context.WithTimeout(redirectPolicy(x.ctx, f.svc), x.s.upstreamTimeout())
	defer cancel()
	log := func(msg string, err error) {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, msg, slog.String("request_id", x.requestID), slog.String("route", x.routeKey),
			slog.String("service", f.svc.Name), slog.String("error", err.Error()))
	}
	var challenges []string
	for _, hv := range h.GetHeaders().GetHeaders() {
		if strings.EqualFold(hv.GetKey(), "www-authenticate") {
			challenges = append(challenges, headerValue(hv))
		}
	}
	used := x.oauthUsed
	x.oauthUsed = nil
	retry, err := x.rt.UpstreamAuth.Unauthorized(ctx, f.svc.Name, f.svc.URL, challenges, used)
	if err != nil {
		log("federated call: no authorization server discovered from the 401", err)
	}
	if !retry {
		return nil, false
	}
	fail := func(msg string) []byte {
		x.resultSent = true
		if x.call != nil && f.method == "tools/call" {
			x.callOutcome = callNoCredentials
			return x.filtered(x.s.proto.ToolError(x.call, msg))
		}
		return mcp.ErrorReply(200, f.id, mcp.CodeInternalError, msg, nil).Body
	}
	auth, err := x.upstreamCredentials(f.svc.Name)
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
	x.upStatus = status
	if err != nil {
		if status == http.StatusUnauthorized {
			x.oauthUsed.Refused()
		}
		log("federated call: sent again with a new token, failed", err)
		if status == http.StatusUnauthorized {
			return fail("the MCP server " + f.svc.Name + " refused the token the gateway obtained for it twice (HTTP 401)"), true
		}
		return x.fedFailed(mcp.Upstream{Status: status, Failure: mcp.FailureUnavailable}, "unavailable: the call to the MCP server "+f.svc.Name+" could not be sent again"), true
	}
	x.resultSent = true
	if f.method == "tools/call" {
		x.callOutcome = callOK
	}
	return x.fedFiltered(x.clientMessage(msg)), true
}
