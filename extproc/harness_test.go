package extproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// This file is the test harness: a fixed route table built with
// registry.BuildSnapshot, a real gRPC server on 127.0.0.1, and a small
// "fake Envoy" that drives one Process stream per HTTP request.

// testRoutes is a fixed path → route table.
type testRoutes map[string]testRoute

type testRoute struct {
	key  string
	snap *registry.Snapshot
}

func (r testRoutes) Lookup(path string) (string, *registry.Snapshot, bool) {
	rt, ok := r[path]
	return rt.key, rt.snap, ok
}

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["city"],"additionalProperties":false}`

// coreSnapshot is route "core": two Tool Services; weather, which wins
// "dup", has two active versions of it, so it is ambiguous.
func coreSnapshot(t testing.TB) *registry.Snapshot {
	t.Helper()
	route := registry.Route{Key: "core", ToolServices: []registry.ToolService{
		{Name: "weather", URL: "http://weather.tools.svc:8080/api"},
		{Name: "echo", URL: "http://echo.tools.svc:9000"},
	}}
	manifests := map[string]*registry.Manifest{
		"weather": {Tools: []registry.ManifestTool{
			{Name: "forecast", Version: "1.2.0", Title: "Forecast", Description: "Weather forecast for a city.",
				InputSchema: json.RawMessage(weatherSchema)},
			{Name: "dup", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "dup", Version: "2", InputSchema: json.RawMessage(`{"type":"object"}`)},
		}},
		"echo": {Tools: []registry.ManifestTool{
			{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Path: "/invoke/echo"},
			{Name: "dup", InputSchema: json.RawMessage(`{"type":"object"}`)},
		}},
	}
	return buildSnapshot(t, route, manifests)
}

func buildSnapshot(t testing.TB, route registry.Route, manifests map[string]*registry.Manifest) *registry.Snapshot {
	t.Helper()
	snap, err := registry.BuildSnapshot(route, manifests, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatalf("build snapshot: %v", err)
	}
	return snap
}

func testTable(t testing.TB) testRoutes {
	return testRoutes{
		"/mcp/core": {key: "core", snap: coreSnapshot(t)},
		"/mcp/cold": {key: "cold"}, // listed, no snapshot yet
	}
}

// lockedBuffer collects log output written by stream goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testEnv is a running extproc server and a client connection to it.
type testEnv struct {
	srv    *Server
	reg    *prometheus.Registry
	logs   *lockedBuffer
	client extprocv3.ExternalProcessorClient
}

func newTestEnv(t testing.TB, cfg Config, routes Routes) *testEnv {
	t.Helper()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	srv, err := New(cfg, routes, log, reg)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	return &testEnv{srv: srv, reg: reg, logs: logs, client: serve(t, srv.GRPCServerOptions(), srv.Register)}
}

// Envoy's default HTTP/2 stream and connection windows
// (api/envoy/config/core/v3/protocol.proto Http2ProtocolOptions
// initial_stream_window_size and initial_connection_window_size), which the
// local data plane's ext_proc client also uses (envoy/dataplane/internal/rules/rules.go): the client
// side here stands in for Envoy, so a large answer is paced by the
// WINDOW_UPDATEs Envoy would send.
const (
	envoyHTTP2StreamWindow = 16 << 20
	envoyHTTP2ConnWindow   = 24 << 20
)

// The client's receive path, set up as Envoy's rather than as grpc-go's
// defaults (docs/benchmarks.md), for every server a test or benchmark
// here starts: TOOLMESH_BENCH_GRPC_DEFAULTS=1 in the environment keeps
// grpc-go's, to compare.
//
// grpc-go's proto codec copies a message that arrived in several DATA
// frames into one buffer of its default pool before decoding it
// (encoding/proto codecV2.Unmarshal), and that pool's tiers jump from
// 32 KiB to 1 MiB and clear a buffer's whole capacity when it is taken
// (mem/buffer_pool.go, internal/mem sizedBufferPool.Get): a 61 KB answer
// costs clearing 1 MiB. Envoy's gRPC client appends a message's bytes
// to buffer slices sized to them and never cleared
// (source/common/grpc/codec.cc Decoder::frameData,
// source/common/buffer/buffer_impl.h Slice::newStorage) and parses the
// ProcessingResponse from those slices
// (source/common/grpc/typed_async_client.cc parseMessageUntyped). The
// same pool with the tiers in between (64 KiB to 512 KiB) clears at
// most twice the message; it is grpc-go's pool below 32 KiB, so the
// servers, which receive only small messages in the benchmarks, run as
// with grpc-go's.
// SetDefaultBufferPool is the one way to change the codec's pool, and it
// applies to the whole test process: every client and server alike.
//
// grpc-go reads the socket through a 32 KiB buffer; Envoy reads into a
// reservation of 8 slices of 16 KiB (source/common/buffer/buffer_impl.h
// OwnedImpl default_read_reservation_size_).
var grpcDefaults = os.Getenv("TOOLMESH_BENCH_GRPC_DEFAULTS") != ""

const envoyReadSize = 8 * (16 << 10)

func init() {
	if grpcDefaults {
		return
	}
	pool, err := mem.NewBinaryTieredBufferPool(8, 12, 14, 15, 16, 17, 18, 19, 20)
	if err != nil {
		panic(err)
	}
	experimental.SetDefaultBufferPool(pool)
}

// serve runs a gRPC server on 127.0.0.1:0 and returns a client of it.
func serve(t testing.TB, opts []grpc.ServerOption, register func(*grpc.Server), dial ...grpc.DialOption) extprocv3.ExternalProcessorClient {
	t.Helper()
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
		grpc.WithInitialWindowSize(envoyHTTP2StreamWindow), grpc.WithInitialConnWindowSize(envoyHTTP2ConnWindow),
	}
	if !grpcDefaults {
		base = append(base, grpc.WithReadBufferSize(envoyReadSize))
	}
	conn, err := grpc.NewClient(startServer(t, opts, register), append(base, dial...)...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return extprocv3.NewExternalProcessorClient(conn)
}

// startServer starts a gRPC server with opts on 127.0.0.1, stopped when
// the test ends, and returns its address.
func startServer(t testing.TB, opts []grpc.ServerOption, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	gs := grpc.NewServer(opts...)
	register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// envoy is one HTTP request's ext_proc stream, driven the way Envoy does.
type envoy struct {
	t      testing.TB
	stream extprocv3.ExternalProcessor_ProcessClient
}

func (e *testEnv) open(t testing.TB) *envoy {
	t.Helper()
	stream, err := e.client.Process(t.Context())
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	return &envoy{t: t, stream: stream}
}

// send sends one message and returns the validated reply.
func (v *envoy) send(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	v.t.Helper()
	if err := v.stream.Send(req); err != nil {
		v.t.Fatalf("send: %v", err)
	}
	resp, err := v.stream.Recv()
	if err != nil {
		v.t.Fatalf("recv: %v", err)
	}
	if err := resp.ValidateAll(); err != nil {
		v.t.Fatalf("invalid ProcessingResponse %v: %v", resp, err)
	}
	return resp
}

// close ends the stream as Envoy does and checks the server ended it
// cleanly; once it returns, the server has recorded the request.
func (v *envoy) close() {
	v.t.Helper()
	if err := v.stream.CloseSend(); err != nil {
		v.t.Fatalf("close send: %v", err)
	}
	if resp, err := v.stream.Recv(); !errors.Is(err, io.EOF) {
		v.t.Fatalf("after close: got %v, %v; want io.EOF", resp, err)
	}
}

// hdrs builds a HeaderMap the way Envoy sends it (raw_value only) from
// key/value pairs.
func hdrs(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

// post is the request headers of an MCP POST to path, with body length n,
// plus extra key/value pairs; a pair whose value is "<drop>" removes a
// default header.
func post(path string, n int, extra ...string) []string {
	base := []string{
		":method", "POST", ":path", path, ":scheme", "http", ":authority", "localhost:10000",
		"content-type", "application/json", "accept", "application/json, text/event-stream",
		"content-length", strconv.Itoa(n), "x-request-id", "req-1", "authorization", "Bearer s3cret-token",
		"user-agent", "test",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		replaced := false
		for j := 0; j+1 < len(base); j += 2 {
			if base[j] == extra[i] {
				base[j+1], replaced = extra[i+1], true
			}
		}
		if !replaced {
			base = append(base, extra[i], extra[i+1])
		}
	}
	out := base[:0]
	for i := 0; i+1 < len(base); i += 2 {
		if base[i+1] != "<drop>" {
			out = append(out, base[i], base[i+1])
		}
	}
	return out
}

// stateless is the extra headers of a 2026-07-28 request.
func stateless(method string, name ...string) []string {
	h := []string{"mcp-protocol-version", mcp.Version20260728, "mcp-method", method}
	if len(name) > 0 {
		h = append(h, "mcp-name", name[0])
	}
	return h
}

func reqHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(kv...), EndOfStream: eos}}}
}

func reqBody(body string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}}
}

func respHeaders(eos bool, kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(kv...), EndOfStream: eos}}}
}

func respBody(body string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}}
}

// responseChunk sends one chunk of a streamed response body and returns
// the body the server replaced it with.
func (v *envoy) responseChunk(s string, eos bool) string {
	v.t.Helper()
	r := v.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(s), EndOfStream: eos}}})
	return string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
}

// setOf returns the header mutation's set headers as key → value, failing
// on a header set twice, with value instead of raw_value, or without
// OVERWRITE_IF_EXISTS_OR_ADD.
func setOf(t testing.TB, m *extprocv3.HeaderMutation) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range m.GetSetHeaders() {
		h := o.GetHeader()
		if h.GetValue() != "" {
			t.Errorf("header %q set with value, want raw_value only", h.GetKey())
		}
		if o.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
			t.Errorf("header %q append action %v, want OVERWRITE_IF_EXISTS_OR_ADD", h.GetKey(), o.GetAppendAction())
		}
		if _, dup := out[h.GetKey()]; dup {
			t.Errorf("header %q set twice", h.GetKey())
		}
		out[h.GetKey()] = string(h.GetRawValue())
	}
	return out
}

// rpcReply is a decoded JSON-RPC response.
type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeReply(t testing.TB, body []byte) rpcReply {
	t.Helper()
	var r rpcReply
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("reply is not JSON: %v\n%s", err, body)
	}
	if r.JSONRPC != "2.0" {
		t.Fatalf("reply jsonrpc = %q, want 2.0: %s", r.JSONRPC, body)
	}
	return r
}

// callResult is a decoded CallToolResult.
type callResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

func decodeResult(t testing.TB, body []byte, wantID string) callResult {
	t.Helper()
	r := decodeReply(t, body)
	if string(r.ID) != wantID {
		t.Errorf("id = %s, want %s", r.ID, wantID)
	}
	if r.Error != nil {
		t.Fatalf("got JSON-RPC error %+v, want a result: %s", r.Error, body)
	}
	var res callResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("result is not a CallToolResult: %v\n%s", err, body)
	}
	return res
}

// metricValue returns the value of the counter (or the sample count of the
// histogram) name with exactly the given labels; 0 if absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
					continue next
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// handle is next with a wire-format answer decoded, for callers that look
// at the message.
func (x *request) handle(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch m := x.next(req).(type) {
	case *extprocv3.ProcessingResponse:
		return m
	case *procmsg.Wire:
		resp, err := m.Message()
		if err != nil {
			panic(err) // procmsg wrote it: a bug, caught per request
		}
		return resp
	}
	return nil
}
