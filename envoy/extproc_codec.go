package envoy

import (
	"sync"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/toolmesh/toolmesh/internal/extprocpb"
	"github.com/toolmesh/toolmesh/internal/extprocwire"
)

// extProcCodec is grpc-go's proto codec for the data plane's ext_proc
// streams, except that the body of a large ImmediateResponse is neither
// copied out of the received message nor allocated per request. Envoy
// parses the message from its own buffers and sends the body from there
// (Filter::sendImmediateResponse,
// source/extensions/filters/http/ext_proc/ext_proc.cc); here grpc-go's codec
// would join the frames into a new buffer and protobuf copy the bytes field
// out of it again: two copies and an allocation of what can be a
// multi-megabyte tools/list page. Instead the frames are joined into a
// buffer the exchange holds until its response is written, taken from a
// pool, and the body is a slice of it; a message that arrives as one
// reference-counted buffer (h2grpc's) is held by reference, not copied.
// The message decoded is the same: only where its body lives differs.
//
// Every other message is decoded by extprocpb without the generic
// decoder's allocation per field (the same messages, proto.Equal): a
// message and the strings in it live as long as the HTTP request, so they
// may share the received bytes. Headers messages are written by
// marshalHeaders (extproc_wire.go). Only an artefact of this stand-in is
// made cheaper: Envoy decodes with its own C++ protobuf code, and what
// reaches the wire is unchanged.
type extProcCodec struct {
	extprocpb.Codec              // Alias: true
	held            *heldBuffers // the exchange's
}

// Name is empty so that the content-type stays application/grpc, as
// Envoy's gRPC client sends it; a codec's name would become a subtype.
func (extProcCodec) Name() string { return "" }

// Marshal writes a headersRequest itself (extproc_wire.go).
func (c extProcCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*headersRequest); ok {
		return marshalHeaders(r)
	}
	return c.Codec.Marshal(v)
}

// protoCodec is grpc-go's proto codec.
var protoCodec = func() encoding.CodecV2 {
	c := encoding.GetCodecV2(grpcproto.Name)
	if c == nil { // grpc-go registers it in an init of the proto package
		panic("envoy: grpc-go's proto codec is not registered")
	}
	return c
}()

// aliasMin is the message size from which an ImmediateResponse body is
// left in the received buffer.
const aliasMin = 16 << 10

func (c extProcCodec) Unmarshal(data mem.BufferSlice, v any) error {
	resp, ok := v.(*extprocv3.ProcessingResponse)
	if !ok || data.Len() < aliasMin || c.held == nil {
		return c.Codec.Unmarshal(data, v)
	}
	h := c.held
	// Held while decoding: release waits, so no buffer goes back to the
	// pool while it is being read or written.
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		// The exchange is over (a full-duplex reader still running): what
		// this decodes is dropped, from a buffer of its own.
		return c.Codec.Unmarshal(data, v)
	}
	if len(data) == 1 && !isSliceBuffer(data[0]) {
		// One reference-counted buffer (h2grpc hands a whole message so):
		// keep a reference instead of a copy; release frees it.
		data[0].Ref()
		h.refs = append(h.refs, data[0])
		return extprocwire.UnmarshalAliasingBody(data[0].ReadOnlyData(), resp)
	}
	bp, _ := receiveBufs.Get().(*[]byte)
	if bp == nil || cap(*bp) < data.Len() {
		b := make([]byte, data.Len())
		bp = &b
	}
	h.bufs = append(h.bufs, bp)
	b := (*bp)[:data.Len()]
	data.CopyTo(b)
	return extprocwire.UnmarshalAliasingBody(b, resp)
}

// isSliceBuffer reports a buffer whose Ref and Free do nothing, as a
// *mem.SliceBuffer (h2grpc's small messages, whose memory goes back to its
// pool as soon as Unmarshal returns) as well as a mem.SliceBuffer: holding
// one by reference would keep memory someone else reuses.
func isSliceBuffer(b mem.Buffer) bool {
	switch b.(type) {
	case mem.SliceBuffer, *mem.SliceBuffer:
		return true
	}
	return false
}

// heldBuffers are the receive buffers of one exchange's large ext_proc
// messages: what was decoded from them may be in use until the exchange
// has written its response, and then they go back to the pool.
type heldBuffers struct {
	mu       sync.Mutex
	bufs     []*[]byte
	refs     []mem.Buffer // received buffers referenced rather than copied
	released bool
}

// maxPooledBuffer bounds the buffers kept in the pool.
const maxPooledBuffer = maxExtProcMessage

var receiveBufs sync.Pool // *[]byte

// release returns the held buffers to the pool, once any decode under way
// is done; nothing decoded from them may be used afterwards.
func (h *heldBuffers) release() {
	h.mu.Lock()
	bufs, refs := h.bufs, h.refs
	h.bufs, h.refs, h.released = nil, nil, true
	h.mu.Unlock()
	for _, b := range refs {
		b.Free()
	}
	for _, bp := range bufs {
		if cap(*bp) <= maxPooledBuffer {
			receiveBufs.Put(bp)
		}
	}
}
