package extproc

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"weak"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// A routed call's reply is mostly the same for every call of a tool: the
// cluster, the upstream :path, the Tool Service headers and the metadata
// naming the tool. Those pieces are built once per tool of a snapshot
// (toolPlan) and shared, read only, by every call; only what depends on
// the request (content-length, filter and trace headers, the JSON-RPC id)
// is built per call. gRPC only reads a message it marshals, so one message
// may be marshalled by many streams at once.

// toolPlan holds the per-tool pieces of a routed call's replies.
type toolPlan struct {
	route string // the route key the pieces name

	routing []*corev3.HeaderValueOption // x-toolmesh-cluster and :path
	// call is content-type, x-toolmesh-route and x-toolmesh-tool;
	// version is x-toolmesh-tool-version, nil when the tool has none.
	call    []*corev3.HeaderValueOption
	version *corev3.HeaderValueOption
	remove  []string // request headers the Tool Service never sees; full, append copies
	// removeAuth is remove and the client's authorization: what a call
	// without upstream credentials removes.
	removeAuth []string

	metaTool *structpb.Value

	wire *planWire // the pieces in wire format (callwire.go)
	// early is earlyRoute(routing) encoded: the request-headers reply that
	// routes a call of the tool for a client that sent no x-toolmesh-*
	// header. Shared by every such call; gRPC only reads it.
	early *wireMessage
}

// toolPlans maps a tool (weakly: a snapshot's tools go when it does) to its
// plan. Lookups are lock free; a plan is built at a tool's first call and
// removed by a cleanup once the tool is unreachable.
var toolPlans sync.Map // weak.Pointer[registry.Tool] → *toolPlan

// plan returns the reply pieces of a call of t on route.
func planFor(route string, t *registry.Tool) *toolPlan {
	key := weak.Make(t)
	if v, ok := toolPlans.Load(key); ok {
		if p := v.(*toolPlan); p.route == route {
			return p
		}
		// The same tool under another route key: rare, not cached.
		return newToolPlan(route, t)
	}
	p := newToolPlan(route, t)
	if v, loaded := toolPlans.LoadOrStore(key, p); loaded {
		if q := v.(*toolPlan); q.route == route {
			return q
		}
		return p
	}
	runtime.AddCleanup(t, func(k weak.Pointer[registry.Tool]) { toolPlans.Delete(k) }, key)
	return p
}

func newToolPlan(route string, t *registry.Tool) *toolPlan {
	p := &toolPlan{
		route: route,
		routing: []*corev3.HeaderValueOption{
			setHeader(wire.ClusterHeader, t.Cluster),
			setHeader(":path", t.BasePath+t.Path),
		},
		call: []*corev3.HeaderValueOption{
			setHeader("content-type", contentTypeJSON),
			setHeader(wire.RouteHeader, route),
			setHeader(wire.ToolHeader, t.ServiceToolName()), // a virtual tool's real name
		},
		remove:   removeOnCall,
		metaTool: structpb.NewStringValue(t.Name),
	}
	if t.Version != "" {
		p.version = setHeader(wire.ToolVersionHeader, t.Version)
	} else {
		p.remove = append(p.remove[:len(p.remove):len(p.remove)], wire.ToolVersionHeader)
	}
	p.remove = p.remove[:len(p.remove):len(p.remove)]
	p.removeAuth = append(p.remove, "authorization")
	p.removeAuth = p.removeAuth[:len(p.removeAuth):len(p.removeAuth)]
	p.wire = newPlanWire(p, t)
	p.early = wireOf(mustMarshal(earlyRoute(p.routing, nil)))
	return p
}

// earlyRoute is the request-headers reply that routes a call to the
// Tool Service: routing sets x-toolmesh-cluster and :path, and the client's
// own x-toolmesh-* headers (owned, without the routing header, which is
// being set) and its token go; the token is not the Tool Service's
// (upstreamauth.go).
func earlyRoute(routing []*corev3.HeaderValueOption, owned []string) *extprocv3.ProcessingResponse {
	return requestHeadersResponse(&extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{
			SetHeaders:    routing,
			RemoveHeaders: append(without(owned, wire.ClusterHeader), "authorization"),
		},
		ClearRouteCache: true, // honoured because a header mutation comes with it
	})
}

// routedCall is the request-body reply that sends a call of t to its Tool
// Service with args as the body. A call already routed to t at request
// headers (x.headerRoute) keeps its route: x-toolmesh-cluster and :path
// are set and the route re-matched on them, so the reply neither repeats
// them nor clears the route cache again.
//
// creds are the upstream credential headers of t's Tool Service
// (upstreamauth.go); the client's Authorization is removed unless creds
// set it.
func (x *request) routedCall(call *mcp.Call, t *registry.Tool, args []byte, addHeaders, creds map[string]string) *extprocv3.ProcessingResponse {
	p := planFor(x.routeKey, t)
	trace := x.traceHeaders()
	rerouted := x.headerRoute != t
	dropped := x.droppedClientHeaders(t.Service) // forwardheaders.go
	if x.s.wire.Load() && len(addHeaders) == 0 && len(trace) == 0 && len(creds) == 0 &&
		len(x.unsetAuthHeaders(t.Service, nil)) == 0 && len(dropped) == 0 {
		// The common call, prepared from the plan's encoded pieces.
		x.prepared = routedCallWire(call, p, args, rerouted)
		return sendPrepared
	}
	set := make([]*corev3.HeaderValueOption, 0, len(p.routing)+len(p.call)+2+len(addHeaders)+len(trace)+len(creds))
	if rerouted {
		set = append(set, p.routing...)
	}
	set = append(set, p.call...)
	// BUFFERED + SEND keeps content-length; a mismatch is a 500.
	set = append(set, setHeader("content-length", strconv.Itoa(len(args))))
	for _, k := range sortedKeys(addHeaders) {
		set = append(set, setHeader(k, addHeaders[k]))
	}
	set = append(set, trace...)
	for _, k := range sortedKeys(creds) {
		set = append(set, setHeader(k, creds[k]))
	}
	if p.version != nil {
		set = append(set, p.version)
	}
	// The client's token is not the Tool Service's (upstreamauth.go).
	remove := p.removeAuth // full: an append copies, the plan stays shared
	if unset := x.unsetAuthHeaders(t.Service, creds); len(unset) > 0 || len(creds) > 0 {
		remove = append(p.remove, unset...)
		if _, ok := creds["authorization"]; !ok && !slices.Contains(remove, "authorization") {
			remove = append(remove, "authorization")
		}
	}
	remove = appendNew(remove, dropped)
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{
				HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: remove},
				BodyMutation:   replaceBody(args),
				// Honoured because a header mutation comes with it.
				ClearRouteCache: rerouted,
			},
		}},
		DynamicMetadata: callMetadataOf(call, p),
	}
}

// Metadata values every routed call shares.
var (
	metaTrue      = structpb.NewStringValue("true")
	metaEraLegacy = structpb.NewStringValue(mcp.EraLegacy.Label())
	metaEraNew    = structpb.NewStringValue(mcp.EraStateless.Label())
)

// callMetadataOf is callMetadata with the tool's values from its plan.
func callMetadataOf(call *mcp.Call, p *toolPlan) *structpb.Struct {
	era := metaEraLegacy
	if call.Era == mcp.EraStateless {
		era = metaEraNew
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		wire.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			wire.MetadataJSONRPCID: structpb.NewStringValue(string(call.ID)),
			wire.MetadataToolCall:  metaTrue,
			wire.MetadataTool:      p.metaTool,
			wire.MetadataEra:       era,
		}}),
	}}
}
