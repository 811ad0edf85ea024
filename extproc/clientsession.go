package extproc

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/fedheaders"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Sessions of legacy clients (docs/decisions/0022-legacy-client-sessions.md).
// The gateway is sessionless, but a legacy-era client keeps state on the
// servers it talks to: the log level it set, the resources it subscribed
// to, and the capabilities it declared in initialize, which decide what
// the server may ask it. One shared upstream session cannot carry that for
// many clients. So at initialize, on a route with a legacy server that
// takes such state (or for a client that declares capabilities a legacy
// server may use), the gateway opens an upstream session for this client
// alone on each legacy server that declared logging or
// resources.subscribe, and answers with an Mcp-Session-Id that is a sealed
// token (extproc/session) carrying them and the client's capabilities.
// Every replica opens the token; nothing is stored. Every other client
// stays sessionless.

// clientSessionInit gives the answer r to a legacy initialize (body) its
// Mcp-Session-Id when the client needs one; r is unchanged otherwise. A
// session that cannot be set up leaves the client sessionless, as before.
func (x *request) clientSessionInit(body []byte, r *mcp.Reply) {
	keys := x.rt.SessionKeys
	if keys == nil || x.snap == nil || r.Status != 200 || len(r.Parts) > 0 || mcp.Member(r.Body, "result") == nil {
		return
	}
	params := mcp.Member(body, "params")
	version := string(mcp.Member(mcp.Member(r.Body, "result"), "protocolVersion"))
	version, _ = strconv.Unquote(version)
	caps := session.CapsFrom(mcp.Member(params, "capabilities"))
	var stateful []registry.ToolService
	legacy := false
	for _, svc := range x.snap.ToolServices() {
		_, man, ok := x.snap.MCPService(svc.Name)
		if !ok || man.Era() != mcp.EraLegacy {
			continue
		}
		legacy = true
		if man.PerClientState() && len(stateful) < session.MaxUpstreams {
			stateful = append(stateful, svc)
		}
	}
	if !legacy || (len(stateful) == 0 && caps == 0) {
		return // nothing a legacy server keeps for this client
	}
	st := session.State{Route: x.routeKey, Caller: approval.CallerKey(x.caller), Version: version, Caps: uint8(caps),
		Upstreams: x.openClientSessions(stateful, caps)}
	tok, err := keys.Mint(st)
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "initialize: no client session", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("error", err.Error()))
		return
	}
	r.Headers = append(r.Headers, mcp.Header{Key: "mcp-session-id", Value: tok})
}

// openClientSessions opens one upstream session per server, concurrently,
// declaring the client's capabilities. A server that does not open one is
// left out: the client's requests to it then go the shared way.
func (x *request) openClientSessions(svcs []registry.ToolService, caps session.Caps) []session.Upstream {
	out := make([]session.Upstream, len(svcs))
	var wg sync.WaitGroup
	for i, svc := range svcs {
		_, man, _ := x.snap.MCPService(svc.Name)
		h, _, _, err := x.fedCredentials(svc)
		if err != nil {
			x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "initialize: no credentials for a client session", slog.String("request_id", x.requestID),
				slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(redirectPolicy(x.ctx, svc), x.s.upstreamTimeout())
			defer cancel()
			// One caller's session: its forwarded claims go with it.
			sid, err := x.s.upstreamClient().OpenSessionWith(ctx, svc.URL, fedheaders.Handshake(h, nil), man.ProtocolVersion, caps.Declare())
			if err != nil || sid == "" {
				if err == nil {
					err = errors.New("the server issued no session")
				}
				x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "initialize: no client session on a server", slog.String("request_id", x.requestID),
					slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
				return
			}
			out[i] = session.Upstream{Service: svc.Name, Version: man.ProtocolVersion, Session: sid}
		})
	}
	wg.Wait()
	kept := out[:0]
	for _, u := range out {
		if u.Session != "" {
			kept = append(kept, u)
		}
	}
	return kept
}

// errNoClientSession: the request carries no session token.
var errNoClientSession = errors.New("no session")

// clientSession opens the session token the request carries.
func (x *request) clientSession() (*session.State, error) {
	if !session.Is(x.sessionID) {
		return nil, errNoClientSession
	}
	keys := x.rt.SessionKeys
	if keys == nil {
		return nil, errNoClientSession
	}
	st, err := keys.Open(x.sessionID, x.routeKey, approval.CallerKey(x.caller))
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelInfo, "client session refused", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("error", err.Error()))
	}
	return st, err
}

// sessionGone is the answer to a request whose session token does not
// open (expired, another key, forged): 404, which tells a legacy client
// to initialize again (Streamable HTTP, "Session Management").
func sessionGone(id []byte) *mcp.Reply {
	if id == nil {
		id = nullID
	}
	return mcp.ErrorReply(http.StatusNotFound, id, mcp.CodeInvalidRequest, "Session not found: initialize again", nil)
}

// clientUpstream applies the client's session to a legacy server's
// request: its own upstream session on svc when the token has one
// (perClient), else the capabilities it declared. bad is the answer to a
// token that does not open.
func (x *request) clientUpstream(svc registry.ToolService, version string, id []byte) (u session.Upstream, caps session.Caps, perClient bool, bad *mcp.Reply) {
	st, err := x.clientSession()
	switch {
	case errors.Is(err, errNoClientSession):
		return u, 0, false, nil
	case err != nil:
		return u, 0, false, sessionGone(id)
	}
	if u, ok := st.Upstream(svc.Name); ok && u.Version == version && !x.s.sessions.isLost(svc.Name, u.Session) {
		return u, session.Caps(st.Caps), true, nil
	}
	return u, session.Caps(st.Caps), false, nil
}

// forwardClientState answers logging/setLevel and resources/(un)subscribe
// of a legacy client on its own upstream sessions: setLevel on every
// server its session has one on (the gateway answers), (un)subscribe on
// the owner of the URI (the server's answer passes back).
func (x *request) forwardClientState(f *mcp.Forward, body []byte) *mcp.Reply {
	st, err := x.clientSession()
	switch {
	case errors.Is(err, errNoClientSession):
		return mcp.ErrorReply(200, f.ID, mcp.CodeInvalidRequest, f.Method+" needs the session the gateway issues at initialize", nil)
	case err != nil:
		return sessionGone(f.ID)
	}
	if f.Method == "logging/setLevel" {
		for _, u := range st.Upstreams {
			svc, man, ok := x.snap.MCPService(u.Service)
			if !ok || !man.Logging {
				continue
			}
			if r := x.exchangeOn(svc, u, f, body); r != nil && mcp.Member(r.Body, "error") != nil {
				return r
			}
		}
		return mcp.ResultReply(f.ID, []byte("{}"))
	}
	it, ambiguous := x.snap.ResourceOwner(f.Name)
	if it == nil || ambiguous || !x.authorizeItem(f, false) {
		return mcp.ErrorReply(200, f.ID, codeResourceNotFound, "Resource not found: "+clipName(f.Name), map[string]string{"uri": f.Name})
	}
	svc, _, ok := x.snap.MCPService(it.Service)
	u, has := st.Upstream(it.Service)
	if !ok || !has {
		return mcp.ErrorReply(200, f.ID, mcp.CodeInvalidRequest, f.Method+": the server of "+clipName(f.Name)+" keeps no session for this client", nil)
	}
	if r := x.exchangeOn(svc, u, f, body); r != nil {
		return r
	}
	return mcp.ResultReply(f.ID, []byte("{}"))
}

// exchangeOn sends body to svc on the client's upstream session u and
// returns the server's answer as the client's (nil for a result the
// caller may replace), or the failure.
func (x *request) exchangeOn(svc registry.ToolService, u session.Upstream, f *mcp.Forward, body []byte) *mcp.Reply {
	h, _, _, err := x.fedCredentials(svc)
	if err != nil {
		return mcp.ErrorReply(200, f.ID, mcp.CodeInternalError, "the MCP server "+svc.Name+" is not available: its credentials cannot be read", nil)
	}
	h.Set(mcp.HeaderProtocolVersion, u.Version)
	h.Set(mcp.HeaderSessionID, u.Session)
	ctx, cancel := context.WithTimeout(redirectPolicy(x.ctx, svc), x.s.upstreamTimeout())
	defer cancel()
	status, msg, err := x.s.upstreamClient().Exchange(ctx, svc.URL, h, body, f.ID)
	switch {
	case status == http.StatusNotFound:
		x.s.sessions.markLost(svc.Name, u.Session)
		return sessionGone(f.ID) // the server forgot the client's session: initialize again
	case err != nil:
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "federated "+f.Method+" failed", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
		return mcp.ErrorReply(200, f.ID, mcp.CodeInternalError, "the MCP server "+svc.Name+" did not answer "+f.Method, nil)
	}
	if mcp.Member(msg, "error") != nil {
		return &mcp.Reply{Status: 200, Headers: []mcp.Header{{Key: "content-type", Value: procmsg.ContentTypeJSON}}, Body: msg}
	}
	return nil
}

// clientSessionLost handles a server's answer that it forgot the client's
// own session (404, or a 400 naming the session), so it did not execute
// the request: the session is noted lost on this replica, and the request
// is sent again, once, on the shared session of the client's
// capabilities (reissue), as for any lost session. The client's log level
// on that server is gone until it initializes again; its calls keep
// working.
func (x *request) clientSessionLost(f *federatedCall) []byte {
	x.s.sessions.markLost(f.svc.Name, f.session)
	f.perClient = false
	f.upID = x.s.sessions.requestID() // the shared session's ids are the gateway's
	f.body = mcp.SetMember(f.body, "id", f.upID)
	return x.reissue(f)
}

// followTicket is the sealed follow ticket of a legacy GET stream whose
// client holds upstream sessions on servers that send notifications
// outside a call (resources.subscribe or logging declared), "" for none
// (ADR 0025). Each session goes with the headers its requests carry,
// computed here, where the caller's credentials are known; the
// notifications server that serves the stream (any replica) opens it. A
// session token that does not open is answered 404, as on any request.
func (x *request) followTicket() (string, *mcp.Reply) {
	st, err := x.clientSession()
	switch {
	case errors.Is(err, errNoClientSession):
		return "", nil
	case err != nil:
		return "", sessionGone(nil)
	}
	f := session.Follow{Route: x.routeKey}
	for _, u := range st.Upstreams {
		svc, man, ok := x.snap.MCPService(u.Service)
		if !ok || (!man.Subscribe && !man.Logging) || x.s.sessions.isLost(u.Service, u.Session) {
			continue
		}
		h, _, _, err := x.fedCredentials(svc)
		if err != nil {
			x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "GET stream: not following a server: no credentials", slog.String("request_id", x.requestID),
				slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
			continue
		}
		// The session's own headers go from u; fedheaders.Handshake leaves them out.
		f.Upstreams = append(f.Upstreams, session.FollowUpstream{Upstream: u, Headers: fedheaders.Handshake(h, nil)})
	}
	if len(f.Upstreams) == 0 {
		return "", nil
	}
	tok, err := x.rt.SessionKeys.SealFollow(f)
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "GET stream: not following the client's servers", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("error", err.Error()))
		return "", nil
	}
	return tok, nil
}
