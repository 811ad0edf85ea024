package extproc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/metadata"

	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// BenchmarkFederatedSSE is the extproc server's own part of a federated
// tools/call as `toolmesh run` and Envoy make it by default (issue 25;
// e2e BenchmarkFederatedToolsCall measures the whole path): the listener
// declares its level (wire.ListenerLevelMetadata), so the request-headers
// reply switches the response body to FULL_DUPLEX_STREAMED on a route with
// a federated server (duplexresp.go); the server answers with an event
// stream carrying the result (as go-sdk does), which arrives as the event's
// chunk and an empty last chunk, the route timeout header set (routed
// deadline). Each iteration replays that script over grpc-go on loopback
// against the server and against echoServer (the no-op baseline), as
// BenchmarkVsBaseline does.
//
//   - era=2026-07-28: a 2026 client of a 2026 server: the events pass
//     unchanged, with the deadline (duplexChunk).
//   - era=2025-11-25: a legacy client of a legacy server on the gateway's
//     shared session: the id is remapped and the events rewritten
//     (eventstream.Translator), with the deadline.
//   - era=2025-11-25,session: the same with the Mcp-Session-Id the gateway
//     gives a legacy client that declared capabilities (as go-sdk's client
//     does: roots), which every request carries and the server opens
//     (extproc/session).
//
// p50-ns and baseline-p50-ns are the medians of one request (stream
// opening included), x-baseline their ratio, added-p50-ns their
// difference; cpu-ns/call and baseline-cpu-ns/call the CPU time of the
// whole process (client, server, gRPC) per call, measured after the timed
// loop, and added-cpu-ns/call their difference: what the server costs
// beyond a server that does nothing. allocs/op and B/op count client,
// server and baseline together.
func BenchmarkFederatedSSE(b *testing.B) {
	client, tok := fedSSEClient(b)
	echo := echoClient(b)
	for _, c := range []struct{ era, session string }{
		{mcp.Version20260728, ""}, {mcp.Version20251125, ""}, {mcp.Version20251125, tok},
	} {
		era, name := c.era, "era="+c.era
		if c.session != "" {
			name += ",session"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var prod, base []time.Duration
			for i := 0; b.Loop(); i++ {
				prod = append(prod, timeFedSSE(b, client, era, c.session, i, true))
				base = append(base, timeFedSSE(b, echo, era, c.session, i, false))
			}
			// CPU after the timed loop, on calls of their own: the process's
			// (client, server and gRPC together) per call, through the
			// server and through the no-op baseline.
			n := min(len(prod), fedCPUCalls)
			cpu := func(cl extprocv3.ExternalProcessorClient, check bool) float64 {
				c0 := processCPU(b)
				for i := range n {
					timeFedSSE(b, cl, era, c.session, i, check)
				}
				return float64((processCPU(b) - c0).Nanoseconds()) / float64(n)
			}
			pCPU, bCPU := cpu(client, true), cpu(echo, false)
			b.ReportMetric(pCPU, "cpu-ns/call")
			b.ReportMetric(bCPU, "baseline-cpu-ns/call")
			b.ReportMetric(pCPU-bCPU, "added-cpu-ns/call")
			slices.Sort(prod)
			slices.Sort(base)
			b.ReportMetric(float64(p50(prod).Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(p50(base).Nanoseconds()), "baseline-p50-ns")
			b.ReportMetric(float64((p50(prod) - p50(base)).Nanoseconds()), "added-p50-ns")
			b.ReportMetric(float64(p50(prod))/float64(p50(base)), "x-baseline")
		})
	}
}

// fedCPUCalls is how many calls of each kind BenchmarkFederatedSSE times
// for CPU after its timed loop (fewer when the loop made fewer).
const fedCPUCalls = 1000

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFederatedSSEBench runs the benchmark's script once per era, with its
// checks, so `go test` exercises it.
func TestFederatedSSEBench(t *testing.T) {
	client, tok := fedSSEClient(t)
	for _, c := range []struct{ era, session string }{
		{mcp.Version20260728, ""}, {mcp.Version20251125, ""}, {mcp.Version20251125, tok},
	} {
		for i := range 3 {
			timeFedSSE(t, client, c.era, c.session, i, true)
		}
	}
}

// fedSSEClient serves fedSSERoutes, its legacy server's handshake
// answered by newBenchLegacyUpstream, and returns a legacy client's
// session token for the route, as the server mints it at initialize for a
// client that declared roots.
func fedSSEClient(tb testing.TB) (extprocv3.ExternalProcessorClient, string) {
	srv, err := New(Config{Upstreams: fakeUpstreams{}}, fedSSERoutes(tb, newBenchLegacyUpstream(tb).URL), nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := srv.Runtime().SessionKeys.Mint(session.State{Route: "fb", Version: mcp.Version20251125, Caps: uint8(session.CapRoots)})
	if err != nil {
		tb.Fatal(err)
	}
	return serve(tb, srv.GRPCServerOptions(), srv.Register), tok
}

// fedSSERoutes is route "fb": a 2026 server "new" (tools new_*) and a
// legacy one "old" at oldURL (tools old_*), neither declaring logging.
func fedSSERoutes(tb testing.TB, oldURL string) testRoutes {
	route := registry.Route{Key: "fb", ToolServices: []registry.ToolService{
		{Name: "new", URL: "http://new.example/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "new_"},
		{Name: "old", URL: oldURL + "/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "old_"},
	}}
	obj := json.RawMessage(`{"type":"object"}`)
	snap := buildSnapshot(tb, route, map[string]*registry.Manifest{
		"new": {Tools: []registry.ManifestTool{{Name: "echo", InputSchema: obj}},
			MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20260728}},
		"old": {Tools: []registry.ManifestTool{{Name: "echo", InputSchema: obj}},
			MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20251125}},
	})
	return testRoutes{"/mcp/fb": {key: "fb", snap: snap}}
}

// newBenchLegacyUpstream answers only the legacy handshake (session "s1"):
// the benchmark's calls never reach it, their answers are scripted.
func newBenchLegacyUpstream(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		if m.Method != "initialize" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"old","version":"1"}}}`)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// timeFedSSE runs one federated call's ext_proc stream and returns how long
// it took until the last reply arrived. sessionID is the client's
// Mcp-Session-Id (legacy era; "" for none). check: the replies are the
// product's (the result reaches the client with its id, the stream ends);
// else any reply will do (the baseline).
func timeFedSSE(tb testing.TB, client extprocv3.ExternalProcessorClient, era, sessionID string, i int, check bool) time.Duration {
	tb.Helper()
	id := `"c` + strings.Repeat("x", i%3) + `"`
	var body string
	var extra []string
	if era == mcp.Version20260728 {
		body = `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"new_echo","arguments":{"word":"hi"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		extra = stateless("tools/call", "new_echo")
	} else {
		body = `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"old_echo","arguments":{"word":"hi"}}}`
		extra = []string{"mcp-protocol-version", era}
		if sessionID != "" {
			extra = append(extra, "mcp-session-id", sessionID)
		}
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), wire.ListenerLevelMetadata, "1")
	start := time.Now()
	stream, err := client.Process(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	exchange := func(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		if err := stream.Send(req); err != nil {
			tb.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			tb.Fatal(err)
		}
		return resp
	}
	exchange(reqHeaders(false, post("/mcp/fb", len(body), extra...)...))
	routed := exchange(reqBody(body))
	upID := id
	if check {
		up := routed.GetRequestBody().GetResponse().GetBodyMutation().GetBody()
		if up == nil {
			tb.Fatalf("%s: the call was not routed: %v", era, routed)
		}
		upID = string(mcp.Member(up, "id"))
	}
	exchange(respHeaders(false, ":status", "200", "content-type", "text/event-stream",
		"x-envoy-upstream-service-time", "1", wire.RouteTimeoutHeader, "15000"))
	ev := exchange(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":` + upID + `,"result":{"content":[{"type":"text","text":"hi"}]}}` + "\n\n")}}})
	last := exchange(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{EndOfStream: true}}})
	d := time.Since(start)
	if check {
		got := ev.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if !strings.Contains(string(got.GetBody()), `"id":`+id+`,"result"`) ||
			!last.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream() {
			tb.Fatalf("%s: event %q, last %v", era, got.GetBody(), last)
		}
	}
	if err := stream.CloseSend(); err != nil {
		tb.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		tb.Fatalf("stream end: %v", err)
	}
	return d
}
