package extproc

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/mcp"
)

// A legacy client ends the session the gateway issued it at initialize
// (clientsession.go) with DELETE and its Mcp-Session-Id (Streamable HTTP,
// "Session Management"). The gateway keeps nothing for the token itself;
// what it ends are the upstream sessions the token names, each opened for
// this client alone. The extproc server sends those DELETEs itself, all at
// once, bounded by the upstream call timeout (below the ext_proc
// message_timeout), while Envoy waits for the request-headers reply, and
// answers the client 204: a token names up to session.MaxUpstreams
// servers, and Envoy can route a request to one
// (docs/decisions/0027-client-session-end.md). The shared sessions the
// gateway uses for sessionless clients are never in a token, so no client
// ends them.

// methodSessionEnd is the method label of a client's DELETE.
const methodSessionEnd = "DELETE"

// endSession answers a DELETE that carries a session token at the request
// headers, so it stays a local answer (kinds.go): 204 once the
// client's upstream sessions were ended, whatever their servers answered
// (each ends on its own expiry otherwise); 404 for a token that does not
// open, as on any request.
func (x *request) endSession() *extprocv3.ProcessingResponse {
	x.method, x.era = methodSessionEnd, mcp.EraLegacy.Label()
	if r := x.s.proto.CheckSessionEnd(&x.req); r != nil {
		return x.answer(r, "", detailsRejected)
	}
	st, err := x.clientSession()
	if err != nil {
		return x.answer(sessionGone(nil), "", detailsRejected)
	}
	ended := x.endUpstreamSessions(st.Upstreams)
	x.s.log.LogAttrs(x.ctx, slog.LevelDebug, "client session ended", slog.String("request_id", x.requestID),
		slog.String("route", x.routeKey), slog.Int("upstream_sessions", len(st.Upstreams)), slog.Int("ended", ended))
	return x.answer(&mcp.Reply{Status: http.StatusNoContent}, "", "")
}

// endUpstreamSessions sends DELETE for each of the client's upstream
// sessions, concurrently, with the headers its requests carry, and notes
// each lost on this replica, so a later request with the same token goes
// the shared way at once. It returns how many ended.
func (x *request) endUpstreamSessions(ups []session.Upstream) int {
	ok := make([]bool, len(ups))
	var wg sync.WaitGroup
	for i, u := range ups {
		x.s.sessions.markLost(u.Service, u.Session)
		svc, _, found := x.snap.MCPService(u.Service)
		if !found {
			continue // the route no longer has the server: its session expires there
		}
		h, _, _, err := x.fedCredentials(svc)
		if err != nil {
			x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "session end: no credentials for a server", slog.String("request_id", x.requestID),
				slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
			continue
		}
		h.Set(mcp.HeaderProtocolVersion, u.Version)
		h.Set(mcp.HeaderSessionID, u.Session)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(redirectPolicy(x.ctx, svc), x.s.upstreamTimeout())
			defer cancel()
			status, err := x.s.upstreamClient().EndSession(ctx, svc.URL, h)
			switch {
			case err != nil:
				x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "session end: the server did not answer", slog.String("request_id", x.requestID),
					slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
			case status/100 == 2 || status == http.StatusNotFound:
				ok[i] = true
			default: // 405: the server lets no client end sessions
				x.s.log.LogAttrs(x.ctx, slog.LevelInfo, "session end: the server kept the session", slog.String("request_id", x.requestID),
					slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.Int("status", status))
			}
		})
	}
	wg.Wait()
	n := 0
	for _, b := range ok {
		if b {
			n++
		}
	}
	return n
}
