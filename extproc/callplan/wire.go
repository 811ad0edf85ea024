package callplan

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// A routed call's request-body reply in wire format (procmsg.Wire). Most
// of it is the tool's plan (callplan.go), which is encoded once; per call
// only the content-length header, the arguments, the JSON-RPC id and the
// era are written, and the lengths around them. This is Plan.Reply for a
// plain call (Call.Plain), byte for byte a valid encoding of the same
// ProcessingResponse (TestRoutedCallWire decodes and compares both).

// field is a message field's number, read from its descriptor.
func field(m protoreflect.ProtoMessage, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil {
		panic("callplan: no field " + string(name) + " in " + string(m.ProtoReflect().Descriptor().FullName()))
	}
	return f.Number()
}

var (
	fRequestBody     = field(&extprocv3.ProcessingResponse{}, "request_body")
	fDynamicMetadata = field(&extprocv3.ProcessingResponse{}, "dynamic_metadata")
	fBodyResponse    = field(&extprocv3.BodyResponse{}, "response")
	fHeaderMutation  = field(&extprocv3.CommonResponse{}, "header_mutation")
	fBodyMutation    = field(&extprocv3.CommonResponse{}, "body_mutation")
	fClearRouteCache = field(&extprocv3.CommonResponse{}, "clear_route_cache")
	fSetHeaders      = field(&extprocv3.HeaderMutation{}, "set_headers")
	fRemoveHeaders   = field(&extprocv3.HeaderMutation{}, "remove_headers")
	fMutationBody    = field(&extprocv3.BodyMutation{}, "body")
	fHVOHeader       = field(&corev3.HeaderValueOption{}, "header")
	fHVOAppend       = field(&corev3.HeaderValueOption{}, "append_action")
	fHVKey           = field(&corev3.HeaderValue{}, "key")
	fHVRawValue      = field(&corev3.HeaderValue{}, "raw_value")
	fStructFields    = field(&structpb.Struct{}, "fields")
	fValueString     = field(&structpb.Value{}, "string_value")
	fValueStruct     = field(&structpb.Value{}, "struct_value")
	// A map entry is a message of key (1) and value (2).
	fEntryKey   protowire.Number = 1
	fEntryValue protowire.Number = 2
)

// appendLen appends a length-delimited field.
func appendLen(b []byte, n protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func sizeLen(n protowire.Number, l int) int {
	return protowire.SizeTag(n) + protowire.SizeBytes(l)
}

// appendSetHeader appends one set_headers element: key, raw_value and
// OVERWRITE_IF_EXISTS_OR_ADD, as procmsg.SetHeader builds it.
func appendSetHeader(b []byte, key, value string) []byte {
	hv := sizeLen(fHVKey, len(key))
	if value != "" { // proto3: an empty raw_value is not written
		hv += sizeLen(fHVRawValue, len(value))
	}
	action := uint64(corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
	hvo := sizeLen(fHVOHeader, hv) + protowire.SizeTag(fHVOAppend) + protowire.SizeVarint(action)
	b = protowire.AppendTag(b, fSetHeaders, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(hvo))
	b = protowire.AppendTag(b, fHVOHeader, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(hv))
	b = protowire.AppendTag(b, fHVKey, protowire.BytesType)
	b = protowire.AppendString(b, key)
	if value != "" {
		b = protowire.AppendTag(b, fHVRawValue, protowire.BytesType)
		b = protowire.AppendString(b, value)
	}
	b = protowire.AppendTag(b, fHVOAppend, protowire.VarintType)
	return protowire.AppendVarint(b, action)
}

// appendStringEntry appends a Struct field of a string value.
func appendStringEntry(b []byte, key, value string) []byte {
	v := sizeLen(fValueString, len(value))
	e := sizeLen(fEntryKey, len(key)) + sizeLen(fEntryValue, v)
	b = protowire.AppendTag(b, fStructFields, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(e))
	b = protowire.AppendTag(b, fEntryKey, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = protowire.AppendTag(b, fEntryValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(v))
	b = protowire.AppendTag(b, fValueString, protowire.BytesType)
	return protowire.AppendString(b, value)
}

// planWire is a Plan's pieces in wire format.
type planWire struct {
	routing, call, version []byte // set_headers elements
	removeAuth             []byte // remove_headers elements
	meta                   []byte // the Struct fields tool_call and tool
}

func newPlanWire(p *Plan, t *registry.Tool) *planWire {
	w := &planWire{}
	w.routing = appendSetHeader(w.routing, wire.ClusterHeader, t.Cluster)
	w.routing = appendSetHeader(w.routing, ":path", t.BasePath+t.Path)
	w.call = appendSetHeader(w.call, "content-type", procmsg.ContentTypeJSON)
	w.call = appendSetHeader(w.call, wire.RouteHeader, p.route)
	w.call = appendSetHeader(w.call, wire.ToolHeader, t.ServiceToolName())
	if p.version != nil {
		w.version = appendSetHeader(nil, wire.ToolVersionHeader, t.Version)
	}
	for _, h := range p.removeAuth {
		w.removeAuth = appendLen(w.removeAuth, fRemoveHeaders, []byte(h))
	}
	w.meta = appendStringEntry(w.meta, wire.MetadataToolCall, "true")
	w.meta = appendStringEntry(w.meta, wire.MetadataTool, t.Name)
	return w
}

// The era field of the metadata, for each era.
var (
	metaEraLegacyWire = appendStringEntry(nil, wire.MetadataEra, mcp.EraLegacy.Label())
	metaEraNewWire    = appendStringEntry(nil, wire.MetadataEra, mcp.EraStateless.Label())
	metaNamespaceKey  = appendLen(nil, fEntryKey, []byte(wire.MetadataNamespace))
)

// Wire is Reply(&Call{Call: call, Args: args, Rerouted: rerouted}) in
// wire format: the reply of a plain call.
func (p *Plan) Wire(call *mcp.Call, args []byte, rerouted bool) *procmsg.Wire {
	w := p.wire
	var clBuf [64]byte
	cl := appendSetHeader(clBuf[:0], "content-length", strconv.Itoa(len(args)))
	var idBuf [128]byte
	id := appendStringEntry(idBuf[:0], wire.MetadataJSONRPCID, string(call.ID))
	era := metaEraLegacyWire
	if call.Era == mcp.EraStateless {
		era = metaEraNewWire
	}

	hm := len(w.call) + len(cl) + len(w.version) + len(w.removeAuth)
	if rerouted {
		hm += len(w.routing)
	}
	bm := sizeLen(fMutationBody, len(args))
	cr := sizeLen(fHeaderMutation, hm) + sizeLen(fBodyMutation, bm)
	if rerouted {
		cr += protowire.SizeTag(fClearRouteCache) + 1
	}
	br := sizeLen(fBodyResponse, cr)
	inner := len(id) + len(w.meta) + len(era)
	value := sizeLen(fValueStruct, inner)
	entry := len(metaNamespaceKey) + sizeLen(fEntryValue, value)
	st := sizeLen(fStructFields, entry)

	b := make([]byte, 0, sizeLen(fRequestBody, br)+sizeLen(fDynamicMetadata, st))
	b = protowire.AppendTag(b, fRequestBody, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(br))
	b = protowire.AppendTag(b, fBodyResponse, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(cr))
	b = protowire.AppendTag(b, fHeaderMutation, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(hm))
	if rerouted {
		b = append(b, w.routing...)
	}
	b = append(b, w.call...)
	b = append(b, cl...)
	b = append(b, w.version...)
	b = append(b, w.removeAuth...)
	b = protowire.AppendTag(b, fBodyMutation, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(bm))
	b = appendLen(b, fMutationBody, args)
	if rerouted {
		b = protowire.AppendTag(b, fClearRouteCache, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	b = protowire.AppendTag(b, fDynamicMetadata, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(st))
	b = protowire.AppendTag(b, fStructFields, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(entry))
	b = append(b, metaNamespaceKey...)
	b = protowire.AppendTag(b, fEntryValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(value))
	b = protowire.AppendTag(b, fValueStruct, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(inner))
	b = append(b, id...)
	b = append(b, w.meta...)
	b = append(b, era...)
	return procmsg.WireOf(b)
}

// The fixed parts of a result's header mutation (ResultHeaders): :status
// and content-type first, content-encoding removed last.
var (
	fResponseBody     = field(&extprocv3.ProcessingResponse{}, "response_body")
	resultHeadersHead = appendSetHeader(appendSetHeader(nil, ":status", "200"), "content-type", procmsg.ContentTypeJSON)
	resultHeadersTail = appendLen(nil, fRemoveHeaders, []byte("content-encoding"))
)

// ResultWire is the response-body reply of the call's result out, in wire
// format: ResultHeaders with its content-length, and out as the body. A
// large result goes to gRPC as its own buffer, not copied.
func ResultWire(out []byte) *procmsg.Wire {
	var clBuf [64]byte
	cl := appendSetHeader(clBuf[:0], "content-length", strconv.Itoa(len(out)))
	hm := len(resultHeadersHead) + len(cl) + len(resultHeadersTail)
	bm := sizeLen(fMutationBody, len(out))
	cr := sizeLen(fHeaderMutation, hm) + sizeLen(fBodyMutation, bm)
	br := sizeLen(fBodyResponse, cr)
	shared := len(out) >= procmsg.SharedPart
	n := sizeLen(fResponseBody, br)
	if shared {
		n -= len(out)
	}
	b := make([]byte, 0, n)
	b = protowire.AppendTag(b, fResponseBody, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(br))
	b = protowire.AppendTag(b, fBodyResponse, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(cr))
	b = protowire.AppendTag(b, fHeaderMutation, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(hm))
	b = append(b, resultHeadersHead...)
	b = append(b, cl...)
	b = append(b, resultHeadersTail...)
	b = protowire.AppendTag(b, fBodyMutation, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(bm))
	b = protowire.AppendTag(b, fMutationBody, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(out)))
	if shared {
		return procmsg.WireOfParts(b, out)
	}
	b = append(b, out...)
	return procmsg.WireOf(b)
}
