package extproc

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// nullID is the JSON-RPC id of errors about requests whose id is unknown.
var nullID = json.RawMessage("null")

// Request headers the gateway consumes and does not forward to a Tool Service.
// accept-encoding goes too: the reply is rewritten, so it must arrive
// uncompressed.
// mcpParamPrefix starts the SEP-2243 headers that mirror tool arguments.
const mcpParamPrefix = "mcp-param-"

var removeOnCall = []string{"mcp-method", "mcp-name", "accept-encoding"}

// sensitiveHeaders are never logged in clear.
var sensitiveHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
	"x-api-key":           true,
}

// readHeaders fills x.req and the correlation fields from Envoy's request
// headers and returns the client-supplied x-toolmesh-* header names, which
// are never trusted.
func (x *request) readHeaders(hm *corev3.HeaderMap) (owned []string) {
	x.headers = hm
	debug := x.s.log.Enabled(x.ctx, slog.LevelDebug)
	r := &x.req
	var accept, encodings []string
	for _, h := range hm.GetHeaders() {
		key := h.GetKey()
		v := headerValue(h)
		if debug {
			lv := v
			if sensitiveHeaders[key] {
				lv = "[redacted]"
			} else if p, _, q := strings.Cut(v, "?"); q && key == ":path" {
				lv = p + "?[redacted]" // a query may carry an access_token
			}
			x.logHeads = append(x.logHeads, slog.String(key, lv))
		}
		switch key {
		case ":path":
			r.Path, _, _ = strings.Cut(v, "?")
		case ":method":
			r.Method = v
		case ":authority", "host":
			if r.Host == "" {
				r.Host = v
			}
		case "content-type":
			if r.ContentType == "" {
				r.ContentType = v
			}
		case "accept":
			r.HasAccept = true
			accept = append(accept, v)
		case "accept-encoding":
			encodings = append(encodings, v)
		case "mcp-protocol-version":
			if !r.HasProtocolVersion {
				r.ProtocolVersion, r.HasProtocolVersion = v, true
			}
		case "mcp-method":
			if !r.HasMcpMethod {
				r.McpMethod, r.HasMcpMethod = v, true
			}
		case "mcp-name":
			if !r.HasMcpName {
				r.McpName, r.HasMcpName = v, true
			}
		case "origin":
			if !r.HasOrigin {
				r.Origin, r.HasOrigin = v, true
			}
		case "content-length":
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
				r.ContentLength = n
			}
		case "x-request-id":
			x.requestID = v
		case "mcp-session-id":
			x.sessionID = v
		default:
			switch {
			case strings.HasPrefix(key, wire.HeaderPrefix):
				if !slices.Contains(owned, key) {
					owned = append(owned, key)
				}
			case strings.HasPrefix(key, mcpParamPrefix):
				r.ParamHeaders = append(r.ParamHeaders, mcp.Header{Key: key[len(mcpParamPrefix):], Value: v})
			}
		}
	}
	// A header sent on several lines is the lines joined with ", " (RFC
	// 9110 §5.3); strings.Join copies nothing for none or one.
	r.Accept = strings.Join(accept, ", ")
	r.AcceptEncoding = strings.Join(encodings, ", ")
	return owned
}

// requestHeaders resolves the route, applies the header rules, and either
// answers, routes a stateless-era tools/call, or lets the body come.
func (x *request) requestHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	owned := x.readHeaders(h.GetHeaders())
	x.meshCaller()
	if x.req.HasMcpMethod {
		x.method = methodLabel(x.req.McpMethod)
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
			return requestHeadersResponse(&extprocv3.CommonResponse{
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

	if x.req.Method == "GET" {
		return x.streamRequest(owned) // listen.go
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
			p := planFor(key, t)
			if len(owned) == 0 && x.s.wire.Load() && !x.duplexRoute() {
				// The usual case, encoded once per tool (callplan.go). On a
				// route whose responses go FULL_DUPLEX_STREAMED the reply
				// also carries duplexRequest's mode_override.
				x.prepared = p.early
				return sendPrepared
			}
			return earlyRoute(p.routing, owned)
		}
	}

	// Belt and braces: the listener strips client x-toolmesh-* headers
	// before routing; strip them here too so no client value can reach the
	// route table or a Tool Service.
	if len(owned) == 0 {
		return removeClusterHeader // the usual case: the client sent none
	}
	return requestHeadersResponse(&extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: withClusterHeader(owned)},
	})
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
			x.method = methodLabel(bodyMethod(body))
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
			x.method = methodLabel(bodyMethod(body))
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

// callMetadata is the dynamic metadata of a routed call: Envoy's
// local_reply_config reads it to shape its own 503/504 replies as an MCP
// result carrying the request id.
func callMetadata(call *mcp.Call, t *registry.Tool) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		wire.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			wire.MetadataJSONRPCID: structpb.NewStringValue(string(call.ID)),
			wire.MetadataToolCall:  structpb.NewStringValue("true"),
			wire.MetadataTool:      structpb.NewStringValue(t.Name),
			wire.MetadataEra:       structpb.NewStringValue(call.Era.Label()),
		}}),
	}}
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
		m, err := wireImmediate(r, details)
		if err == nil {
			x.prepared = m
			return sendPrepared
		}
		x.anomaly("falling back to a built response", slog.String("error", err.Error()))
	}
	return immediate(r, details)
}

// without returns list minus s, reusing list's array.
func without(list []string, s string) []string {
	out := list[:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

// clientHeaders are the client's request headers for filters: lowercase
// names, no pseudo-headers, the first value of a repeated header. Built only
// for calls that run a chain.
func clientHeaders(hm *corev3.HeaderMap) map[string]string {
	// Sized for the headers kept: counting the pseudo-headers too would
	// make a typical request's map outgrow its first group.
	n := 0
	for _, h := range hm.GetHeaders() {
		if clientHeader(strings.ToLower(h.GetKey())) {
			n++
		}
	}
	out := make(map[string]string, n)
	for _, h := range hm.GetHeaders() {
		k := strings.ToLower(h.GetKey())
		if !clientHeader(k) {
			continue
		}
		if _, seen := out[k]; !seen {
			out[k] = headerValue(h)
		}
	}
	return out
}

// clientHeader reports whether filters see the header named k (lowercase).
func clientHeader(k string) bool {
	return !strings.HasPrefix(k, ":") && !strings.HasPrefix(k, wire.HeaderPrefix)
}

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
