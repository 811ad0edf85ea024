package extproc

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"weak"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/mcp"
)

// checkWire checks that the wire-format answer of r decodes to the message
// immediate builds for the same reply.
func checkWire(t *testing.T, r *mcp.Reply, details string) {
	t.Helper()
	flat := &mcp.Reply{Status: r.Status, Headers: r.Headers, Body: append([]byte(nil), r.Body...),
		Parts: append([][]byte(nil), r.Parts...)}
	want := immediate(flat, details)
	m, err := wireImmediate(r, details)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.message()
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("wire message differs:\n got %v\nwant %v", got, want)
	}
	if n := m.bufs.Len(); n != proto.Size(want) {
		t.Fatalf("wire message is %d bytes, the built one %d", n, proto.Size(want))
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
	// Item sizes on both sides of sharedPart and of the varint boundaries
	// of the body and message lengths (2^7, 2^14, 2^21).
	sizes := []int{0, 1, 50, 100, 127, 128, 200, sharedPart - 60, sharedPart - 1, sharedPart, sharedPart + 1,
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
		r := listReply("7", sharedPart*2, "")
		r.Body = []byte(`{"jsonrpc"`)
		checkWire(t, r, detailsReply)
	})
	t.Run("no headers", func(t *testing.T) {
		r := listReply("7", 10, "")
		r.Headers = nil
		checkWire(t, r, "")
	})
	t.Run("large part first and last", func(t *testing.T) {
		big := bytes.Repeat([]byte("y"), sharedPart)
		checkWire(t, &mcp.Reply{Status: 200, Parts: [][]byte{big, []byte("1"), big}}, detailsReply)
	})
}

func FuzzWireImmediate(f *testing.F) {
	f.Add(`1`, 10, "")
	f.Add(`"abc"`, sharedPart, "next")
	f.Add(strconv.Quote(strings.Repeat("z", 130)), 16_250, "")
	f.Fuzz(func(t *testing.T, id string, n int, next string) {
		if n < 0 || n > 1<<22 {
			return
		}
		checkWire(t, listReply(id, n, next), detailsReply)
	})
}

// listRequest is a tools/list request of the given era with JSON-RPC id id.
func listRequest(id string, stateless bool, extra ...string) []*extprocv3.ProcessingRequest {
	if !stateless {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`
		return []*extprocv3.ProcessingRequest{
			reqHeaders(false, post("/mcp/core", len(body), append([]string{"mcp-protocol-version", "2025-11-25"}, extra...)...)...),
			reqBody(body),
		}
	}
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	return []*extprocv3.ProcessingRequest{
		reqHeaders(false, post("/mcp/core", len(body), append([]string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list"}, extra...)...)...),
		reqBody(body),
	}
}

// TestToolsListPrepared checks that a server sending prepared answers gives
// the same tools/list answers as one building every ProcessingResponse, and
// that it does prepare them.
func TestToolsListPrepared(t *testing.T) {
	routes := testRoutes{"/mcp/core": {key: "core", snap: benchSnapshot(t, 300)}}
	newServer := func(wire bool) *Server {
		srv, err := New(Config{}, routes, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if wire {
			srv.GRPCServerOptions()
		}
		return srv
	}
	prepared, built := newServer(true), newServer(false)
	for _, stateless := range []bool{false, true} {
		for _, id := range []string{"1", `"x"`, strconv.Quote(strings.Repeat("q", 300)), "12345678901234567890"} {
			var got, want *extprocv3.ProcessingResponse
			x, y := prepared.newRequest(context.Background()), built.newRequest(context.Background())
			seq := listRequest(id, stateless)
			x.handle(seq[0])
			y.handle(seq[0])
			m, ok := x.next(seq[1]).(*wireMessage)
			if !ok {
				t.Fatalf("id %s: the answer was not prepared", id)
			}
			var err error
			if got, err = m.message(); err != nil {
				t.Fatal(err)
			}
			want = y.handle(seq[1])
			if want.GetImmediateResponse().GetStatus().GetCode() != 200 {
				t.Fatalf("id %s: unexpected answer %v", id, want)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("id %s stateless %v: prepared answer differs:\n got %v\nwant %v", id, stateless, got, want)
			}
		}
	}
}

// TestToolsListGzipPrepared checks that a client accepting gzip gets, in
// both eras, the prepared answer a server building every
// ProcessingResponse gives, gzip-coded, and that it decompresses to the
// identity answer; and that a client refusing gzip gets the identity answer.
func TestToolsListGzipPrepared(t *testing.T) {
	routes := testRoutes{"/mcp/core": {key: "core", snap: benchSnapshot(t, 300)}}
	prepared, err := New(Config{}, routes, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	prepared.GRPCServerOptions()
	built, err := New(Config{}, routes, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(srv *Server, seq []*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		x := srv.newRequest(context.Background())
		defer x.finish()
		x.handle(seq[0])
		switch m := x.next(seq[1]).(type) {
		case *wireMessage:
			r, err := m.message()
			if err != nil {
				t.Fatal(err)
			}
			return r
		case *extprocv3.ProcessingResponse:
			return m
		default:
			t.Fatalf("answer %T", m)
		}
		return nil
	}
	for _, stateless := range []bool{false, true} {
		for _, id := range []string{"1", strconv.Quote(strings.Repeat("q", 300))} {
			identity := answer(prepared, listRequest(id, stateless))
			plain := identity.GetImmediateResponse().GetBody()
			if !hasHeader(identity, "vary", "Accept-Encoding") || hasHeader(identity, "content-encoding", "gzip") {
				t.Fatalf("identity answer headers %v", identity.GetImmediateResponse().GetHeaders())
			}
			for _, ae := range []string{"gzip", "deflate, gzip;q=0.8"} {
				seq := listRequest(id, stateless, "accept-encoding", ae)
				got, want := answer(prepared, seq), answer(built, seq)
				if !proto.Equal(got, want) {
					t.Fatalf("stateless %v id %s: prepared gzip answer differs from the built one", stateless, id)
				}
				if !hasHeader(got, "content-encoding", "gzip") || !hasHeader(got, "vary", "Accept-Encoding") {
					t.Fatalf("gzip answer headers %v", got.GetImmediateResponse().GetHeaders())
				}
				zr, err := gzip.NewReader(bytes.NewReader(got.GetImmediateResponse().GetBody()))
				if err != nil {
					t.Fatal(err)
				}
				dec, err := io.ReadAll(zr)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dec, plain) {
					t.Fatalf("stateless %v id %s: decompressed answer differs from the identity one", stateless, id)
				}
			}
			refused := answer(prepared, listRequest(id, stateless, "accept-encoding", "gzip;q=0, identity"))
			if !proto.Equal(refused, identity) {
				t.Fatalf("gzip;q=0: not the identity answer")
			}
		}
	}
}

// listCost is the allocations and bytes allocated by the server answering
// one tools/list on a route of n tools (gRPC left out), to a client that
// asks for no coding, or for gzip.
func listCost(t *testing.T, n int, wire, gzip bool) (allocs float64, bytesPerOp uint64) {
	routes := testRoutes{"/mcp/core": {key: "core", snap: benchSnapshot(t, n)}}
	srv, err := New(Config{}, routes, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if wire {
		srv.GRPCServerOptions()
	}
	seq := listRequest("1", false)
	if gzip {
		seq = listSeqAccepting("gzip")
	}
	answer := func() any {
		x := srv.newRequest(context.Background())
		defer x.finish()
		x.next(seq[0])
		return x.next(seq[1])
	}
	// The first answer builds what is built once (the gzip form).
	if m, ok := answer().(*wireMessage); wire && !ok {
		t.Fatal("the answer is not prepared")
	} else if wire && gzip && n >= 1000 {
		if r, err := m.message(); err != nil || !hasHeader(r, "content-encoding", "gzip") {
			t.Fatalf("%d tools: not gzip-coded (%v)", n, err)
		}
	}
	run := func() {
		if answer() == nil {
			t.Fatal("no answer")
		}
	}
	const runs = 50
	allocs = testing.AllocsPerRun(runs, run)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		run()
	}
	runtime.ReadMemStats(&after)
	return allocs, (after.TotalAlloc - before.TotalAlloc) / runs
}

// TestToolsListCostFlat checks that answering a 10,000-tool tools/list
// allocates as often, and about as much, as a 100-tool one, uncompressed
// and gzip-coded: the list is not copied, encoded or compressed per
// request. The same measure without prepared answers shows it would see a
// copy of the list.
func TestToolsListCostFlat(t *testing.T) {
	list, _, _ := benchSnapshot(t, 10_000).ToolsPage("")
	listSize := len(list)
	for _, gzip := range []bool{false, true} {
		smallAllocs, smallBytes := listCost(t, 100, true, gzip)
		bigAllocs, bigBytes := listCost(t, 10_000, true, gzip)
		t.Logf("prepared, gzip %v: 100 tools %.0f allocs %d B, 10k tools %.0f allocs %d B (list %d B)",
			gzip, smallAllocs, smallBytes, bigAllocs, bigBytes, listSize)
		if bigAllocs > smallAllocs+2 {
			t.Errorf("gzip %v: 10k tools: %.0f allocations per request, 100 tools: %.0f", gzip, bigAllocs, smallAllocs)
		}
		if bigBytes > smallBytes+uint64(listSize)/20 {
			t.Errorf("gzip %v: 10k tools: %d B per request, 100 tools: %d B; the list is %d B", gzip, bigBytes, smallBytes, listSize)
		}
	}

	// Negative control: built answers copy the list at least once (less
	// the 100-tool list).
	_, builtSmall := listCost(t, 100, false, false)
	_, builtBig := listCost(t, 10_000, false, false)
	t.Logf("built: 100 tools %d B, 10k tools %d B", builtSmall, builtBig)
	if builtBig < builtSmall+uint64(listSize)*9/10 {
		t.Errorf("the measure misses the copy of built answers: %d B vs %d B, list %d B", builtBig, builtSmall, listSize)
	}
}

// hasHeader reports whether an ImmediateResponse sets header key to value.
func hasHeader(r *extprocv3.ProcessingResponse, key, value string) bool {
	for _, h := range r.GetImmediateResponse().GetHeaders().GetSetHeaders() {
		if h.GetHeader().GetKey() == key && string(h.GetHeader().GetRawValue()) == value {
			return true
		}
	}
	return false
}

// BenchmarkToolsList10kServer is the server's own work for one 10,000-tool
// tools/list, gRPC left out: "prepared" is what Process sends now; "built"
// answers without prepared answers and then encodes the ProcessingResponse
// with proto.Marshal, standing in for what gRPC's codec would do.
func BenchmarkToolsList10kServer(b *testing.B) {
	routes := testRoutes{"/mcp/core": {key: "core", snap: benchSnapshot(b, 10_000)}}
	seq := listRequest("1", false)
	for _, wire := range []bool{true, false} {
		name := "built"
		if wire {
			name = "prepared"
		}
		b.Run(name, func(b *testing.B) {
			srv, err := New(Config{}, routes, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if wire {
				srv.GRPCServerOptions()
			}
			b.ReportAllocs()
			for b.Loop() {
				x := srv.newRequest(context.Background())
				x.next(seq[0])
				switch m := x.next(seq[1]).(type) {
				case *wireMessage:
				case *extprocv3.ProcessingResponse:
					if _, err := proto.Marshal(m); err != nil {
						b.Fatal(err)
					}
				default:
					b.Fatalf("unexpected answer %T", m)
				}
				x.finish()
			}
		})
	}
}

// TestGzipCopyGoesWithSnapshot checks that a page's compressed copy is held
// by its snapshot only: once a server answered gzip-coded from a snapshot
// and the snapshot is no longer served, nothing keeps the copy.
func TestGzipCopyGoesWithSnapshot(t *testing.T) {
	page := servedGzip(t)
	for range 3 {
		runtime.GC()
	}
	if page.Value() != nil {
		t.Fatal("the page and its compressed copy outlive their snapshot")
	}
}

// servedGzip answers a gzip tools/list from a snapshot that nothing else
// holds and returns a weak pointer to the page it compressed.
func servedGzip(t *testing.T) weak.Pointer[mcp.SharedItems] {
	snap := benchSnapshot(t, 300)
	_, shared, _, _ := snap.ToolsPageShared("")
	if shared == nil {
		t.Fatal("the unpaged list is not shared")
	}
	srv, err := New(Config{}, testRoutes{"/mcp/core": {key: "core", snap: snap}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.GRPCServerOptions()
	x := srv.newRequest(context.Background())
	defer x.finish()
	seq := listRequest("1", false, "accept-encoding", "gzip")
	x.next(seq[0])
	m, ok := x.next(seq[1]).(*wireMessage)
	if !ok {
		t.Fatal("the answer is not prepared")
	}
	if r, err := m.message(); err != nil || !hasHeader(r, "content-encoding", "gzip") {
		t.Fatalf("not a gzip answer (%v)", err)
	}
	return weak.Make(shared)
}

// TestSharedAnswersWire: the codec sends each shared answer of proto.go as
// its encoding made once, byte for byte what the proto codec would send,
// without encoding it again; any other message still goes through the
// proto codec.
func TestSharedAnswersWire(t *testing.T) {
	c := newWireCodec()
	for _, m := range []*extprocv3.ProcessingResponse{
		removeClusterHeader, continueResponseHeaders, continueResponseBody, responseTrailersResponse,
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
	other := responseHeadersResponse(&extprocv3.CommonResponse{})
	if sharedWire(other) != nil {
		t.Error("an unshared message was taken for a shared one")
	}
	got, err := c.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustMarshal(other); !bytes.Equal(got.Materialize(), want) {
		t.Errorf("unshared message: sent %x, want %x", got.Materialize(), want)
	}
}
