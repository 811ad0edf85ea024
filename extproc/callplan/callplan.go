// Package callplan builds the ext_proc replies of a routed tools/call: the
// request-body reply that sends the call to its Tool Service and the
// response-body reply that carries its result back, each as a message and
// in protobuf wire format (wire.go).
//
// A routed call's reply is mostly the same for every call of a tool: the
// cluster, the upstream :path, the Tool Service headers and the metadata
// naming the tool. Those pieces are built once per tool of a snapshot (a
// Plan) and shared, read only, by every call; only what depends on the
// request (content-length, filter and trace headers, the JSON-RPC id) is
// built per call. gRPC only reads a message it marshals, so one message
// may be marshalled by many streams at once. The stream handler (package
// extproc) decides what a call carries; this package writes it.
package callplan

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"weak"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// RemoveOnCall are the request headers the gateway consumes and never
// forwards to a Tool Service. accept-encoding goes too: the reply is
// rewritten, so it must arrive uncompressed.
var RemoveOnCall = []string{"mcp-method", "mcp-name", "accept-encoding"}

// Plan holds the per-tool pieces of a routed call's replies.
type Plan struct {
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

	wire *planWire // the pieces in wire format (wire.go)
	// early is earlyRoute(routing, nil) encoded: the request-headers reply
	// that routes a call of the tool for a client that sent no
	// x-toolmesh-* header. Shared by every such call; gRPC only reads it.
	early *procmsg.Wire
}

// plans maps a tool (weakly: a snapshot's tools go when it does) to its
// plan. Lookups are lock free; a plan is built at a tool's first call and
// removed by a cleanup once the tool is unreachable.
var plans sync.Map // weak.Pointer[registry.Tool] → *Plan

// For returns the reply pieces of a call of t on route.
func For(route string, t *registry.Tool) *Plan {
	key := weak.Make(t)
	if v, ok := plans.Load(key); ok {
		if p := v.(*Plan); p.route == route {
			return p
		}
		// The same tool under another route key: rare, not cached.
		return newPlan(route, t)
	}
	p := newPlan(route, t)
	if v, loaded := plans.LoadOrStore(key, p); loaded {
		if q := v.(*Plan); q.route == route {
			return q
		}
		return p
	}
	runtime.AddCleanup(t, func(k weak.Pointer[registry.Tool]) { plans.Delete(k) }, key)
	return p
}

func newPlan(route string, t *registry.Tool) *Plan {
	p := &Plan{
		route: route,
		routing: []*corev3.HeaderValueOption{
			procmsg.SetHeader(wire.ClusterHeader, t.Cluster),
			procmsg.SetHeader(":path", t.BasePath+t.Path),
		},
		call: []*corev3.HeaderValueOption{
			procmsg.SetHeader("content-type", procmsg.ContentTypeJSON),
			procmsg.SetHeader(wire.RouteHeader, route),
			procmsg.SetHeader(wire.ToolHeader, t.ServiceToolName()), // a virtual tool's real name
		},
		remove:   RemoveOnCall,
		metaTool: structpb.NewStringValue(t.Name),
	}
	if t.Version != "" {
		p.version = procmsg.SetHeader(wire.ToolVersionHeader, t.Version)
	} else {
		p.remove = append(p.remove[:len(p.remove):len(p.remove)], wire.ToolVersionHeader)
	}
	p.remove = p.remove[:len(p.remove):len(p.remove)]
	p.removeAuth = append(p.remove, "authorization")
	p.removeAuth = p.removeAuth[:len(p.removeAuth):len(p.removeAuth)]
	p.wire = newPlanWire(p, t)
	p.early = procmsg.WireOf(procmsg.MustMarshal(earlyRoute(p.routing, nil)))
	return p
}

// Early is the request-headers reply that routes a call of the tool for a
// client that sent no x-toolmesh-* header, encoded once.
func (p *Plan) Early() *procmsg.Wire { return p.early }

// EarlyRoute is the request-headers reply that routes a call of the tool
// for a client whose own x-toolmesh-* header names are owned.
func (p *Plan) EarlyRoute(owned []string) *extprocv3.ProcessingResponse {
	return earlyRoute(p.routing, owned)
}

// earlyRoute is the request-headers reply that routes a call to the Tool
// Service: routing sets x-toolmesh-cluster and :path, and the client's own
// x-toolmesh-* headers (owned, without the routing header, which is being
// set) and its token go; the token is not the Tool Service's (ADR 0010).
func earlyRoute(routing []*corev3.HeaderValueOption, owned []string) *extprocv3.ProcessingResponse {
	return procmsg.RequestHeaders(&extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{
			SetHeaders:    routing,
			RemoveHeaders: append(without(owned, wire.ClusterHeader), "authorization"),
		},
		ClearRouteCache: true, // honoured because a header mutation comes with it
	})
}

// Call is what one routed call carries besides its plan.
type Call struct {
	Call *mcp.Call
	Args []byte // the body the Tool Service gets
	// Rerouted is false for a call already routed to the tool at request
	// headers: x-toolmesh-cluster and :path are set and the route
	// re-matched on them, so the reply neither repeats them nor clears
	// the route cache again.
	Rerouted bool
	// AddHeaders are the filters' headers, Trace the trace context's.
	AddHeaders map[string]string
	Trace      []*corev3.HeaderValueOption
	// Creds are the upstream credential headers of the Tool Service; the
	// client's Authorization is removed unless they set it.
	Creds map[string]string
	// Unset are further request headers the upstream credentials remove;
	// Dropped the client headers the service does not accept.
	Unset, Dropped []string
}

// Plain reports whether c carries nothing but the plan and its body: then
// Wire writes its reply.
func (c *Call) Plain() bool {
	return len(c.AddHeaders) == 0 && len(c.Trace) == 0 && len(c.Creds) == 0 && len(c.Unset) == 0 && len(c.Dropped) == 0
}

// Reply is the request-body reply that sends c to its Tool Service with
// c.Args as the body.
func (p *Plan) Reply(c *Call) *extprocv3.ProcessingResponse {
	set := make([]*corev3.HeaderValueOption, 0, len(p.routing)+len(p.call)+2+len(c.AddHeaders)+len(c.Trace)+len(c.Creds))
	if c.Rerouted {
		set = append(set, p.routing...)
	}
	set = append(set, p.call...)
	// BUFFERED + SEND keeps content-length; a mismatch is a 500.
	set = append(set, procmsg.SetHeader("content-length", strconv.Itoa(len(c.Args))))
	for _, k := range sortedKeys(c.AddHeaders) {
		set = append(set, procmsg.SetHeader(k, c.AddHeaders[k]))
	}
	set = append(set, c.Trace...)
	for _, k := range sortedKeys(c.Creds) {
		set = append(set, procmsg.SetHeader(k, c.Creds[k]))
	}
	if p.version != nil {
		set = append(set, p.version)
	}
	// The client's token is not the Tool Service's (ADR 0010).
	remove := p.removeAuth // full: an append copies, the plan stays shared
	if len(c.Unset) > 0 || len(c.Creds) > 0 {
		remove = append(p.remove, c.Unset...)
		if _, ok := c.Creds["authorization"]; !ok && !slices.Contains(remove, "authorization") {
			remove = append(remove, "authorization")
		}
	}
	remove = appendNew(remove, c.Dropped)
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{
				HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: remove},
				BodyMutation:   procmsg.ReplaceBody(c.Args),
				// Honoured because a header mutation comes with it.
				ClearRouteCache: c.Rerouted,
			},
		}},
		DynamicMetadata: metadataOf(c.Call, p),
	}
}

// Metadata values every routed call shares.
var (
	metaTrue      = structpb.NewStringValue("true")
	metaEraLegacy = structpb.NewStringValue(mcp.EraLegacy.Label())
	metaEraNew    = structpb.NewStringValue(mcp.EraStateless.Label())
)

// metadataOf is Metadata with the tool's values from its plan.
func metadataOf(call *mcp.Call, p *Plan) *structpb.Struct {
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

// Metadata is the dynamic metadata of a routed call: Envoy's
// local_reply_config reads it to shape its own 503/504 replies as an MCP
// result carrying the request id.
func Metadata(call *mcp.Call, t *registry.Tool) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		wire.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			wire.MetadataJSONRPCID: structpb.NewStringValue(string(call.ID)),
			wire.MetadataToolCall:  structpb.NewStringValue("true"),
			wire.MetadataTool:      structpb.NewStringValue(t.Name),
			wire.MetadataEra:       structpb.NewStringValue(call.Era.Label()),
		}}),
	}}
}

// The constant headers of every result, shared read only.
var (
	status200             = procmsg.SetHeader(":status", "200")
	contentTypeJSONHeader = procmsg.SetHeader("content-type", procmsg.ContentTypeJSON)
)

// ResultHeaders are the response headers of a tool result: HTTP 200 and
// JSON whatever the Tool Service said. content-encoding goes because the new
// body is never compressed (the request's accept-encoding was removed, but a
// Tool Service may compress regardless).
func ResultHeaders(extra ...*corev3.HeaderValueOption) *extprocv3.HeaderMutation {
	set := make([]*corev3.HeaderValueOption, 0, 2+len(extra))
	set = append(set, status200, contentTypeJSONHeader)
	for _, e := range extra {
		if e != nil {
			set = append(set, e)
		}
	}
	return &extprocv3.HeaderMutation{SetHeaders: set, RemoveHeaders: []string{"content-encoding"}}
}

// sortedKeys are m's keys in order: headers are set in a stable order.
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

// appendNew appends the names of add that remove lacks. remove may be a
// shared, full slice: an append copies it.
func appendNew(remove, add []string) []string {
	for _, k := range add {
		if !slices.Contains(remove, k) {
			remove = append(remove, k)
		}
	}
	return remove
}
