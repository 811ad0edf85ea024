package extprocpb

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// Codec is a gRPC codec that decodes ProcessingRequest and
// ProcessingResponse messages here and leaves everything else, and all
// encoding, to the codec it wraps (grpc-go's proto codec).
//
// With Alias, a decoded message keeps the received bytes (one copy of the
// whole message, made here) and its strings and bytes fields point into
// them: for a receiver whose messages live no longer than the request they
// belong to. Without, the received bytes go back to gRPC's pool and each
// string or bytes field is copied, as proto.Unmarshal copies it.
type Codec struct {
	encoding.CodecV2
	Alias bool
}

func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *extprocv3.ProcessingResponse:
		if c.Alias {
			return UnmarshalResponse(data.Materialize(), m, true)
		}
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return UnmarshalResponse(buf.ReadOnlyData(), m, false)
	case *extprocv3.ProcessingRequest:
		if c.Alias {
			return UnmarshalRequest(data.Materialize(), m, true)
		}
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return UnmarshalRequest(buf.ReadOnlyData(), m, false)
	}
	return c.CodecV2.Unmarshal(data, v)
}
