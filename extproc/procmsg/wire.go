package procmsg

import (
	"fmt"
	"slices"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/internal/extprocpb"
	"github.com/toolmesh/toolmesh/mcp"
)

// A tools/list page of a large route is mostly its items: a JSON array the
// snapshot serialized once. Building the body and then a ProcessingResponse
// would copy and encode it twice per request; instead the ImmediateResponse
// is written in protobuf wire format around it, and the array goes to gRPC
// as one of the message's buffers. Only the envelope (the JSON-RPC id, the
// details and the length prefixes that depend on them) is encoded per
// request; the status and headers are encoded once per distinct head
// (encodedhead.go). The bytes are those proto.Marshal writes for the built
// message, so the two paths are checked byte for byte.

// Wire is a ProcessingResponse already in protobuf wire format. Its
// buffers may share memory with the snapshot: they are only ever read.
type Wire struct {
	bufs  mem.BufferSlice
	arr   [wireParts]mem.Buffer // bufs' array for a message of up to wireParts buffers
	parts [wireParts]part       // the buffers of arr
}

// wireParts is how many buffers a Wire holds without allocating more: a
// list page's answer has three (envelope, shared items, envelope).
const wireParts = 3

// part is a buffer of a Wire. A mem.SliceBuffer is a slice, and making one
// a mem.Buffer allocates a copy of its header; a pointer to a part (the
// SliceBuffer's methods, promoted) is one without allocating.
type part struct{ mem.SliceBuffer }

// add appends b to m's buffers, as one of m's parts while there is room.
func (m *Wire) add(b []byte) {
	if i := len(m.bufs); i < wireParts {
		m.parts[i].SliceBuffer = b
		m.bufs = append(m.bufs, &m.parts[i])
		return
	}
	m.bufs = append(m.bufs, mem.SliceBuffer(b))
}

// newWire is an empty message with room for n buffers.
func newWire(n int) *Wire {
	m := &Wire{}
	m.reset(n)
	return m
}

// reset empties m, with room for n buffers.
func (m *Wire) reset(n int) {
	m.bufs = m.arr[:0]
	if n > wireParts {
		m.bufs = make(mem.BufferSlice, 0, n)
	}
}

// WireOf is the message of the single buffer b: gRPC only reads the
// slice, never writes to it.
func WireOf(b []byte) *Wire {
	m := newWire(1)
	m.add(b)
	return m
}

// WireOfParts is the message of the buffers parts, in order: a large part
// goes to gRPC as its own buffer rather than copied.
func WireOfParts(parts ...[]byte) *Wire {
	m := newWire(len(parts))
	for _, p := range parts {
		m.add(p)
	}
	return m
}

// Len is the size of the encoded message.
func (m *Wire) Len() int { return m.bufs.Len() }

// Codec is grpc-go's proto codec, except that a *Wire, which only this
// package creates and only for responses, is sent as is, and
// that Envoy's messages are decoded by extprocpb (the entries of a header
// map allocated together, common header names not allocated at all; every
// value still its own copy, so a value kept longer keeps only itself
// alive).
type Codec struct{ extprocpb.Codec }

// Marshal implements grpc-go's encoding.CodecV2.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *Wire:
		return m.bufs, nil
	case *extprocv3.ProcessingResponse:
		if w := sharedWire(m); w != nil {
			return w.bufs, nil
		}
	}
	return c.Codec.Marshal(v)
}

// The shared answers (procmsg.go), encoded once: most requests send one or
// two of them, which would otherwise be sized and encoded into a new
// buffer each time. They never change, and gRPC only reads a message's
// buffers.
var (
	removeClusterHeaderWire     = WireOf(MustMarshal(RemoveClusterHeader))
	continueResponseHeadersWire = WireOf(MustMarshal(ContinueResponseHeaders))
	continueResponseBodyWire    = WireOf(MustMarshal(ContinueResponseBody))
	responseTrailersWire        = WireOf(MustMarshal(ResponseTrailers))
)

// sharedWire is m encoded when m is one of the shared answers, else nil.
func sharedWire(m *extprocv3.ProcessingResponse) *Wire {
	switch m {
	case RemoveClusterHeader:
		return removeClusterHeaderWire
	case ContinueResponseHeaders:
		return continueResponseHeadersWire
	case ContinueResponseBody:
		return continueResponseBodyWire
	case ResponseTrailers:
		return responseTrailersWire
	}
	return nil
}

// NewCodec is the codec a server sending Wire messages installs
// (grpc.ForceServerCodecV2).
func NewCodec() Codec {
	c := encoding.GetCodecV2(grpcproto.Name)
	if c == nil { // grpc-go registers it in an init of the proto package
		panic("procmsg: grpc-go's proto codec is not registered")
	}
	return Codec{extprocpb.Codec{CodecV2: c}}
}

// Field numbers, read from the descriptors rather than written down.
var (
	fieldImmediate = (&extprocv3.ProcessingResponse{}).ProtoReflect().Descriptor().
			Fields().ByName("immediate_response").Number()
	fieldBody = (&extprocv3.ImmediateResponse{}).ProtoReflect().Descriptor().
			Fields().ByName("body").Number()
	fieldDetails = (&extprocv3.ImmediateResponse{}).ProtoReflect().Descriptor().
			Fields().ByName("details").Number()
)

// answeredMetadataWire is the dynamic_metadata field of every
// ImmediateResponse, encoded once.
var answeredMetadataWire = MustMarshal(&extprocv3.ProcessingResponse{DynamicMetadata: answeredMetadata})

// MustMarshal encodes a message built by this program; failing is a bug.
// Map entries are written in key order, so an encoding kept and sent many
// times is the same in every process.
func MustMarshal(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("procmsg: encoding %T: %v", m, err))
	}
	return b
}

// SharedPart is the size from which a body part goes to gRPC as its own
// buffer rather than copied into the envelope.
const SharedPart = 4 << 10

// ImmediateWire is room for one answer in wire format (Encode): the Wire
// and a buffer that a list page's envelope fits in. A stream handler
// keeps one in its request state, so that a list page's answer allocates
// nothing.
type ImmediateWire struct {
	Wire
	used bool
	buf  [immediateRoom]byte
}

// immediateRoom is the envelope a list page's answer writes without
// allocating: at 10,000 tools gzip-coded it is 238 bytes. With it the
// stream handler's request is 1,400 bytes, which with the allocator's
// 8-byte header is the 1,408-byte size class, eleven to a span; eight
// bytes more took the 1,536-byte class, five to a span, and a span
// refill every fifth request.
const immediateRoom = 344

// Encode is Immediate(r, details) in wire format, with r's body in Parts,
// written into w; head is EncodedHead(r, r.BodyLen() > 0), which the
// caller may keep per distinct head. Fields are written as proto.Marshal
// writes them: dynamic_metadata, then the oneof's immediate_response
// {status, headers, body, details} (protobuf-go writes a oneof after the
// other fields, each message's fields in number order). The answer is w's
// until it is sent, so a second one goes into a new ImmediateWire.
func (w *ImmediateWire) Encode(r *mcp.Reply, head []byte, details string) *Wire {
	if w.used {
		w = new(ImmediateWire)
	}
	w.used = true
	n := r.BodyLen()
	detailsLen := 0
	if details != "" { // proto3: an empty string is not written
		detailsLen = len(tagDetails) + protowire.SizeBytes(len(details))
	}
	innerLen := len(head) + len(tagBody) + protowire.SizeBytes(n) + detailsLen

	small, shared := 0, 0 // bytes of the small parts, copied into the envelope; count of the others
	for _, p := range r.Parts {
		if len(p) < SharedPart {
			small += len(p)
		} else {
			shared++
		}
	}
	m := &w.Wire
	m.reset(2*shared + 1) // a list page shares at most one part: no allocation
	cur := w.buf[:0]
	if size := len(immediatePrefix) + 2*varintMax + len(head) + len(tagBody) + small + len(r.Body) + detailsLen; size > len(w.buf) {
		cur = make([]byte, 0, size)
	}
	cur = append(cur, immediatePrefix...)
	cur = appendVarint(cur, uint64(innerLen))
	cur = append(cur, head...)
	cur = append(cur, tagBody...)
	cur = appendVarint(cur, uint64(n))
	cur = append(cur, r.Body...)
	for _, p := range r.Parts {
		if len(p) < SharedPart {
			cur = append(cur, p...)
			continue
		}
		// One backing array for all the small parts: each flushed piece
		// keeps its own range of it.
		m.add(cur[:len(cur):len(cur)])
		cur = cur[len(cur):]
		m.add(p)
	}
	if details != "" {
		cur = append(cur, tagDetails...)
		cur = appendVarint(cur, uint64(len(details)))
		cur = append(cur, details...)
	}
	m.add(cur)
	return m
}

// The fixed bytes of every ImmediateWire answer, encoded once: the
// dynamic_metadata field and the immediate_response tag before its length,
// and the tags of the body and details fields.
var (
	immediatePrefix = protowire.AppendTag(slices.Clip(answeredMetadataWire), fieldImmediate, protowire.BytesType)
	tagBody         = protowire.AppendTag(nil, fieldBody, protowire.BytesType)
	tagDetails      = protowire.AppendTag(nil, fieldDetails, protowire.BytesType)
)

// varintMax bounds a varint length below 2^35.
const varintMax = 5

// appendVarint is protowire.AppendVarint, small enough to be inlined: the
// lengths it writes take one to three bytes.
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// Encoded is m's bytes, copied: what gRPC sends as the message.
func (m *Wire) Encoded() []byte { return m.bufs.Materialize() }

// Message decodes m, for tests and for callers that look at the answer.
func (m *Wire) Message() (*extprocv3.ProcessingResponse, error) {
	b := m.Encoded()
	resp := &extprocv3.ProcessingResponse{}
	if err := proto.Unmarshal(b, resp); err != nil {
		return nil, fmt.Errorf("procmsg: decoding a prepared response: %w", err)
	}
	return resp, nil
}
