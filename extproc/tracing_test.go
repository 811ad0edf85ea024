package extproc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"

	"github.com/toolmesh/toolmesh/extproc/catalog"
	"github.com/toolmesh/toolmesh/extproc/reqtrace"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/internal/wasmtest"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	metaTraceID   = "11111111111111111111111111111111"
	metaSpanID    = "2222222222222222"
	mdTraceID     = "33333333333333333333333333333333"
	mdSpanID      = "4444444444444444"
	// secretArg is an argument value: it must appear in no span.
	secretArg = "Oslo-s3cret-argument"
)

func traceparent(traceID, spanID, flags string) string {
	return "00-" + traceID + "-" + spanID + "-" + flags
}

// tracedEnv is a test server whose spans go to the returned recorder.
func tracedEnv(t *testing.T, cfg Config, routes Routes, sampler sdktrace.Sampler) (*testEnv, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	cfg.TracerProvider = tp
	return newTestEnv(t, cfg, routes), sr
}

// tracingFilters is an input_schema filter and two WASM filters, one per
// stage.
func tracingFilters(t *testing.T) *filters.Set {
	t.Helper()
	return buildFilters(t, fmt.Sprintf(`
wasmCacheDir: %[3]s
definitions:
  - {name: schema, type: input_schema}
  - name: policy-header
    type: wasm
    config: {path: %[1]s, stages: [request], poolSize: 1}
  - name: redact
    type: wasm
    config: {path: %[2]s, stages: [result], poolSize: 1}
defaults: [schema, policy-header, redact]
`, wasmtest.Module(t, "add-header"), wasmtest.Module(t, "redact-result"), wasmCache))
}

func spanAttr(s sdktrace.ReadOnlySpan, k attribute.Key) (string, bool) {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value.String(), true
		}
	}
	return "", false
}

// TestTraceRoutedCall follows one routed tools/call through the ext_proc
// stream and checks the span tree, its attributes, the trace context sent
// to the Tool Service, and that no argument value reaches a span.
func TestTraceRoutedCall(t *testing.T) {
	routes := testRoutes{"/mcp/core": {key: "core", snap: filterSnapshot(t)}}
	env, sr := tracedEnv(t, Config{Runtime: &Runtime{Filters: tracingFilters(t)}}, routes,
		sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)))

	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"` + secretArg + `"}}}`
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body), "mcp-protocol-version", "2025-11-25",
		"traceparent", traceparent(clientTraceID, clientSpanID, "01"), "tracestate", "vendor=x")...))
	rb := v.send(reqBody(body)).GetRequestBody().GetResponse()
	set := setOf(t, rb.GetHeaderMutation())
	if set[wire.ClusterHeader] != "toolsvc_files" {
		t.Fatalf("call not routed: set headers %v", set)
	}
	v.send(respHeaders(false, ":status", "200", "content-type", "application/json"))
	v.send(respBody(`{"ok":true,"echo":"` + secretArg + `"}`))
	v.close()

	spans := sr.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if _, dup := byName[s.Name()]; dup {
			t.Errorf("span %q recorded twice", s.Name())
		}
		byName[s.Name()] = s
	}
	root := byName[reqtrace.SpanExchange]
	if root == nil {
		t.Fatalf("no exchange span among %d spans", len(spans))
	}
	if got := root.SpanContext().TraceID().String(); got != clientTraceID {
		t.Errorf("trace id %s, want the client's %s", got, clientTraceID)
	}
	if got := root.Parent().SpanID().String(); got != clientSpanID || !root.Parent().IsRemote() {
		t.Errorf("exchange parent %s (remote %v), want the client's span %s", got, root.Parent().IsRemote(), clientSpanID)
	}
	// The Tool Service continues the trace under the exchange span.
	if want := traceparent(clientTraceID, root.SpanContext().SpanID().String(), "01"); set["traceparent"] != want {
		t.Errorf("traceparent to the Tool Service %q, want %q", set["traceparent"], want)
	}
	if set["tracestate"] != "vendor=x" {
		t.Errorf("tracestate to the Tool Service %q, want vendor=x", set["tracestate"])
	}

	parents := map[string]string{ // span → its parent
		reqtrace.SpanRequestHeaders:  reqtrace.SpanExchange,
		reqtrace.SpanRequestBody:     reqtrace.SpanExchange,
		reqtrace.SpanResponseHeaders: reqtrace.SpanExchange,
		reqtrace.SpanResponseBody:    reqtrace.SpanExchange,
		"filter schema":              reqtrace.SpanRequestBody,
		reqtrace.SpanValidate:        "filter schema",
		"filter policy-header":       reqtrace.SpanRequestBody,
		"filter redact":              reqtrace.SpanResponseBody,
	}
	if len(spans) != len(parents)+1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Errorf("spans %v, want the exchange and %d more", names, len(parents))
	}
	for name, parent := range parents {
		s, p := byName[name], byName[parent]
		if s == nil || p == nil {
			t.Errorf("span %q or its parent %q missing", name, parent)
			continue
		}
		if s.Parent().SpanID() != p.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %q: parent %s, want %q (%s)", name, s.Parent().SpanID(), parent, p.SpanContext().SpanID())
		}
	}

	want := map[attribute.Key]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "delete_file", "toolmesh.route": "core",
		"toolmesh.era": "legacy", "toolmesh.outcome": "ok", "rpc.system": "grpc", "rpc.method": "Process",
		"toolmesh.tool_service": "files", "http.response.status_code": "200",
	}
	for k, w := range want {
		if got, _ := spanAttr(root, k); got != w {
			t.Errorf("exchange attribute %s = %q, want %q", k, got, w)
		}
	}
	if got, _ := spanAttr(byName["filter policy-header"], "toolmesh.filter.kind"); got != "wasm" {
		t.Errorf("policy-header filter kind %q, want wasm", got)
	}
	if got, _ := spanAttr(byName["filter schema"], "toolmesh.filter.kind"); got != "builtin" {
		t.Errorf("schema filter kind %q, want builtin", got)
	}

	for _, s := range spans {
		all := s.Name()
		for _, a := range s.Attributes() {
			all += " " + a.Value.String()
		}
		for _, e := range s.Events() {
			all += " " + e.Name
			for _, a := range e.Attributes {
				all += " " + a.Value.String()
			}
		}
		if strings.Contains(all, secretArg) || strings.Contains(all, "s3cret-token") {
			t.Errorf("span %q carries an argument value or token: %s", s.Name(), all)
		}
	}
}

// TestTraceContextPrecedence: gRPC metadata, then the request's W3C
// headers, then params._meta name the parent; none starts a new trace.
func TestTraceContextPrecedence(t *testing.T) {
	env, sr := tracedEnv(t, Config{}, testTable(t), sdktrace.ParentBased(sdktrace.AlwaysSample()))
	withMeta := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` +
		`"_meta":{"traceparent":"` + traceparent(metaTraceID, metaSpanID, "01") + `","baggage":"k=v"}}}`
	noMeta := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	tests := []struct {
		name       string
		metadata   bool // Envoy's span in the stream's gRPC metadata
		header     bool // the client's traceparent header
		body       string
		wantTrace  string // "" for a new trace
		wantParent string
		baggage    string // forwarded baggage
	}{
		{name: "metadata over header and _meta", metadata: true, header: true, body: withMeta,
			wantTrace: mdTraceID, wantParent: mdSpanID},
		{name: "header over _meta", header: true, body: withMeta, wantTrace: clientTraceID, wantParent: clientSpanID},
		{name: "_meta alone", body: withMeta, wantTrace: metaTraceID, wantParent: metaSpanID, baggage: "k=v"},
		{name: "none: a new trace", body: noMeta},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sr.Reset()
			ctx := t.Context()
			if tc.metadata {
				ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", traceparent(mdTraceID, mdSpanID, "01"))
			}
			stream, err := env.client.Process(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v := &envoy{t: t, stream: stream}
			extra := []string{"mcp-protocol-version", "2025-11-25"}
			if tc.header {
				extra = append(extra, "traceparent", traceparent(clientTraceID, clientSpanID, "01"))
			}
			v.send(reqHeaders(false, post("/mcp/core", len(tc.body), extra...)...))
			set := setOf(t, v.send(reqBody(tc.body)).GetRequestBody().GetResponse().GetHeaderMutation())
			v.close()

			var root sdktrace.ReadOnlySpan
			var headers sdktrace.ReadOnlySpan
			for _, s := range sr.Ended() {
				switch s.Name() {
				case reqtrace.SpanExchange:
					root = s
				case reqtrace.SpanRequestHeaders:
					headers = s
				}
			}
			if root == nil || headers == nil {
				t.Fatalf("exchange %v / request_headers %v span missing", root != nil, headers != nil)
			}
			if headers.Parent().SpanID() != root.SpanContext().SpanID() {
				t.Errorf("request_headers span is not the exchange's child")
			}
			if headers.StartTime().Before(root.StartTime()) {
				t.Errorf("request_headers span starts before the exchange")
			}
			gotTrace, gotParent := root.SpanContext().TraceID().String(), root.Parent().SpanID().String()
			if tc.wantTrace == "" {
				if root.Parent().IsValid() {
					t.Errorf("parent %s, want a new trace", gotParent)
				}
				for _, id := range []string{mdTraceID, clientTraceID, metaTraceID} {
					if gotTrace == id {
						t.Errorf("trace id %s came from a source that was not sent", gotTrace)
					}
				}
			} else if gotTrace != tc.wantTrace || gotParent != tc.wantParent {
				t.Errorf("trace %s parent %s, want %s %s", gotTrace, gotParent, tc.wantTrace, tc.wantParent)
			}
			if want := traceparent(gotTrace, root.SpanContext().SpanID().String(), "01"); set["traceparent"] != want {
				t.Errorf("traceparent to the Tool Service %q, want %q", set["traceparent"], want)
			}
			if set["baggage"] != tc.baggage {
				t.Errorf("baggage to the Tool Service %q, want %q", set["baggage"], tc.baggage)
			}
		})
	}
}

// TestTraceNotSampled: an unsampled trace records no span but still
// passes its context on; tracing off adds no header at all.
func TestTraceNotSampled(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo"}}}`
	tests := []struct {
		name    string
		tracing bool
		header  string // the client's traceparent
		want    string // traceparent to the Tool Service; "*" any unsampled one
	}{
		{name: "ratio 0, no parent", tracing: true, want: "*"},
		{name: "unsampled parent", tracing: true, header: traceparent(clientTraceID, clientSpanID, "00"), want: "*"},
		{name: "tracing off", tracing: false, header: traceparent(clientTraceID, clientSpanID, "01")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var env *testEnv
			var sr *tracetest.SpanRecorder
			if tc.tracing {
				env, sr = tracedEnv(t, Config{}, testTable(t), sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)))
			} else {
				env = newTestEnv(t, Config{}, testTable(t))
			}
			extra := []string{"mcp-protocol-version", "2025-11-25"}
			if tc.header != "" {
				extra = append(extra, "traceparent", tc.header)
			}
			v := env.open(t)
			v.send(reqHeaders(false, post("/mcp/core", len(body), extra...)...))
			set := setOf(t, v.send(reqBody(body)).GetRequestBody().GetResponse().GetHeaderMutation())
			v.send(respHeaders(false, ":status", "200", "content-type", "application/json"))
			v.send(respBody(`{"ok":true}`))
			v.close()
			if sr != nil && len(sr.Ended()) != 0 {
				t.Errorf("%d spans recorded, want none", len(sr.Ended()))
			}
			got, sent := set["traceparent"]
			switch {
			case tc.want == "" && sent:
				t.Errorf("traceparent %q set with tracing off", got)
			case tc.want == "*" && (!strings.HasPrefix(got, "00-") || !strings.HasSuffix(got, "-00")):
				t.Errorf("traceparent %q, want an unsampled one", got)
			}
			if tc.header != "" && tc.want == "*" && !strings.Contains(got, clientTraceID) {
				t.Errorf("traceparent %q does not continue the client's trace", got)
			}
		})
	}
}

// TestTraceSearchTools: search_tools gets its own span under the request
// body phase, without the query.
func TestTraceSearchTools(t *testing.T) {
	route := registry.Route{Key: "core", Catalog: &registry.Catalog{Mode: registry.ModeSearch},
		ToolServices: []registry.ToolService{{Name: "crm", URL: "http://crm.tools.svc:8080"}}}
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{"crm": {Tools: []registry.ManifestTool{
		{Name: "crm_contact_get", Description: "Get a contact.", InputSchema: json.RawMessage(`{"type":"object"}`)}}}})
	env, sr := tracedEnv(t, Config{}, testRoutes{"/mcp/core": {key: "core", snap: snap}}, sdktrace.AlwaysSample())
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"contact ` + secretArg + `"}}}`
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body), "mcp-protocol-version", "2025-11-25")...))
	if !isImmediate(v.send(reqBody(body))) {
		t.Fatal("search_tools not answered")
	}
	v.close()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		byName[s.Name()] = s
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.String(), secretArg) {
				t.Errorf("span %q attribute %s carries the query", s.Name(), a.Key)
			}
		}
	}
	search, phase := byName[catalog.SpanSearch], byName[reqtrace.SpanRequestBody]
	if search == nil || phase == nil {
		t.Fatalf("search_tools / request_body span missing")
	}
	if search.Parent().SpanID() != phase.SpanContext().SpanID() {
		t.Errorf("search_tools span is not the request_body phase's child")
	}
}

// TestTraceFederatedCall: a call routed to a federated MCP server carries
// the gateway's span both as trace headers and in params._meta (the
// 2026-07-28 trace-context keys), replacing the client's parent.
func TestTraceFederatedCall(t *testing.T) {
	env, _ := tracedEnv(t, Config{Upstreams: fakeUpstreams{}}, federatedRoutes(t, "http://127.0.0.1:1"),
		sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)))
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gh_search","arguments":{},"_meta":{"traceparent":"` +
		traceparent(clientTraceID, clientSpanID, "01") + `"}}}`
	v := env.open(t)
	defer v.close()
	v.send(reqHeaders(false, post("/mcp/fed", len(body))...))
	rb := v.send(reqBody(body)).GetRequestBody().GetResponse()
	set := setOf(t, rb.GetHeaderMutation())
	tp := set["traceparent"]
	if !strings.HasPrefix(tp, "00-"+clientTraceID+"-") || strings.Contains(tp, clientSpanID) {
		t.Fatalf("traceparent header %q: want the client's trace with the gateway's span", tp)
	}
	if up := string(rb.GetBodyMutation().GetBody()); !strings.Contains(up, `"traceparent":"`+tp+`"`) {
		t.Errorf("upstream body %s: want _meta.traceparent %q", up, tp)
	}
}
