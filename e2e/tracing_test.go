package e2e

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// otlpReceiver is an OTLP/gRPC trace receiver on 127.0.0.1: the
// collector's TraceService, keeping every span it is sent.
type otlpReceiver struct {
	collectortracepb.UnimplementedTraceServiceServer
	addr string

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // service.name of each resource received
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: lis.Addr().String()}
	gs := grpc.NewServer()
	collectortracepb.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return r
}

// Export implements the collector's TraceService.
func (r *otlpReceiver) Export(_ context.Context, req *collectortracepb.ExportTraceServiceRequest) (*collectortracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				r.services = append(r.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &collectortracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) snapshot() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]string(nil), r.services...)
}

// TestTracingOTLP runs `toolmesh run` exporting to an in-test OTLP
// receiver and sends a routed tools/call with a traceparent: its spans
// arrive in the client's trace, under the client's span, and the Tool
// Service is called within the same trace. No argument value is exported.
func TestTracingOTLP(t *testing.T) {
	recv := startOTLPReceiver(t)
	// The SDK's own variable: export batches every 100ms, not 5s.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	// The flag wins over the environment: nothing listens here.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
	svc := newToolService(t, "svc-a", standardTools("a_"))
	portal := writePortal(t, portalRoute{Key: "alpha", Services: []*toolService{svc}})
	gw := startGateway(t, portal, "--tracing", "--tracing-endpoint", "http://"+recv.addr,
		"--tracing-protocol", "grpc", "--tracing-resource-attributes", "deployment.environment=e2e")

	const (
		traceID = "5b8efff798038103d269b633813fc60c"
		spanID  = "eee19b7ec3c1b174"
		secret  = "e2e-s3cret-argument"
	)
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/mcp/alpha", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a_echo","arguments":{"message":"`+secret+`"}}}`))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("accept", "application/json, text/event-stream")
	req.Header.Set("mcp-protocol-version", "2025-11-25")
	req.Header.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call status %d", resp.StatusCode)
	}
	if h := svc.lastHeaders.Load(); h == nil || !strings.HasPrefix(h.Get("traceparent"), "00-"+traceID+"-") {
		t.Errorf("the Tool Service got traceparent %q, want one in trace %s", (*h).Get("traceparent"), traceID)
	}

	want := []string{"envoy.service.ext_proc.v3.ExternalProcessor/Process", "ext_proc request_headers",
		"ext_proc request_body", "ext_proc response_headers", "ext_proc response_body", "schema validation"}
	var inTrace map[string]*tracepb.Span
	eventually(t, 20*time.Second, "the call's spans to reach the receiver", func() bool {
		spans, _ := recv.snapshot()
		inTrace = map[string]*tracepb.Span{}
		for _, s := range spans {
			if hex.EncodeToString(s.GetTraceId()) == traceID {
				inTrace[s.GetName()] = s
			}
		}
		for _, n := range want {
			if inTrace[n] == nil {
				return false
			}
		}
		return true
	})
	root := inTrace[want[0]]
	if got := hex.EncodeToString(root.GetParentSpanId()); got != spanID {
		t.Errorf("exchange span's parent %s, want the client's span %s", got, spanID)
	}
	if h := svc.lastHeaders.Load(); h != nil {
		if got := (*h).Get("traceparent"); got != "00-"+traceID+"-"+hex.EncodeToString(root.GetSpanId())+"-01" {
			t.Errorf("the Tool Service's parent is %q, want the exchange span %x", got, root.GetSpanId())
		}
	}
	for _, n := range want[1:5] {
		if got := inTrace[n].GetParentSpanId(); string(got) != string(root.GetSpanId()) {
			t.Errorf("span %q is not the exchange span's child", n)
		}
	}
	attrs := map[string]string{}
	for _, a := range root.GetAttributes() {
		attrs[a.GetKey()] = a.GetValue().GetStringValue()
	}
	if attrs["gen_ai.tool.name"] != "a_echo" || attrs["mcp.method.name"] != "tools/call" || attrs["toolmesh.route"] != "alpha" {
		t.Errorf("exchange span attributes %v", attrs)
	}

	spans, services := recv.snapshot()
	names := map[string]bool{}
	for _, s := range spans {
		names[s.GetName()] = true
		for _, a := range s.GetAttributes() {
			if strings.Contains(a.GetValue().String(), secret) {
				t.Errorf("span %q attribute %s carries the argument value", s.GetName(), a.GetKey())
			}
		}
	}
	for _, n := range []string{"registry refresh", "registry fetch", "registry refresh route", "xds push"} {
		if !names[n] {
			t.Errorf("no %q span exported", n)
		}
	}
	for _, s := range services {
		if s != "toolmesh" {
			t.Errorf("resource service.name %q, want toolmesh", s)
		}
	}
}
