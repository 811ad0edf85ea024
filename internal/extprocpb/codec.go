package extprocpb

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// Codec is a gRPC codec that decodes ProcessingRequest messages here and
// leaves everything else, and all encoding, to the codec it wraps
// (grpc-go's proto codec). The received bytes go back to gRPC's pool and
// each string or bytes field is copied, as proto.Unmarshal copies it.
type Codec struct {
	encoding.CodecV2
}

func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*extprocv3.ProcessingRequest); ok {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return UnmarshalRequest(buf.ReadOnlyData(), m)
	}
	return c.CodecV2.Unmarshal(data, v)
}
