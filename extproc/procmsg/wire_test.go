package procmsg

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/mcp"
)

const detailsReply = "toolmesh_reply"

// checkWire checks that the wire-format answer of r is, byte for byte,
// what proto.Marshal writes for the message Immediate builds for the same
// reply, and decodes to it.
func checkWire(t *testing.T, r *mcp.Reply, details string) {
	t.Helper()
	flat := &mcp.Reply{Status: r.Status, Headers: r.Headers, Body: append([]byte(nil), r.Body...),
		Parts: append([][]byte(nil), r.Parts...)}
	want := Immediate(flat, details)
	head, err := EncodedHead(r, r.BodyLen() > 0)
	if err != nil {
		t.Fatal(err)
	}
	m := new(ImmediateWire).Encode(r, head, details)
	wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Encoded(), wantBytes) {
		t.Fatalf("wire message is not the bytes proto.Marshal writes for the built one")
	}
	got, err := m.Message()
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("wire message differs:\n got %v\nwant %v", got, want)
	}
	if n := m.Len(); n != proto.Size(want) {
		t.Fatalf("wire message is %d bytes, the built one %d", n, proto.Size(want))
	}
	// Into a request's ImmediateWire: the same bytes, and a second answer
	// leaves the first as it was.
	var w ImmediateWire
	first := w.Encode(r, head, details)
	second := w.Encode(r, head, details)
	if first == second || !bytes.Equal(first.Encoded(), wantBytes) || !bytes.Equal(second.Encoded(), wantBytes) {
		t.Fatalf("ImmediateWire.Encode: not the bytes proto.Marshal writes, or the second answer overwrote the first")
	}
}

// TestImmediateWireRoom: a list page's answer with its items shared and an
// envelope of usual size is written into the ImmediateWire, allocating
// nothing; a larger envelope still encodes as proto.Marshal does
// (TestWireImmediateEqualsBuilt).
func TestImmediateWireRoom(t *testing.T) {
	r := listReply(`"`+strings.Repeat("i", 100)+`"`, SharedPart, "c2")
	r.Headers = append(r.Headers, mcp.Header{Key: "vary", Value: "accept-encoding"})
	head, err := EncodedHead(r, true)
	if err != nil {
		t.Fatal(err)
	}
	w := new(ImmediateWire)
	if n := testing.AllocsPerRun(20, func() {
		w.used = false
		w.Encode(r, head, detailsReply)
	}); n != 0 {
		t.Errorf("%v allocations per answer, want 0", n)
	}
}

// listReply is a list page in parts, as mcp's listPage writes it, with a
// filler of n bytes for the items.
func listReply(id string, n int, next string) *mcp.Reply {
	items := bytes.Repeat([]byte("x"), n)
	head := []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":`)
	tail := []byte(`}}`)
	if next != "" {
		tail = []byte(`,"nextCursor":` + strconv.Quote(next) + `}}`)
	}
	return &mcp.Reply{Status: 200, Headers: []mcp.Header{{Key: "Content-Type", Value: "application/json"}},
		Parts: [][]byte{head, items, tail}}
}

func TestWireImmediateEqualsBuilt(t *testing.T) {
	// Item sizes on both sides of SharedPart and of the varint boundaries
	// of the body and message lengths (2^7, 2^14, 2^21).
	sizes := []int{0, 1, 50, 100, 127, 128, 200, SharedPart - 60, SharedPart - 1, SharedPart, SharedPart + 1,
		16_300, 16_384, 16_500, 1<<21 - 120, 1<<21 - 60, 1 << 21, 1<<21 + 5}
	ids := []string{"1", "-0.5e3", `"a"`, `"` + strings.Repeat("é", 40) + `"`, `"\u00e9\"x"`,
		strconv.Quote(strings.Repeat("i", 100)), strconv.Quote(strings.Repeat("j", 200))}
	for _, n := range sizes {
		for _, id := range ids {
			for _, next := range []string{"", "c2"} {
				t.Run(strconv.Itoa(n)+"/"+id+"/"+next, func(t *testing.T) {
					checkWire(t, listReply(id, n, next), detailsReply)
				})
			}
		}
	}
	t.Run("body and parts", func(t *testing.T) {
		r := listReply("7", SharedPart*2, "")
		r.Body = []byte(`{"jsonrpc"`)
		checkWire(t, r, detailsReply)
	})
	t.Run("no headers", func(t *testing.T) {
		r := listReply("7", 10, "")
		r.Headers = nil
		checkWire(t, r, "")
	})
	t.Run("large part first and last", func(t *testing.T) {
		big := bytes.Repeat([]byte("y"), SharedPart)
		checkWire(t, &mcp.Reply{Status: 200, Parts: [][]byte{big, []byte("1"), big}}, detailsReply)
	})
}

func FuzzWireImmediate(f *testing.F) {
	f.Add(`1`, 10, "")
	f.Add(`"abc"`, SharedPart, "next")
	f.Add(strconv.Quote(strings.Repeat("z", 130)), 16_250, "")
	f.Fuzz(func(t *testing.T, id string, n int, next string) {
		if n < 0 || n > 1<<22 {
			return
		}
		checkWire(t, listReply(id, n, next), detailsReply)
	})
}

// TestSharedAnswersWire: the codec sends each shared answer of procmsg.go as
// its encoding made once, byte for byte what the proto codec would send,
// without encoding it again; any other message still goes through the
// proto codec.
func TestSharedAnswersWire(t *testing.T) {
	c := NewCodec()
	for _, m := range []*extprocv3.ProcessingResponse{
		RemoveClusterHeader, ContinueResponseHeaders, ContinueResponseBody, ResponseTrailers,
	} {
		want, err := c.CodecV2.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Materialize(), want.Materialize()) {
			t.Errorf("%v: sent %x, want %x", m, got.Materialize(), want.Materialize())
		}
		if sharedWire(m) == nil {
			t.Errorf("%v: not sent pre-encoded", m)
		}
		if n := testing.AllocsPerRun(20, func() { _, _ = c.Marshal(m) }); n != 0 {
			t.Errorf("%v: %v allocations to send, want 0", m, n)
		}
	}
	// An equal message that is not the shared one is encoded as usual.
	other := ResponseHeaders(&extprocv3.CommonResponse{})
	if sharedWire(other) != nil {
		t.Error("an unshared message was taken for a shared one")
	}
	got, err := c.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	if want := MustMarshal(other); !bytes.Equal(got.Materialize(), want) {
		t.Errorf("unshared message: sent %x, want %x", got.Materialize(), want)
	}
}
