package envoy

import (
	"bytes"
	"sync"
	"testing"
	"unsafe"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/internal/extprocpb"
)

func immediateWire(t testing.TB, body []byte) []byte {
	t.Helper()
	b, err := proto.Marshal(&extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_OK}, Body: body, Details: "toolmesh_reply",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// within reports whether sub is a non-empty slice of b's memory.
func within(sub, b []byte) bool {
	if len(sub) == 0 || len(b) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(&sub[0])), uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p < lo+uintptr(len(b))
}

// TestExtProcCodecHeld checks that the data plane's codec decodes a large
// ImmediateResponse from grpc-go's frames into a buffer the exchange holds,
// with the body left in it, until release.
func TestExtProcCodecHeld(t *testing.T) {
	big := bytes.Repeat([]byte(`{"name":"t"},`), 10_000)
	plain := immediateWire(t, big)
	// Through the codec, from frames as grpc-go hands them over.
	var data mem.BufferSlice
	for off := 0; off < len(plain); off += 16 << 10 {
		data = append(data, mem.SliceBuffer(plain[off:min(off+16<<10, len(plain))]))
	}
	var held heldBuffers
	c := extProcCodec{Codec: extprocpb.Codec{CodecV2: protoCodec, Alias: true}, held: &held}
	got := &extprocv3.ProcessingResponse{}
	if err := c.Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.GetImmediateResponse().GetBody(), big) || got.GetImmediateResponse().GetDetails() != "toolmesh_reply" {
		t.Fatalf("decoded %d B body, details %q", len(got.GetImmediateResponse().GetBody()), got.GetImmediateResponse().GetDetails())
	}
	if len(held.bufs) != 1 || !within(got.GetImmediateResponse().GetBody(), *held.bufs[0]) {
		t.Fatal("the body is not in the exchange's held buffer")
	}
	held.release()
	if len(held.bufs) != 0 || !held.released {
		t.Fatal("release kept the buffers")
	}
	// A message decoded after the release (a full-duplex reader still
	// running) is decoded on its own: nothing more is held.
	if err := c.Unmarshal(data, &extprocv3.ProcessingResponse{}); err != nil {
		t.Fatal(err)
	}
	if len(held.bufs) != 0 {
		t.Fatal("a buffer was held after the release")
	}
	// Small messages take grpc-go's codec.
	small, _ := proto.Marshal(&extprocv3.ProcessingResponse{})
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(small)}, &extprocv3.ProcessingResponse{}); err != nil {
		t.Fatal(err)
	}
}

// TestExtProcCodecReleaseDuringDecode releases an exchange's buffers while
// its streams still decode (a full-duplex reader outliving the exchange):
// run with -race, no buffer is reused while a decode reads it.
func TestExtProcCodecReleaseDuringDecode(t *testing.T) {
	plain := immediateWire(t, bytes.Repeat([]byte("x"), 100_000))
	var data mem.BufferSlice
	for off := 0; off < len(plain); off += 16 << 10 {
		data = append(data, mem.SliceBuffer(plain[off:min(off+16<<10, len(plain))]))
	}
	for range 20 {
		var held heldBuffers
		c := extProcCodec{Codec: extprocpb.Codec{CodecV2: protoCodec, Alias: true}, held: &held}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				resp := &extprocv3.ProcessingResponse{}
				if err := c.Unmarshal(data, resp); err != nil || len(resp.GetImmediateResponse().GetBody()) != 100_000 {
					t.Errorf("decode: %v", err)
				}
			})
		}
		held.release()
		// Another exchange takes the pool's buffers meanwhile.
		var next heldBuffers
		wg.Go(func() {
			if err := (extProcCodec{Codec: extprocpb.Codec{CodecV2: protoCodec, Alias: true}, held: &next}).Unmarshal(data, &extprocv3.ProcessingResponse{}); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		next.release()
	}
}

// countingPool is a mem.BufferPool that records what comes back.
type countingPool struct{ put int }

func (p *countingPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (p *countingPool) Put(*[]byte)       { p.put++ }

// TestExtProcCodecHoldsReference: a large message handed over as one
// reference-counted buffer (h2grpc's way) is held by reference, the body
// aliasing it, and goes back to its pool only at release.
func TestExtProcCodecHoldsReference(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 100_000)
	plain := immediateWire(t, big)
	pool := &countingPool{}
	buf := append([]byte(nil), plain...)
	data := mem.BufferSlice{mem.NewBuffer(&buf, pool)}
	var held heldBuffers
	c := extProcCodec{Codec: extprocpb.Codec{CodecV2: protoCodec, Alias: true}, held: &held}
	got := &extprocv3.ProcessingResponse{}
	if err := c.Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	data.Free() // the transport's reference, as after every Unmarshal
	if !bytes.Equal(got.GetImmediateResponse().GetBody(), big) || !within(got.GetImmediateResponse().GetBody(), buf) {
		t.Fatal("the body is not the received buffer")
	}
	if pool.put != 0 || len(held.bufs) != 0 {
		t.Fatalf("buffer returned %d times, %d copies held; want it held by reference", pool.put, len(held.bufs))
	}
	held.release()
	if pool.put != 1 {
		t.Fatalf("release returned the buffer %d times, want once", pool.put)
	}
}

// TestExtProcCodecCopiesSliceBuffer: a message handed over as a
// *mem.SliceBuffer (how h2grpc hands small messages, returning the memory
// to its pool once Unmarshal returns) is copied into a held buffer, never
// held by reference: its Ref does nothing.
func TestExtProcCodecCopiesSliceBuffer(t *testing.T) {
	plain := immediateWire(t, bytes.Repeat([]byte("z"), 100_000))
	for _, tc := range []struct {
		name string
		buf  mem.Buffer
	}{
		{"SliceBuffer", mem.SliceBuffer(plain)},
		{"*SliceBuffer", func() mem.Buffer { sb := mem.SliceBuffer(plain); return &sb }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held heldBuffers
			c := extProcCodec{Codec: extprocpb.Codec{CodecV2: protoCodec, Alias: true}, held: &held}
			got := &extprocv3.ProcessingResponse{}
			if err := c.Unmarshal(mem.BufferSlice{tc.buf}, got); err != nil {
				t.Fatal(err)
			}
			if len(held.refs) != 0 || len(held.bufs) != 1 {
				t.Fatalf("%d held by reference, %d copies; want one copy", len(held.refs), len(held.bufs))
			}
			if within(got.GetImmediateResponse().GetBody(), plain) {
				t.Fatal("the body aliases the caller's buffer")
			}
			held.release()
		})
	}
}
