package extproc

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/eventstream"
	"github.com/toolmesh/toolmesh/extproc/fedheaders"
	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// The call path of federated MCP servers (protocol mcp; see
// docs/decisions/0006-federated-mcp-servers.md). A tools/call of a
// federated tool, resources/read, prompts/get and completion/complete are
// routed, like a native call, from the request-body reply: the server's
// cluster, its MCP path, the client's body with only the name rewritten
// (toolPrefix) and the era's _meta members translated, the server's
// credential headers, the gateway's own legacy session, and no client
// Authorization unless the service opts in. The answer, already an MCP
// message, passes back: a JSON body translated for the client's era, an
// event stream streamed event by event.

// Upstreams gives the call path what only the registry knows about
// federated MCP servers. fetch.HTTPLister implements it.
type Upstreams interface {
	// UpstreamHeaders returns the values of the service's Portal headers.
	UpstreamHeaders(svc registry.ToolService) (map[string]string, error)
	// Client is the MCP client legacy sessions are opened with.
	Client() *upstream.Client
}

// Details and call outcomes of the federated path.
const (
	detailsFederatedFailed = "toolmesh_federated_failed"
	callFederatedFailed    = "federated_failed" // no session or no credentials: never sent
)

// DefaultUpstreamCallTimeout bounds what the extproc server itself sends to
// a federated server while Envoy waits for its reply: opening a legacy
// session and re-issuing a call whose session expired. It stays below the
// ext_proc message_timeout (5 s by default, xds.DefaultMessageTimeout).
const DefaultUpstreamCallTimeout = 4 * time.Second

// federatedCall is a request routed to a federated MCP server (a
// tools/call of its tool or an item it owns), the kind (kinds.go) and its
// state.
type federatedCall struct {
	callReply // the server's answer

	svc       registry.ToolService
	upEra     mcp.Era
	method    string
	id        json.RawMessage
	upID      json.RawMessage // the id sent upstream: id, or the gateway's in a shared session
	clientEra mcp.Era
	body      []byte      // as sent upstream
	headers   http.Header // what the gateway set upstream, for a re-issue
	// callerHeaders are the forwarded claims in headers: they describe one
	// caller, so the shared session's handshake does not send them.
	callerHeaders []string
	session       string       // the gateway's Mcp-Session-Id sent, "" for none
	perClient     bool         // session is the client's own (clientsession.go), not the gateway's
	caps          session.Caps // the client capabilities its session declares
	status        int          // the client's HTTP status when not 200
	// routeTimeout is the route timeout the response headers carry
	// (routedeadline.go).
	routeTimeout time.Duration
	// oauth is the OAuth token the request carries (upstreamauth.go),
	// evicted when the server refuses it (upstream401.go).
	oauth *upstreamcred.Token
}

// translate reports whether the client and the server speak different eras.
func (f *federatedCall) translate() bool { return f.clientEra != f.upEra }

// relays reports whether the server's requests on the answer's stream get
// relay tokens as ids (relay.go): a legacy server's, to a legacy client,
// the one that can answer them.
func (f *federatedCall) relays() bool {
	return f.clientEra == mcp.EraLegacy && f.upEra == mcp.EraLegacy
}

// remapped reports whether the request went upstream with another id.
func (f *federatedCall) remapped() bool { return string(f.upID) != string(f.id) }

// clientMessage is a message of the server's answer as the client gets it:
// the response carries the client's id again, and the era is translated.
func (x *request) clientMessage(f *federatedCall, msg []byte) []byte {
	msg = bytes.TrimSpace(msg)
	if f.remapped() && mcp.Member(msg, "method") == nil && string(mcp.Member(msg, "id")) == string(f.upID) {
		msg = mcp.SetMember(msg, "id", f.id)
	}
	if f.relays() {
		msg = x.relayRequest(f, msg)
	}
	return x.s.proto.ClientMessage(msg, f.clientEra, f.upEra, f.method)
}

// fedTarget is what a request is routed to.
type fedTarget struct {
	service  string
	method   string
	name     string   // upstream name or URI, for Mcp-Name
	namePath []string // member renamed, nil for none
	rename   bool     // the client's name differs from the upstream one
	// params are a tools/call's Mcp-Param-* headers for a 2026-07-28
	// server, mirrored from the arguments sent.
	params []mcp.Header
}

// forwardItem routes resources/read, prompts/get and completion/complete.
func (x *request) forwardItem(f *mcp.Forward, body []byte) *extprocv3.ProcessingResponse {
	x.method, x.era = metrics.MethodLabel(f.Method), f.Era.Label()
	switch f.Method {
	case "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		return x.answer(x.forwardClientState(f, body), "", "") // clientsession.go
	}
	tgt := fedTarget{method: f.Method, name: f.Name}
	var prompt bool
	switch {
	case f.Method == "prompts/get":
		prompt, tgt.namePath = true, []string{"name"}
	case f.Method == "completion/complete" && f.RefType == mcp.RefPrompt:
		prompt, tgt.namePath = true, []string{"ref", "name"}
	}
	if prompt {
		it := x.snap.Prompt(f.Name)
		if it == nil || !x.authorizeItem(f, true) { // a hidden prompt is unknown
			return x.answer(mcp.ErrorReply(200, f.ID, mcp.CodeInvalidParams, "unknown prompt: "+clipName(f.Name), nil), "", "")
		}
		tgt.service, tgt.name, tgt.rename = it.Service, it.UpstreamName, it.UpstreamName != f.Name
	} else {
		it, ambiguous := x.snap.ResourceOwner(f.Name)
		switch {
		case ambiguous:
			return x.answer(mcp.ErrorReply(200, f.ID, mcp.CodeInvalidParams, "ambiguous resource: "+clipName(f.Name)+" matches templates of several servers", nil), "", "")
		case it == nil || !x.authorizeItem(f, false): // a hidden resource is not found
			// -32002 is the legacy era's resource-not-found code
			// (server/resources); 2026-07-28 answers -32602 (SEP-2164).
			// Both carry the URI in data.
			code := codeResourceNotFound
			if f.Era == mcp.EraStateless {
				code = mcp.CodeInvalidParams
			}
			return x.answer(mcp.ErrorReply(200, f.ID, code, "Resource not found: "+clipName(f.Name), map[string]string{"uri": f.Name}), "", "")
		}
		tgt.service = it.Service
	}
	if !tgt.rename {
		tgt.namePath = nil
	}
	meta := fedMetadata(f.ID, f.Era)
	return x.routeFederated(tgt, f.ID, f.Era, body, nil, meta)
}

// redirectPolicy is ctx for the gateway's own requests to svc: redirects
// are followed only when svc allows same-origin ones.
func redirectPolicy(ctx context.Context, svc registry.ToolService) context.Context {
	if svc.AllowSameOriginRedirects {
		return upstream.AllowSameOriginRedirects(ctx)
	}
	return ctx
}

// codeResourceNotFound is the MCP error of an unknown resource URI.
const codeResourceNotFound = -32002

func clipName(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// forwardCall routes a tools/call of a federated tool. args are the
// arguments after the request filters; the body is rebuilt only when they
// changed or the call came through call_tool.
// approved is the approval step's grant.
func (x *request) forwardCall(call *mcp.Call, t *registry.Tool, body, args []byte, approved bool) *extprocv3.ProcessingResponse {
	tgt := fedTarget{service: t.Service, method: "tools/call", name: t.UpstreamName,
		namePath: []string{"name"}, rename: t.UpstreamName != call.Tool,
		params: mcp.ParamHeaderValues(t.ParamHeaders, args)}
	// An approved call's body carries the gateway's requestState and
	// answer, which are not the server's: it is rebuilt without them.
	if call.Via != "" || approved || !bytes.Equal(args, call.Arguments) {
		body = upstreamCallBody(call, t.UpstreamName, args, mcp.Member(mcp.Member(body, "params"), "_meta"))
		tgt.rename = false
	}
	if !tgt.rename {
		tgt.namePath = nil
	}
	return x.routeFederated(tgt, call.ID, call.Era, body, call, callplan.Metadata(call, t))
}

// upstreamCallBody is a tools/call request for the server, built anew.
func upstreamCallBody(call *mcp.Call, name string, args, meta []byte) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, call.ID...)
	b = append(b, `,"method":"tools/call","params":{"name":`...)
	n, _ := json.Marshal(name)
	b = append(b, n...)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	if len(meta) > 0 {
		b = append(b, `,"_meta":`...)
		b = append(b, meta...)
	}
	return append(b, "}}"...)
}

// fedMetadata is the dynamic metadata of a routed request that is not a
// tools/call: the id, but no tool-call marker, so Envoy's own 503/504 stay
// JSON-RPC errors (a CallToolResult would be the wrong shape).
func fedMetadata(id json.RawMessage, era mcp.Era) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		wire.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			wire.MetadataJSONRPCID: structpb.NewStringValue(string(id)),
			wire.MetadataEra:       structpb.NewStringValue(era.Label()),
		}}),
	}}
}

// fedFailure answers a request that cannot be sent to its server: an
// isError result for tools/call, -32603 otherwise.
func (x *request) fedFailure(call *mcp.Call, id json.RawMessage, msg string) *extprocv3.ProcessingResponse {
	if call != nil {
		x.callOutcome = callFederatedFailed
		return x.answer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call, msg)}, outcomeAnswered, detailsFederatedFailed)
	}
	return x.answer(mcp.ErrorReply(200, id, mcp.CodeInternalError, msg, nil), outcomeAnswered, detailsFederatedFailed)
}

// routeFederated sends the request to its server's cluster.
func (x *request) routeFederated(tgt fedTarget, id json.RawMessage, era mcp.Era, body []byte, call *mcp.Call, meta *structpb.Struct) *extprocv3.ProcessingResponse {
	svc, man, ok := x.snap.MCPService(tgt.service)
	if !ok {
		return x.fedFailure(call, id, "the MCP server "+tgt.service+" is not available")
	}
	if lim := x.rt.bodyLimit(svc.Name); call == nil && lim > 0 && int64(len(body)) > lim {
		// As for a tools/call (requestBody): the service's own limit.
		return x.answer(mcp.ErrorReply(413, nullID, mcp.CodeInvalidRequest,
			"Request body too large: the limit is "+strconv.FormatInt(lim, 10)+" bytes", nil), "", detailsBodyTooLarge)
	}
	upEra, upVersion := man.Era(), man.ProtocolVersion
	if upEra == mcp.EraStateless {
		upVersion = mcp.Version20260728
	}
	up := mcp.UpstreamBody(body, mcp.UpstreamRequest{NamePath: tgt.namePath, Name: tgt.name,
		ClientEra: era, UpstreamEra: upEra, Client: x.s.clientInfo(), TraceMeta: x.TraceMetaForUpstream()})

	creds, auth, tok, err := x.fedCredentials(svc)
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "federated call: no credentials", slog.String("request_id", x.requestID),
			slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
		return x.fedFailure(call, id, "the MCP server "+svc.Name+" is not available: its credentials cannot be read")
	}
	f := &federatedCall{svc: svc, upEra: upEra, method: tgt.method, id: id, upID: id, clientEra: era, body: up, headers: creds, oauth: tok}
	f.callerHeaders = x.claimHeaderNames(svc.Name)
	f.headers.Set(mcp.HeaderProtocolVersion, upVersion)
	if upEra == mcp.EraLegacy {
		key := sessionKeyOf(svc, upVersion)
		if era == mcp.EraLegacy {
			own, caps, perClient, bad := x.clientUpstream(svc, upVersion, id) // clientsession.go
			if bad != nil {
				return x.answer(bad, "", "")
			}
			if perClient {
				// The client's own session: its ids are its own too.
				f.session, f.perClient, f.caps = own.Session, true, caps|session.CapsOf(body)
				f.headers.Set(mcp.HeaderSessionID, own.Session)
				return x.sendFederated(f, svc, auth, call, up, meta)
			}
			key.caps = caps | session.CapsOf(body) // what the client says it answers (relay.go)
		}
		f.caps = key.caps
		ctx, cancel := context.WithTimeout(redirectPolicy(x.ctx, svc), x.s.upstreamTimeout())
		sid, err := x.s.sessions.get(ctx, key, func(ctx context.Context) (string, error) {
			return x.s.upstreamClient().OpenSessionWith(ctx, svc.URL, fedheaders.Handshake(f.headers, f.callerHeaders), upVersion, key.caps.Declare())
		})
		cancel()
		if err != nil {
			x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "federated call: no session", slog.String("request_id", x.requestID),
				slog.String("route", x.routeKey), slog.String("service", svc.Name), slog.String("error", err.Error()))
			return x.fedFailure(call, id, "unavailable: the MCP server "+svc.Name+" did not open a session")
		}
		if sid != "" {
			f.session = sid
			f.headers.Set(mcp.HeaderSessionID, sid)
			f.upID = x.s.sessions.requestID()
			up = mcp.SetMember(up, "id", f.upID)
			f.body = up
		}
	} else {
		f.headers.Set(mcp.HeaderMethod, tgt.method)
		if tgt.method != "completion/complete" {
			f.headers.Set(mcp.HeaderName, mcp.EncodeHeaderValue(tgt.name))
		}
		for _, p := range tgt.params {
			f.headers.Set(mcpParamPrefix+p.Key, p.Value)
		}
	}
	return x.sendFederated(f, svc, auth, call, up, meta)
}

// sendFederated routes the request f, with body up, to its server.
func (x *request) sendFederated(f *federatedCall, svc registry.ToolService, auth map[string]string, call *mcp.Call, up []byte, meta *structpb.Struct) *extprocv3.ProcessingResponse {
	tool := ""
	if call != nil {
		tool = call.Tool
	}
	resp := x.toMCPServer(svc, f.headers, auth, tool, up, meta)
	x.kind, x.outcome = f, outcomeRouted
	return resp
}

// toMCPServer sends the request, with body up, to the MCP server svc at its
// base path: the routing headers, tool (when it is a tools/call), trace
// headers and h (the protocol and credential headers) set, and every
// protocol or credential header h lacks removed. Federated requests and
// relayed answers go this one way.
func (x *request) toMCPServer(svc registry.ToolService, h http.Header, auth map[string]string, tool string, up []byte, meta *structpb.Struct) *extprocv3.ProcessingResponse {
	_, _, _, basePath, _ := svc.Endpoint()
	if basePath == "" {
		basePath = "/"
	}
	trace := x.traceHeaders()
	hs := fedheaders.NewSets(7+len(h), len(trace))
	hs.Add(wire.ClusterHeader, wire.ClusterName(svc.Name))
	hs.Add(":path", basePath)
	hs.Add("content-type", procmsg.ContentTypeJSON)
	hs.Add("content-length", strconv.Itoa(len(up)))
	hs.Add("accept", "application/json, text/event-stream")
	hs.Add(wire.RouteHeader, x.routeKey)
	if tool != "" {
		hs.Add(wire.ToolHeader, tool)
	}
	hs.Append(trace...)
	for _, k := range fedheaders.SortedKeys(h) {
		hs.Add(strings.ToLower(k), h.Get(k))
	}
	set := hs.List()
	remove := []string{"accept-encoding", wire.ToolVersionHeader}
	for _, k := range append([]string{"mcp-method", "mcp-name", "mcp-session-id", "authorization"}, x.unsetAuthHeaders(svc.Name, auth)...) {
		if h.Get(k) == "" && !slices.Contains(remove, k) {
			remove = append(remove, k)
		}
	}
	for _, k := range x.droppedClientHeaders(svc.Name) { // forwardheaders.go
		if h.Get(k) == "" && !slices.Contains(remove, k) {
			remove = append(remove, k)
		}
	}
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{
				HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: remove},
				BodyMutation:    procmsg.ReplaceBody(up),
				ClearRouteCache: true, // honoured because a header mutation comes with it
			},
		}},
		DynamicMetadata: meta,
	}
}

// fedResponseHeaders handles the response headers of a federated request.
// Whatever it answers, the server's headers outside the allow-list are
// removed.
func (x *request) fedResponseHeaders(f *federatedCall, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	resp := x.fedResponseHeadersAnswer(f, h)
	cr := resp.GetResponseHeaders().GetResponse()
	if cr.HeaderMutation == nil {
		cr.HeaderMutation = &extprocv3.HeaderMutation{}
	}
	cr.HeaderMutation.RemoveHeaders = fedheaders.AppendDropped(cr.HeaderMutation.RemoveHeaders, h)
	return resp
}

func (x *request) fedResponseHeadersAnswer(f *federatedCall, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	f.up.note(h)
	if f.up.status == http.StatusUnauthorized {
		if out, ok := x.fedUnauthorized(f, h); ok { // upstream401.go
			return procmsg.ResponseHeaders(&extprocv3.CommonResponse{
				Status:         extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
				HeaderMutation: fedheaders.Result(nil),
				BodyMutation:   procmsg.ReplaceBody(out),
			})
		}
	}
	if f.up.status == http.StatusNotFound && f.session != "" {
		// The server forgot the gateway's session (restarted, expired):
		// open a new one and send the call again from here. A 400 that
		// says so (upstream.SessionLost) is known only from its body, in
		// fedResponseBody.
		return procmsg.ResponseHeaders(&extprocv3.CommonResponse{
			Status:         extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
			HeaderMutation: fedheaders.Result(nil),
			BodyMutation:   procmsg.ReplaceBody(x.sessionLost(f)),
		})
	}
	if h.GetEndOfStream() {
		return procmsg.ResponseHeaders(&extprocv3.CommonResponse{
			Status:         extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
			HeaderMutation: fedheaders.Result(nil),
			BodyMutation:   procmsg.ReplaceBody(x.fedResult(f, nil)),
		})
	}
	if f.up.status >= 200 && f.up.status <= 299 && reqheaders.IsEventStream(f.up.contentType) && reqheaders.AcceptsEventStream(x.req.Accept) {
		return x.fedStream(f)
	}
	return procmsg.ResponseHeaders(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		RemoveHeaders: []string{"mcp-session-id"},
	}})
}

// federatedStream is a federated request whose server answered with a 2xx
// event stream the client takes as one: its response headers made it one
// (fedStream), and its events pass chunk by chunk.
type federatedStream struct {
	call *federatedCall
	// sse translates, remaps, filters or only splits and bounds the
	// events; nil for a stream that passes as it is, bounded by duplex.
	sse      *eventstream.Translator
	duplex   *duplexStream // a stream this server may end (duplex.go)
	answered bool          // the response to the request went to the client
}

// fedStream answers the response headers of f's event stream and makes
// the request a federatedStream.
func (x *request) fedStream(f *federatedCall) *extprocv3.ProcessingResponse {
	s := &federatedStream{call: f}
	x.kind = s // the kind from now on (kinds.go)
	if f.method == "tools/call" {
		x.callOutcome = callOK
	}
	resp := procmsg.ResponseHeaders(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
		SetHeaders:    []*corev3.HeaderValueOption{procmsg.SetHeader(":status", "200")},
		RemoveHeaders: []string{"content-length", "mcp-session-id"},
	}})
	// Events go through this server chunk by chunk (STREAMED), to be
	// translated or filtered, or only split and bounded: no stream of
	// a server the gateway does not trust passes without its bounds
	// (each event and the whole stream at most MaxResponseBytes).
	resp.ModeOverride = procmsg.StreamOverride()
	at := x.streamDeadline(f.routeTimeout) // routedeadline.go
	deadline := !at.IsZero() && f.method == "tools/call" && x.call != nil
	filter := f.method == "tools/call" && x.filtersResults()
	switch rewrite := filter || f.translate() || f.remapped() || f.relays(); {
	case rewrite || !deadline:
		// Unchanged events come out of the translator as they went
		// in; an incomplete one waits in it, so a stream cut at a
		// bound ends on a whole event and the failure.
		s.sse = x.newSSETranslator(s)
		if deadline && x.fullDuplex() {
			// The body is FULL_DUPLEX_STREAMED since the request
			// headers (duplexresp.go): this server can end it too.
			s.duplex = &duplexStream{deadline: at}
		}
	default:
		// A stream this server can end before the route timeout
		// (duplex.go), bounded there. Without fullDuplex the override
		// comes now, which only a stream that passes unchanged may
		// take (ADR 0013).
		s.duplex = &duplexStream{deadline: at}
		resp.ModeOverride = duplexOverride()
	}
	return resp
}

// fedStreamBody answers one STREAMED chunk of a federated event stream.
func (x *request) fedStreamBody(s *federatedStream, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if s.duplex != nil {
		return x.duplexChunk(s, b)
	}
	if s.sse == nil {
		return procmsg.ResponseBody(&extprocv3.CommonResponse{})
	}
	out, err := s.sse.Feed(b.GetBody(), b.GetEndOfStream())
	if err != nil && !s.answered { // past the response, the rest is only dropped
		out = append(out, x.fedStreamFailure(s, err)...)
	}
	return procmsg.ResponseBody(&extprocv3.CommonResponse{BodyMutation: procmsg.ReplaceBody(out)})
}

// fedResponseBody handles the whole BUFFERED answer of a federated
// request.
func (x *request) fedResponseBody(f *federatedCall, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	body := b.GetBody()
	var out []byte
	if f.up.status == http.StatusBadRequest && f.session != "" && upstream.SessionLost(f.up.status, body) {
		out = x.sessionLost(f)
	} else if int64(len(body)) > x.s.cfg.MaxResponseBytes {
		out = x.fedFailed(f, mcp.Upstream{Status: f.up.status, Failure: mcp.FailureTooLarge}, "the MCP server's answer is too large")
	} else {
		out = x.fedResult(f, body)
	}
	h := fedheaders.Result(procmsg.SetHeader("content-length", strconv.Itoa(len(out))))
	if f.status != 0 {
		h = fedheaders.WithStatus(h, f.status)
	}
	return procmsg.ResponseBody(&extprocv3.CommonResponse{HeaderMutation: h, BodyMutation: procmsg.ReplaceBody(out)})
}

// fedResult is the client's response body for a buffered answer: the
// server's response to the request (from JSON or an event stream),
// translated for the client's era; anything else is a failure.
func (x *request) fedResult(f *federatedCall, body []byte) []byte {
	f.resultSent = true
	status := f.up.status
	var msg *mcp.ClientResponse
	if reqheaders.IsEventStream(f.up.contentType) {
		msg = eventstream.FinalEvent(body, f.upID)
	} else if m, err := mcp.DecodeClientResponse(body); err == nil && m.IsResponseTo(f.upID) {
		msg = m
	}
	if msg == nil {
		if status >= 200 && status <= 299 {
			return x.fedFailed(f, mcp.Upstream{Status: status, Body: body}, "the MCP server's answer is not a JSON-RPC response to the request")
		}
		return x.fedFailed(f, mcp.Upstream{Status: status, Body: body}, "the MCP server answered HTTP "+strconv.Itoa(status))
	}
	if f.method == "tools/call" {
		x.callOutcome = callOK
	}
	if msg.Error != nil && status >= 400 && status <= 499 && f.clientEra == mcp.EraStateless && f.upEra == mcp.EraStateless {
		// The 2026-07-28 transport gives errors their HTTP status (400
		// for a missing client capability, 404 for an unknown method): a
		// client of that era gets the server's. A legacy client gets 200,
		// as from every other legacy answer.
		f.status = status
	}
	return x.fedFiltered(f, x.clientMessage(f, msg.Raw))
}

// filtersResults reports whether the route has result filters.
func (x *request) filtersResults() bool { return x.chain != nil && x.chain.FiltersResults() }

// fedFiltered runs the route's result filters on the server's response to
// a tools/call, msg as the client gets it (its id, its era), with the same
// denial and rewrite semantics as on a native result (filtered). A JSON-RPC
// error, the answer to another method, or a route without result filters
// passes as it is. The result is re-enveloped in the gateway's own form
// first, which is what the filters' contract (mcp.ResultOf) reads.
func (x *request) fedFiltered(f *federatedCall, msg []byte) []byte {
	if f.method != "tools/call" || x.call == nil || !x.filtersResults() {
		return msg
	}
	res := bytes.TrimSpace(mcp.Member(msg, "result"))
	if len(res) == 0 || res[0] != '{' {
		return msg
	}
	return x.filtered(x.s.proto.WithResult(x.call, res))
}

// fedStreamMessage is clientMessage for one event of a streamed answer; the
// response to the request (not a progress or log notification, nor a
// request of the server's) also goes through the result filters.
func (x *request) fedStreamMessage(s *federatedStream, data []byte) []byte {
	f := s.call
	out := x.clientMessage(f, data)
	if mcp.Member(out, "method") == nil && string(mcp.Member(out, "id")) == string(f.id) {
		s.answered = true
		if d := s.duplex; d != nil {
			d.seen = true // no deadline after the response (duplex.go)
		}
		return x.fedFiltered(f, out)
	}
	return out
}

// fedFailed is the answer to a request the server did not answer with a
// JSON-RPC response: for tools/call an isError result (a failure or a
// non-2xx status mapped as for native calls, a 2xx answer that is not
// JSON-RPC with msg), -32603 otherwise.
func (x *request) fedFailed(f *federatedCall, u mcp.Upstream, msg string) []byte {
	f.resultSent = true
	if x.call != nil && f.method == "tools/call" {
		x.callOutcome = callToolError
		switch {
		case u.Failure == mcp.FailureTooLarge:
			x.callOutcome = callTooLarge
		case u.Failure == mcp.FailureNone && u.Status >= 200 && u.Status <= 299:
			return x.filtered(x.s.proto.ToolError(x.call, msg+": "+excerpt(u.Body)))
		}
		return x.filtered(x.s.proto.CallResult(x.call, u))
	}
	return mcp.ErrorReply(200, f.id, mcp.CodeInternalError, msg, nil).Body
}

// fedStreamFailure is the last event of a stream cut short at a bound: the
// failure as the response to the client's request (an isError result for
// tools/call, -32603 otherwise). What the server sends after it is dropped.
func (x *request) fedStreamFailure(s *federatedStream, err error) []byte {
	f := s.call
	x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "federated call: stream cut at a bound", slog.String("request_id", x.requestID),
		slog.String("route", x.routeKey), slog.String("service", f.svc.Name), slog.String("error", err.Error()))
	msg := x.fedFailed(f, mcp.Upstream{Status: f.up.status, Failure: mcp.FailureTooLarge},
		err.Error()+" ("+strconv.FormatInt(x.s.cfg.MaxResponseBytes, 10)+" bytes)")
	if d := s.duplex; d != nil {
		d.seen = true
	}
	out := append([]byte("event: message\ndata: "), msg...)
	return append(out, "\n\n"...)
}

// newSSETranslator is the translator of a federated stream: each event and
// the whole stream bounded by MaxResponseBytes.
func (x *request) newSSETranslator(s *federatedStream) *eventstream.Translator {
	lim := x.s.cfg.MaxResponseBytes
	return eventstream.New(func(data []byte) []byte { return x.fedStreamMessage(s, data) }, int(lim), lim)
}

// excerpt is the start of a server's answer quoted in an error.
func excerpt(b []byte) string {
	s := strings.ToValidUTF8(string(b), "?")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strconv.Quote(s)
}

// sessionLost answers a server's answer that it lost the session the
// request went on: the client's own (clientsession.go) or the gateway's.
func (x *request) sessionLost(f *federatedCall) []byte {
	if f.perClient {
		return x.clientSessionLost(f)
	}
	return x.reissue(f)
}

// reissue answers a session-using server's answer that it lost the
// gateway's session (404, or a 400 saying so: upstream.SessionLost), which
// means it did not execute the request: the session is dropped, a new one
// opened, and the same request sent again, once, from here. It returns the
// client's body, which replaces the server's answer. Streaming is lost for
// this one call: the answer comes back whole.
func (x *request) reissue(f *federatedCall) []byte {
	key := sessionKeyOf(f.svc, f.headers.Get(mcp.HeaderProtocolVersion))
	key.caps = f.caps
	x.s.sessions.invalidate(key, f.session)
	ctx, cancel := context.WithTimeout(redirectPolicy(x.ctx, f.svc), x.s.upstreamTimeout())
	defer cancel()
	var out []byte
	sid, err := x.s.sessions.get(ctx, key, func(ctx context.Context) (string, error) {
		return x.s.upstreamClient().OpenSessionWith(ctx, f.svc.URL, fedheaders.Handshake(f.headers, f.callerHeaders), key.version, key.caps.Declare())
	})
	if err == nil {
		h := f.headers.Clone()
		if sid != "" {
			h.Set(mcp.HeaderSessionID, sid)
		} else {
			h.Del(mcp.HeaderSessionID)
		}
		var status int
		var msg []byte
		status, msg, err = x.s.upstreamClient().Exchange(ctx, f.svc.URL, h, f.body, f.upID)
		f.up.status = status
		if err == nil {
			f.resultSent = true
			if f.method == "tools/call" {
				x.callOutcome = callOK
			}
			out = x.clientMessage(f, msg)
		}
	}
	if err != nil {
		x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "federated call: re-issue with a new session failed",
			slog.String("request_id", x.requestID), slog.String("route", x.routeKey),
			slog.String("service", f.svc.Name), slog.String("error", err.Error()))
		out = x.fedFailed(f, mcp.Upstream{Failure: mcp.FailureUnavailable}, "unavailable: the MCP server "+f.svc.Name+" lost the session and the call could not be sent again")
	}
	return out
}
