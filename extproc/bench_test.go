package extproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/registry"
)

// Benchmarks run whole requests over a real gRPC stream on loopback, one
// stream per request as Envoy opens them. The EchoBaseline benchmarks drive
// the same message sequences against a bare processor that answers every
// message with an empty CommonResponse: the difference is toolmesh's own
// cost, the rest is gRPC.

// benchSnapshot is a route "core" of n tools spread over Tool Services of
// at most 1000 tools each.
func benchSnapshot(b testing.TB, n int) *registry.Snapshot {
	b.Helper()
	route := registry.Route{Key: "core"}
	manifests := map[string]*registry.Manifest{}
	for i := 0; i < n; i++ {
		svc := fmt.Sprintf("svc-%d", i/1000)
		m := manifests[svc]
		if m == nil {
			m = &registry.Manifest{}
			manifests[svc] = m
			route.ToolServices = append(route.ToolServices,
				registry.ToolService{Name: svc, URL: "http://" + svc + ".tools.svc:8080"})
		}
		m.Tools = append(m.Tools, registry.ManifestTool{
			Name:        fmt.Sprintf("tool_%05d", i),
			Version:     "1.0.0",
			Description: "Looks up things of kind " + strconv.Itoa(i) + " and returns them as JSON.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["q"]}`),
		})
	}
	return buildSnapshot(b, route, manifests)
}

// benchClient starts the toolmesh server over a snapshot of n tools.
func benchClient(b *testing.B, n int) extprocv3.ExternalProcessorClient {
	b.Helper()
	srv := benchServer(b, n)
	return serve(b, srv.GRPCServerOptions(), srv.Register)
}

// benchServer is a toolmesh server over a snapshot of n tools.
func benchServer(b *testing.B, n int) *Server {
	b.Helper()
	routes := testRoutes{"/mcp/core": {key: "core", snap: benchSnapshot(b, n)}}
	srv, err := New(Config{}, routes, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// echoServer is the baseline: an ext_proc server that does nothing.
type echoServer struct {
	extprocv3.UnimplementedExternalProcessorServer
}

func (echoServer) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		cr := &extprocv3.CommonResponse{}
		var resp *extprocv3.ProcessingResponse
		switch req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp = procmsg.RequestHeaders(cr)
		case *extprocv3.ProcessingRequest_RequestBody:
			resp = procmsg.RequestBody(cr)
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp = procmsg.ResponseHeaders(cr)
		default:
			resp = procmsg.ResponseBody(cr)
		}
		if err := stream.Send(resp); err != nil {
			return nil
		}
	}
}

func echoClient(b *testing.B) extprocv3.ExternalProcessorClient {
	b.Helper()
	return serve(b, nil, func(gs *grpc.Server) { extprocv3.RegisterExternalProcessorServer(gs, echoServer{}) })
}

var (
	listBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	listSeq  = []*extprocv3.ProcessingRequest{
		reqHeaders(false, post("/mcp/core", len(listBody), "mcp-protocol-version", "2025-11-25")...),
		reqBody(listBody),
	}
	callBody  = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tool_00003","arguments":{"q":"weather in Oslo","limit":3}}}`
	toolReply = `{"content":[{"type":"text","text":"3 results found"}]}`
	callSeq   = []*extprocv3.ProcessingRequest{
		reqHeaders(false, post("/mcp/core", len(callBody), "mcp-protocol-version", "2025-11-25")...),
		reqBody(callBody),
		respHeaders(false, ":status", "200", "content-type", "application/json", "content-length", strconv.Itoa(len(toolReply))),
		respBody(toolReply),
	}
)

// runRequests runs one stream per iteration carrying seq, reading one reply
// per message, and checks the last reply is of the wanted kind.
func runRequests(b *testing.B, client extprocv3.ExternalProcessorClient, seq []*extprocv3.ProcessingRequest,
	check func(*extprocv3.ProcessingResponse) bool) {
	b.Helper()
	runSequences(b, client, [][]*extprocv3.ProcessingRequest{seq}, check)
}

// runSequences is runRequests cycling through seqs, one per iteration. It
// also reports the p50 and p99 of one request, stream opening included, and
// returns the requests' durations, sorted.
func runSequences(b *testing.B, client extprocv3.ExternalProcessorClient, seqs [][]*extprocv3.ProcessingRequest,
	check func(*extprocv3.ProcessingResponse) bool) []time.Duration {
	b.Helper()
	var durs []time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		durs = append(durs, timeRequest(b, client, seqs[i%len(seqs)], check))
	}
	reportPercentiles(b, durs, "")
	return durs
}

// timeRequest runs one stream carrying seq and returns how long it took
// until the last reply arrived.
func timeRequest(b testing.TB, client extprocv3.ExternalProcessorClient, seq []*extprocv3.ProcessingRequest,
	check func(*extprocv3.ProcessingResponse) bool) time.Duration {
	start := time.Now()
	stream, err := client.Process(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	var last *extprocv3.ProcessingResponse
	for _, req := range seq {
		if err := stream.Send(req); err != nil {
			b.Fatal(err)
		}
		if last, err = stream.Recv(); err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(start)
	if !check(last) {
		b.Fatalf("unexpected last reply %v", last)
	}
	if err := stream.CloseSend(); err != nil {
		b.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		b.Fatalf("stream end: %v", err)
	}
	return d
}

// reportPercentiles sorts durs and reports their p50 and p99 as
// <prefix>p50-ns and <prefix>p99-ns.
func reportPercentiles(b *testing.B, durs []time.Duration, prefix string) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	b.ReportMetric(float64(p50(durs).Nanoseconds()), prefix+"p50-ns")
	b.ReportMetric(float64(p99(durs).Nanoseconds()), prefix+"p99-ns")
}

func p50(sorted []time.Duration) time.Duration { return sorted[len(sorted)/2] }
func p99(sorted []time.Duration) time.Duration { return sorted[len(sorted)*99/100] }

func isImmediate(r *extprocv3.ProcessingResponse) bool {
	return r.GetImmediateResponse().GetStatus().GetCode() == 200
}

func isResult(r *extprocv3.ProcessingResponse) bool {
	return len(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()) > 0
}

func anyReply(r *extprocv3.ProcessingResponse) bool { return r != nil }

func BenchmarkToolsList(b *testing.B) {
	runRequests(b, benchClient(b, 10), listSeq, isImmediate)
}

// listEncodings are the codings a tools/list client asks for: none (an
// Envoy client without Accept-Encoding), and gzip, which most MCP clients'
// HTTP stacks send.
var listEncodings = []struct{ name, acceptEncoding string }{
	{"identity", ""},
	{"gzip", "gzip, deflate"},
}

// listSeqAccepting is listSeq with the given Accept-Encoding ("" for none).
func listSeqAccepting(acceptEncoding string) []*extprocv3.ProcessingRequest {
	if acceptEncoding == "" {
		return listSeq
	}
	return []*extprocv3.ProcessingRequest{
		reqHeaders(false, post("/mcp/core", len(listBody), "mcp-protocol-version", "2025-11-25",
			"accept-encoding", acceptEncoding)...),
		reqBody(listBody),
	}
}

// BenchmarkToolsList10k lists a 10,000-tool route through the ext_proc
// stream, uncompressed and gzip-coded. After the timed loop it runs as many
// requests against the floor server (floorServer) answering the same bytes,
// and reports the floor's p50/p99 and the ratios to it: what is left above
// 1 is toolmesh's own cost.
func BenchmarkToolsList10k(b *testing.B) {
	srv := benchServer(b, 10_000)
	client := serveEnvoy(b, srv.GRPCServerOptions(), srv.Register)
	for _, enc := range listEncodings {
		b.Run("encoding="+enc.name, func(b *testing.B) {
			seq := listSeqAccepting(enc.acceptEncoding)
			answer := preparedAnswer(b, srv, seq, enc.acceptEncoding != "")
			floor := floorClient(b, answer)
			durs := runSequences(b, client, [][]*extprocv3.ProcessingRequest{seq}, isImmediate)
			floorDurs := make([]time.Duration, 0, len(durs))
			for range len(durs) {
				floorDurs = append(floorDurs, timeRequest(b, floor, seq, isImmediate))
			}
			reportPercentiles(b, floorDurs, "floor-")
			if len(durs) > 0 {
				b.ReportMetric(float64(p50(durs))/float64(p50(floorDurs)), "p50/floor")
				b.ReportMetric(float64(p99(durs))/float64(p99(floorDurs)), "p99/floor")
				b.ReportMetric(float64(answer.Len()), "msg-B")
			}
		})
	}
}

// BenchmarkToolsList10kFloor is the physical floor of BenchmarkToolsList10k:
// a bare ext_proc server with toolmesh's gRPC options that answers the same
// two messages with a CommonResponse and the 10,000-tool answer marshalled
// beforehand, so its cost is gRPC transport and the client's decoding only.
func BenchmarkToolsList10kFloor(b *testing.B) {
	srv := benchServer(b, 10_000)
	srv.GRPCServerOptions() // prepared answers
	for _, enc := range listEncodings {
		b.Run("encoding="+enc.name, func(b *testing.B) {
			seq := listSeqAccepting(enc.acceptEncoding)
			floor := floorClient(b, preparedAnswer(b, srv, seq, enc.acceptEncoding != ""))
			runRequests(b, floor, seq, isImmediate)
		})
	}
}

// preparedAnswer is srv's answer to seq, in one buffer; gzip says whether
// it must be gzip-coded. Asking for it also builds what the server builds
// on first use.
func preparedAnswer(b *testing.B, srv *Server, seq []*extprocv3.ProcessingRequest, gzip bool) *procmsg.Wire {
	b.Helper()
	x := srv.newRequest(context.Background())
	defer x.finish()
	x.next(seq[0])
	m, ok := x.next(seq[1]).(*procmsg.Wire)
	if !ok {
		b.Fatal("the answer is not prepared")
	}
	resp, err := m.Message()
	if err != nil {
		b.Fatal(err)
	}
	coded := false
	for _, h := range resp.GetImmediateResponse().GetHeaders().GetSetHeaders() {
		coded = coded || (h.GetHeader().GetKey() == "content-encoding" && string(h.GetHeader().GetRawValue()) == "gzip")
	}
	if coded != gzip {
		b.Fatalf("gzip-coded %v, want %v", coded, gzip)
	}
	return procmsg.WireOf(procmsg.MustMarshal(resp)) // the same message, one buffer of its own
}

// floorServer answers request headers with a CommonResponse and anything
// else with answer, sent as marshalled.
type floorServer struct {
	extprocv3.UnimplementedExternalProcessorServer
	answer *procmsg.Wire
}

func (f floorServer) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	headers := procmsg.RequestHeaders(&extprocv3.CommonResponse{})
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		var resp any = f.answer
		if _, ok := req.GetRequest().(*extprocv3.ProcessingRequest_RequestHeaders); ok {
			resp = headers
		}
		if err := stream.SendMsg(resp); err != nil {
			return nil
		}
	}
}

// floorClient starts a floorServer with toolmesh's gRPC server options.
func floorClient(b *testing.B, answer *procmsg.Wire) extprocv3.ExternalProcessorClient {
	b.Helper()
	opts, err := New(Config{}, testRoutes{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	return serveEnvoy(b, opts.GRPCServerOptions(), func(gs *grpc.Server) {
		extprocv3.RegisterExternalProcessorServer(gs, floorServer{answer: answer})
	})
}

// serveEnvoy starts a gRPC server with opts and returns the client that
// stands in for Envoy: grpc-go with Envoy's HTTP/2 windows, as the local
// data plane's ext_proc client.
func serveEnvoy(b *testing.B, opts []grpc.ServerOption, register func(*grpc.Server)) extprocv3.ExternalProcessorClient {
	b.Helper()
	return serve(b, opts, register)
}

func BenchmarkToolsCall(b *testing.B) {
	runRequests(b, benchClient(b, 10), callSeq, isResult)
}

func BenchmarkEchoBaselineToolsList(b *testing.B) {
	runRequests(b, echoClient(b), listSeq, anyReply)
}

func BenchmarkEchoBaselineToolsCall(b *testing.B) {
	runRequests(b, echoClient(b), callSeq, anyReply)
}
