package extproc

import (
	"log/slog"
	"maps"
	"net/http"
	"slices"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/fedheaders"
	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/relay"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Requests a federated legacy MCP server sends to the client on an
// answer's event stream (sampling/createMessage, elicitation/create,
// roots/list; docs/decisions/0006-federated-mcp-servers.md, "Requests of
// legacy servers to the client"). The gateway keeps no state for them:
// the request's id becomes a relay token (extproc/relay) naming the route,
// the server, the upstream session and the server's id, and the client's
// answer, a POST of a JSON-RPC response with that id, is routed by the
// token alone to the server's cluster, on whichever replica it lands.

// relayRequest gives a request of the server (a message with method and id)
// a relay token as id. A request whose token cannot be minted keeps its id:
// its answer then cannot be delivered, as before relaying existed.
func (x *request) relayRequest(f *federatedCall, msg []byte) []byte {
	if mcp.Member(msg, "method") == nil {
		return msg
	}
	id := mcp.Member(msg, "id")
	if id == nil {
		return msg // a notification
	}
	keys := x.rt.RelayKeys
	if keys == nil { // a Server not made by New
		return msg
	}
	tok, err := keys.Mint(relay.Target{Route: x.routeKey, Service: f.svc.Name,
		Version: f.headers.Get(mcp.HeaderProtocolVersion), Session: f.session, ID: id, Caller: approval.CallerKey(x.caller)})
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "federated call: the server's request cannot be relayed",
			slog.String("request_id", x.requestID), slog.String("route", x.routeKey),
			slog.String("service", f.svc.Name), slog.String("error", err.Error()))
		return msg
	}
	return mcp.SetMember(msg, "id", tok)
}

// relayAnswer routes a client's response whose id is a relay token to the
// server that asked, with the server's id and session restored. Any token
// that does not verify for this route and caller, or names a server the
// route no longer has, gets what every other response gets: 202, dropped.
func (x *request) relayAnswer(a *mcp.Answer, body []byte, accepted *mcp.Reply) *extprocv3.ProcessingResponse {
	x.method = metrics.MethodNone
	if !relay.Is(a.ID) {
		return x.answer(accepted, "", "")
	}
	keys := x.rt.RelayKeys
	if keys == nil {
		return x.answer(accepted, "", "")
	}
	t, err := keys.Open(a.ID, x.routeKey, approval.CallerKey(x.caller))
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "relayed answer refused", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("error", err.Error()))
		return x.answer(accepted, "", "")
	}
	svc, _, ok := x.snap.MCPService(t.Service)
	if !ok {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "relayed answer refused: the route has no such MCP server",
			slog.String("request_id", x.requestID), slog.String("route", x.routeKey), slog.String("service", t.Service))
		return x.answer(accepted, "", "")
	}
	h, auth, _, err := x.fedCredentials(svc)
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "relayed answer dropped: no credentials", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
		return x.answer(accepted, "", "")
	}
	h.Set(mcp.HeaderProtocolVersion, t.Version)
	if t.Session != "" {
		h.Set(mcp.HeaderSessionID, t.Session)
	}
	up := mcp.SetMember(body, "id", t.ID)
	resp := x.toMCPServer(svc, h, auth, "", up, nil)
	// It ends like a routed call, with the outcome of what came back.
	x.kind, x.outcome, x.callOutcome = &relayedAnswer{}, outcomeRouted, callNoResponse
	return resp
}

// relayResponseHeaders passes the server's answer to a relayed response
// (202 when it took it) back as it is, without its Mcp-Session-Id: the
// session is the gateway's. The request's outcome is the status's, as for
// a call (ok, upstream_4xx, …; Envoy's own 503/504: unavailable, timeout).
func (x *request) relayResponseHeaders(k *relayedAnswer, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	k.up.note(h) // the body passes as it is
	if x.callOutcome = localReplyKind(h); x.callOutcome == "" {
		x.callOutcome = upstreamOutcome(mcp.Upstream{Status: k.up.status})
	}
	remove := []string{"mcp-session-id"}
	if localReplyKind(h) == "" { // the server's headers, through the allow-list (federated.go)
		remove = fedheaders.AppendDropped(remove, h)
	}
	return procmsg.ResponseHeaders(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		RemoveHeaders: remove,
	}})
}

// fedCredentials are the headers a federated server gets besides the
// protocol ones: its Portal headers, the client's Authorization when the
// service forwards it, and the config file's upstreamAuth entry, set last
// so that it wins for the same header (upstreamauth.go). auth is that
// entry's part, tok the OAuth token in it (nil for none).
func (x *request) fedCredentials(svc registry.ToolService) (h http.Header, auth map[string]string, tok *upstreamcred.Token, err error) {
	creds, err := x.s.upstreamHeaders(svc)
	if err != nil {
		return nil, nil, nil, err
	}
	h = http.Header{}
	for _, k := range slices.Sorted(maps.Keys(creds)) {
		h.Set(k, creds[k])
	}
	if svc.ForwardAuthorization {
		if v := procmsg.FirstHeader(x.headers, "authorization"); v != "" {
			h.Set("Authorization", v)
		}
	}
	auth, tok, err = x.upstreamCredentials(svc.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(auth)) {
		h.Set(k, auth[k])
	}
	return h, auth, tok, nil
}
