package extproc

import (
	"fmt"

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
// as one of the message's buffers. Only the envelope (status, headers,
// details, the JSON-RPC id and the length prefixes that depend on it) is
// encoded per request.

// wireMessage is a ProcessingResponse already in protobuf wire format. Its
// buffers may share memory with the snapshot: they are only ever read.
type wireMessage struct {
	bufs mem.BufferSlice
	one  [1]mem.Buffer // bufs' array for a message of one buffer (wireOf)
}

// wireOf is the message of the single buffer b, allocated with its
// BufferSlice's array: gRPC only reads the slice, never writes to it.
func wireOf(b []byte) *wireMessage {
	m := &wireMessage{}
	m.one[0] = mem.SliceBuffer(b)
	m.bufs = m.one[:]
	return m
}

// wireCodec is grpc-go's proto codec, except that a *wireMessage, which
// only this package creates and only for responses, is sent as is, and
// that Envoy's messages are decoded by extprocpb (the entries of a header
// map allocated together, common header names not allocated at all; every
// value still its own copy, so a value kept longer keeps only itself
// alive).
type wireCodec struct{ extprocpb.Codec }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *wireMessage:
		return m.bufs, nil
	case *extprocv3.ProcessingResponse:
		if w := sharedWire(m); w != nil {
			return w.bufs, nil
		}
	}
	return c.Codec.Marshal(v)
}

// The shared answers of proto.go, encoded once: most requests send one or
// two of them, which would otherwise be sized and encoded into a new
// buffer each time. They never change (proto.go), and gRPC only reads a
// message's buffers.
var (
	removeClusterHeaderWire     = wireOf(mustMarshal(removeClusterHeader))
	continueResponseHeadersWire = wireOf(mustMarshal(continueResponseHeaders))
	continueResponseBodyWire    = wireOf(mustMarshal(continueResponseBody))
	responseTrailersWire        = wireOf(mustMarshal(responseTrailersResponse))
)

// sharedWire is m encoded when m is one of the shared answers, else nil.
func sharedWire(m *extprocv3.ProcessingResponse) *wireMessage {
	switch m {
	case removeClusterHeader:
		return removeClusterHeaderWire
	case continueResponseHeaders:
		return continueResponseHeadersWire
	case continueResponseBody:
		return continueResponseBodyWire
	case responseTrailersResponse:
		return responseTrailersWire
	}
	return nil
}

func newWireCodec() wireCodec {
	c := encoding.GetCodecV2(grpcproto.Name)
	if c == nil { // grpc-go registers it in an init of the proto package
		panic("extproc: grpc-go's proto codec is not registered")
	}
	return wireCodec{extprocpb.Codec{CodecV2: c}}
}

// Field numbers, read from the descriptors rather than written down.
var (
	fieldImmediate = (&extprocv3.ProcessingResponse{}).ProtoReflect().Descriptor().
			Fields().ByName("immediate_response").Number()
	fieldBody = (&extprocv3.ImmediateResponse{}).ProtoReflect().Descriptor().
			Fields().ByName("body").Number()
)

// answeredMetadataWire is the dynamic_metadata field of every
// ImmediateResponse, encoded once.
var answeredMetadataWire = mustMarshal(&extprocv3.ProcessingResponse{DynamicMetadata: answeredMetadata})

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("extproc: encoding %T: %v", m, err))
	}
	return b
}

// sharedPart is the size from which a body part goes to gRPC as its own
// buffer rather than copied into the envelope.
const sharedPart = 4 << 10

// wireImmediate is immediate(r, details) in wire format, with r's body in
// Parts. Fields are written as immediate_response {status, headers,
// details, body}, dynamic_metadata: protobuf parsers accept fields in any
// order, and each appears once.
func wireImmediate(r *mcp.Reply, details string) (*wireMessage, error) {
	n := r.BodyLen()
	inner, err := encodedHead(r, n > 0, details)
	if err != nil {
		return nil, fmt.Errorf("extproc: encoding an immediate response: %w", err)
	}
	innerLen := len(inner) + protowire.SizeTag(fieldBody) + protowire.SizeBytes(n)

	small, shared := 0, 0 // bytes of the small parts, copied into the envelope; count of the others
	for _, p := range r.Parts {
		if len(p) < sharedPart {
			small += len(p)
		} else {
			shared++
		}
	}
	bufs := make(mem.BufferSlice, 0, 2*shared+1)
	cur := make([]byte, 0, 2*tagLenMax+len(inner)+small+len(r.Body)+len(answeredMetadataWire))
	cur = protowire.AppendTag(cur, fieldImmediate, protowire.BytesType)
	cur = protowire.AppendVarint(cur, uint64(innerLen))
	cur = append(cur, inner...)
	cur = protowire.AppendTag(cur, fieldBody, protowire.BytesType)
	cur = protowire.AppendVarint(cur, uint64(n))
	cur = append(cur, r.Body...)
	for _, p := range r.Parts {
		if len(p) < sharedPart {
			cur = append(cur, p...)
			continue
		}
		// One backing array for all the small parts: each flushed piece
		// keeps its own range of it.
		bufs = append(bufs, mem.SliceBuffer(cur[:len(cur):len(cur)]))
		cur = cur[len(cur):]
		bufs = append(bufs, mem.SliceBuffer(p))
	}
	cur = append(cur, answeredMetadataWire...)
	bufs = append(bufs, mem.SliceBuffer(cur))
	return &wireMessage{bufs: bufs}, nil
}

// tagLenMax bounds a tag plus a varint length: 5 + 5 bytes for field numbers
// and lengths below 2^32.
const tagLenMax = 10

// message decodes m; tests and the fallback without wireCodec use it.
func (m *wireMessage) message() (*extprocv3.ProcessingResponse, error) {
	b := m.bufs.Materialize()
	resp := &extprocv3.ProcessingResponse{}
	if err := proto.Unmarshal(b, resp); err != nil {
		return nil, fmt.Errorf("extproc: decoding a prepared response: %w", err)
	}
	return resp, nil
}
