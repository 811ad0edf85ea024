package extproc

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// nullID is the JSON-RPC id of errors about requests whose id is unknown.
var nullID = json.RawMessage("null")

// mcpParamPrefix starts the SEP-2243 headers that mirror tool arguments.
const mcpParamPrefix = reqheaders.MCPParamPrefix

// readHeaders fills x.req and the correlation fields from Envoy's request
// headers and returns the client-supplied x-toolmesh-* header names, which
// are never trusted.
func (x *request) readHeaders(hm *corev3.HeaderMap) (owned []string) {
	x.headers = hm
	h := reqheaders.Read(hm, &x.req, x.s.log.Enabled(x.ctx, slog.LevelDebug))
	x.requestID, x.sessionID, x.logHeads = h.RequestID, h.SessionID, h.Log
	return h.Owned
}

// requestHeaders resolves the route, applies the header rules, and either
// answers, routes a stateless-era tools/call, or lets the body come.
func (x *request) requestHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	owned := x.readHeaders(h.GetHeaders())
	x.meshCaller()
	if x.req.HasMcpMethod {
		x.method = metrics.MethodLabel(x.req.McpMethod)
	}

	if strings.HasPrefix(x.req.Path, authn.MetadataPrefix+"/") {
		return x.protectedResource()
	}
	key, snap, ok := x.s.routes.Lookup(x.req.Path)
	if !ok {
		// 404 with -32600: the request is not one any route can take (-32601
		// is kept for methods a route does not implement). The reply echoes
		// the JSON-RPC id, which is in the body: a POST with a body is let
		// through to the body phase, which answers (requestBody). Nothing is
		// routed meanwhile: the headers are not changed but for the
		// stripping, and Envoy's catch-all route is a direct 404 anyway.
		if x.req.Method == "POST" && !h.GetEndOfStream() {
			x.unknownPath = true
			return procmsg.RequestHeaders(&extprocv3.CommonResponse{
				HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: withClusterHeader(owned)},
			})
		}
		return x.answer(x.s.proto.NotFound(x.req.Path, nil), outcomeUnknownRoute, detailsUnknownRoute)
	}
	x.routeKey = key
	if r := x.authenticate(key); r != nil {
		return r
	}
	if snap == nil {
		r := mcp.ErrorReply(503, nullID, mcp.CodeInternalError, "route not ready", nil)
		r.Headers = append(r.Headers, mcp.Header{Key: "retry-after", Value: "1"})
		return x.answer(r, outcomeNotReady, detailsRouteNotReady)
	}
	x.snap = snap

	if r := x.otherMethod(owned); r != nil {
		return r
	}
	if r := x.s.proto.CheckHeaders(&x.req); r != nil {
		return x.answer(r, "", detailsRejected)
	}
	if h.GetEndOfStream() {
		return x.answer(mcp.ErrorReply(400, nullID, mcp.CodeInvalidRequest, "empty request body", nil),
			outcomeRejected, detailsEmptyBody)
	}

	// A stateless-era tools/call names its tool in Mcp-Name: route now, so
	// the route Envoy settles on is the Tool Service's from the start. The
	// body phase checks header against body; when both name this tool, it
	// keeps the route (routedCall).
	if name, ok := x.s.proto.PeekCall(&x.req); ok {
		// A call that needs approval is decided in the body phase, which
		// reads its requestState and inputResponses: it is not routed here.
		if t, res := snap.Lookup(name); res == mcp.ToolFound && !t.Federated() && !x.mayNeedApproval(t) && x.mayRouteEarly(name) {
			x.headerRoute = t
			p := callplan.For(key, t)
			if len(owned) == 0 && x.s.wire.Load() && !x.duplexRoute() {
				// The usual case, encoded once per tool (package callplan).
				// On a route whose responses go FULL_DUPLEX_STREAMED the
				// reply also carries duplexRequest's mode_override.
				x.prepared = p.Early()
				return sendPrepared
			}
			return p.EarlyRoute(owned)
		}
	}

	// Belt and braces: the listener strips client x-toolmesh-* headers
	// before routing; strip them here too so no client value can reach the
	// route table or a Tool Service.
	if len(owned) == 0 {
		return procmsg.RemoveClusterHeader // the usual case: the client sent none
	}
	return procmsg.RequestHeaders(&extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: withClusterHeader(owned)},
	})
}

// otherMethod answers a GET (listen.go) and a DELETE that carries a
// session token (sessionend.go); nil for a request the POST rules take.
func (x *request) otherMethod(owned []string) *extprocv3.ProcessingResponse {
	switch {
	case x.req.Method == "GET":
		return x.streamRequest(owned)
	case x.req.Method == "DELETE" && session.Is(x.sessionID):
		return x.endSession()
	}
	return nil
}

// withClusterHeader returns the client's x-toolmesh-* header names plus the
// routing header, which is removed whether the client sent it or not.
func withClusterHeader(owned []string) []string {
	if !slices.Contains(owned, wire.ClusterHeader) {
		owned = append(owned, wire.ClusterHeader)
	}
	return owned
}

// requestBody applies the JSON-RPC and MCP rules to the whole (BUFFERED)
// body: a protocol answer goes back as an ImmediateResponse, a tools/call is
// validated and routed.
func (x *request) requestBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if !b.GetEndOfStream() {
		// BUFFERED sends the whole body at once; end_of_stream is false only
		// when request trailers follow, and those are SKIPped.
		x.s.log.LogAttrs(x.ctx, slog.LevelDebug, "request body without end_of_stream",
			slog.String("request_id", x.requestID))
	}
	body := b.GetBody()
	if x.unknownPath {
		if x.method == "" {
			x.method = metrics.MethodLabel(metrics.BodyMethod(body))
		}
		return x.answer(x.s.proto.NotFound(x.req.Path, body), outcomeUnknownRoute, detailsUnknownRoute)
	}
	out := x.s.proto.HandleShared(&x.req, body, x.catalog())
	switch out.Kind() {
	case mcp.OutcomeForward:
		return x.forwardItem(out.Forward, body)
	case mcp.OutcomeListen:
		return x.listen(out.Listen) // listen.go
	case mcp.OutcomeAnswer:
		return x.relayAnswer(out.Answer, body, out.Reply) // relay.go
	case mcp.OutcomeReply:
		if x.method == "" {
			x.method = metrics.MethodLabel(out.Method)
		}
		x.auditAfterHandle(x.method)
		r := out.Reply
		if r == nil { // Handle broke its contract; never let the request through
			r = mcp.ErrorReply(500, nullID, mcp.CodeInternalError, "internal error", nil)
		}
		if x.method == "initialize" {
			x.clientSessionInit(body, r) // clientsession.go
		}
		return x.answer(r, "", "")
	case mcp.OutcomeCall:
		return x.routeCall(out.Call, body)
	}
	// A kind without a case above: never let the request through.
	return x.answer(mcp.ErrorReply(500, nullID, mcp.CodeInternalError, "internal error", nil), "", "")
}

// routeCall validates and routes a tools/call.
func (x *request) routeCall(call *mcp.Call, body []byte) *extprocv3.ProcessingResponse {
	x.method, x.era = "tools/call", call.Era.Label()
	t, res := x.snap.Lookup(call.Tool)
	if res != mcp.ToolFound {
		// Handle resolved the name against the same snapshot, so this is
		// unreachable; answer as docs/contracts/mcp.md says rather than route nowhere.
		msg := "unknown tool"
		switch res {
		case mcp.ToolAmbiguous:
			msg = "ambiguous tool"
		case mcp.ToolQuarantined:
			msg = mcp.QuarantinedMessage(call.Tool)
		}
		return x.answer(mcp.ErrorReply(200, call.ID, mcp.CodeInvalidParams, msg, nil), "", "")
	}
	x.call, x.tool = call, t
	return x.runCallPipeline(&callCtx{x: x, call: call, tool: t, body: body, args: call.Arguments}) // pipeline.go
}

// answer records the request's outcome and builds the ImmediateResponse.
// An empty outcome or details is derived from the reply's status.
func (x *request) answer(r *mcp.Reply, outcome, details string) *extprocv3.ProcessingResponse {
	x.status = r.Status
	if outcome == "" {
		outcome = outcomeAnswered
		if r.Status >= 400 {
			outcome = outcomeRejected
		}
	}
	if details == "" {
		details = detailsReply
		if r.Status >= 400 {
			details = detailsError
		}
	}
	x.outcome, x.answered = outcome, true
	if r.Parts != nil && x.s.wire.Load() {
		head, err := procmsg.EncodedHead(r, r.BodyLen() > 0)
		if err == nil {
			x.prepared = x.immediate.Encode(r, head, details)
			return sendPrepared
		}
		err = fmt.Errorf("extproc: encoding an immediate response: %w", err)
		x.anomaly("falling back to a built response", slog.String("error", err.Error()))
	}
	return procmsg.Immediate(r, details)
}
