package extproc

import (
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
	routes := testRoutes{"/mcp/core": {key: "core", snap: benchSnapshot(b, n)}}
	srv, err := New(Config{}, routes, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	return serve(b, srv.GRPCServerOptions(), srv.Register)
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
			resp = requestHeadersResponse(cr)
		case *extprocv3.ProcessingRequest_RequestBody:
			resp = requestBodyResponse(cr)
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp = responseHeadersResponse(cr)
		default:
			resp = responseBodyResponse(cr)
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
// also reports the p50 and p99 of one request, stream opening included.
func runSequences(b *testing.B, client extprocv3.ExternalProcessorClient, seqs [][]*extprocv3.ProcessingRequest,
	check func(*extprocv3.ProcessingResponse) bool) {
	b.Helper()
	ctx := b.Context()
	var durs []time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		seq := seqs[i%len(seqs)]
		start := time.Now()
		stream, err := client.Process(ctx)
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
		durs = append(durs, time.Since(start))
		if !check(last) {
			b.Fatalf("unexpected last reply %v", last)
		}
		if err := stream.CloseSend(); err != nil {
			b.Fatal(err)
		}
		if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
			b.Fatalf("stream end: %v", err)
		}
	}
	if len(durs) > 0 {
		slices.Sort(durs)
		b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns")
	}
}

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

func BenchmarkToolsList10k(b *testing.B) {
	runRequests(b, benchClient(b, 10_000), listSeq, isImmediate)
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
