package extproc

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"weak"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

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
// the same tools/list answers as one building every ProcessingResponse,
// byte for byte as gRPC's proto codec encodes that one, and that it does
// prepare them.
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
			m, ok := x.next(seq[1]).(*procmsg.Wire)
			if !ok {
				t.Fatalf("id %s: the answer was not prepared", id)
			}
			var err error
			if got, err = m.Message(); err != nil {
				t.Fatal(err)
			}
			want = y.handle(seq[1])
			if want.GetImmediateResponse().GetStatus().GetCode() != 200 {
				t.Fatalf("id %s: unexpected answer %v", id, want)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("id %s stateless %v: prepared answer differs:\n got %v\nwant %v", id, stateless, got, want)
			}
			wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Encoded(), wantBytes) {
				t.Fatalf("id %s stateless %v: prepared answer is not the bytes of the built one", id, stateless)
			}
		}
	}
}

// TestToolsListGzipPrepared checks that a client accepting gzip gets, in
// both eras, the prepared answer a server building every
// ProcessingResponse gives, byte for byte as gRPC's proto codec would
// encode that one, gzip-coded, and that it decompresses to the
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
	// encoded is the answer to seq as gRPC sends it: the prepared bytes,
	// or a built message as proto.Marshal encodes it.
	encoded := func(srv *Server, seq []*extprocv3.ProcessingRequest) []byte {
		x := srv.newRequest(context.Background())
		defer x.finish()
		x.handle(seq[0])
		switch m := x.next(seq[1]).(type) {
		case *procmsg.Wire:
			return m.Encoded()
		case *extprocv3.ProcessingResponse:
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return b
		default:
			t.Fatalf("answer %T", m)
		}
		return nil
	}
	answer := func(srv *Server, seq []*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		r := &extprocv3.ProcessingResponse{}
		if err := proto.Unmarshal(encoded(srv, seq), r); err != nil {
			t.Fatal(err)
		}
		return r
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
				if !bytes.Equal(encoded(prepared, seq), encoded(built, seq)) {
					t.Fatalf("stateless %v id %s: prepared gzip answer is not the bytes of the built one", stateless, id)
				}
				got := answer(prepared, seq)
				if !hasHeader(got, "content-encoding", "gzip") || !hasHeader(got, "vary", "Accept-Encoding") {
					t.Fatalf("gzip answer headers %v", got.GetImmediateResponse().GetHeaders())
				}
				if dec := gunzip(t, got.GetImmediateResponse().GetBody()); !bytes.Equal(dec, plain) {
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
	if m, ok := answer().(*procmsg.Wire); wire && !ok {
		t.Fatal("the answer is not prepared")
	} else if wire && gzip && n >= 1000 {
		if r, err := m.Message(); err != nil || !hasHeader(r, "content-encoding", "gzip") {
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

// gunzip is b decompressed.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return dec
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
				case *procmsg.Wire:
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
	m, ok := x.next(seq[1]).(*procmsg.Wire)
	if !ok {
		t.Fatal("the answer is not prepared")
	}
	if r, err := m.Message(); err != nil || !hasHeader(r, "content-encoding", "gzip") {
		t.Fatalf("not a gzip answer (%v)", err)
	}
	return weak.Make(shared)
}

// swappableRoutes serves route "core" at /mcp/core from the snapshot last
// stored, as the registry does after a Portal change.
type swappableRoutes struct {
	snap atomic.Pointer[registry.Snapshot]
}

func (r *swappableRoutes) Lookup(path string) (string, *registry.Snapshot, bool) {
	if path != "/mcp/core" {
		return "", nil, false
	}
	return "core", r.snap.Load(), true
}

// describedSnapshot is route "core" with n tools described as said.
func describedSnapshot(t testing.TB, n int, said string) *registry.Snapshot {
	t.Helper()
	m := &registry.Manifest{}
	for i := range n {
		m.Tools = append(m.Tools, registry.ManifestTool{Name: fmt.Sprintf("tool_%05d", i), Version: "1.0.0",
			Description: said + " " + strconv.Itoa(i), InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	route := registry.Route{Key: "core", ToolServices: []registry.ToolService{{Name: "svc", URL: "http://svc.tools.svc:8080"}}}
	return buildSnapshot(t, route, map[string]*registry.Manifest{"svc": m})
}

// TestToolsListGzipFollowsSnapshot checks, over gRPC on loopback, that the
// compressed list kept for a snapshot is not served once the route has a
// new one: after each change the gzip answer decompresses to the new
// snapshot's list, and asking again gives the same answer.
func TestToolsListGzipFollowsSnapshot(t *testing.T) {
	routes := &swappableRoutes{}
	routes.snap.Store(describedSnapshot(t, 300, "first"))
	srv, err := New(Config{}, routes, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := serve(t, srv.GRPCServerOptions(), srv.Register)
	seq := listRequest("1", false, "accept-encoding", "gzip")
	listed := func() string {
		t.Helper()
		var last *extprocv3.ProcessingResponse
		timeRequest(t, client, seq, func(r *extprocv3.ProcessingResponse) bool { last = r; return isImmediate(r) })
		if !hasHeader(last, "content-encoding", "gzip") {
			t.Fatalf("not a gzip answer: %v", last.GetImmediateResponse().GetHeaders())
		}
		body := gunzip(t, last.GetImmediateResponse().GetBody())
		var reply struct {
			Result struct {
				Tools []struct {
					Description string `json:"description"`
				} `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(body, &reply); err != nil {
			t.Fatalf("decompressed answer: %v", err)
		}
		if len(reply.Result.Tools) == 0 {
			t.Fatal("no tools listed")
		}
		return reply.Result.Tools[0].Description
	}
	for _, said := range []string{"first", "second", "third"} {
		if said != "first" {
			routes.snap.Store(describedSnapshot(t, 300, said))
		}
		for range 2 { // the first answer compresses, the second reuses it
			if got, want := listed(), said+" 0"; got != want {
				t.Fatalf("after the change to %q: listed %q, want %q", said, got, want)
			}
		}
	}
}
