package envoy

import (
	"bytes"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	"github.com/toolmesh/toolmesh/internal/extprocpb"
)

// BenchmarkExtProcDecode decodes a 2.2 MB ImmediateResponse (a 10,000-tool
// tools/list page) from 16 KiB frames, as grpc-go hands them to the codec:
// "grpc" with grpc-go's proto codec, "held" with extProcCodec and an
// exchange's held buffers released after each message, as ServeHTTP does.
func BenchmarkExtProcDecode(b *testing.B) {
	plain := immediateWire(b, bytes.Repeat([]byte(`{"name":"t"},`), 170_000))
	var data mem.BufferSlice
	for off := 0; off < len(plain); off += 16 << 10 {
		data = append(data, mem.SliceBuffer(plain[off:min(off+16<<10, len(plain))]))
	}
	for _, name := range []string{"grpc", "held"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(plain)))
			for b.Loop() {
				var held heldBuffers
				var c encoding.CodecV2 = protoCodec
				if name == "held" {
					c = extProcCodec{Codec: extprocpb.Codec{CodecV2: protoCodec, Alias: true}, held: &held}
				}
				if err := c.Unmarshal(data, &extprocv3.ProcessingResponse{}); err != nil {
					b.Fatal(err)
				}
				held.release()
			}
		})
	}
}
