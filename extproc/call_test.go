package extproc

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// wantRouted checks a request_body reply that routes a call: every header
// mutation, the body rewrite with a matching content-length, clear_route_cache
// in the same reply, and the dynamic metadata local_reply_config reads.
func wantRouted(t *testing.T, resp *extprocv3.ProcessingResponse, cluster, path, tool, version, args, id, era string) {
	t.Helper()
	wantRoutedFrom(t, resp, false, cluster, path, tool, version, args, id, era)
}

// wantRoutedFrom is wantRouted for a call the request-headers reply may
// already have routed (headerRouted): the body reply then keeps that route,
// without repeating the cluster and :path or clearing the route cache.
func wantRoutedFrom(t *testing.T, resp *extprocv3.ProcessingResponse, headerRouted bool, cluster, path, tool, version, args, id, era string) {
	t.Helper()
	cr := resp.GetRequestBody().GetResponse()
	if cr == nil {
		t.Fatalf("got %v, want a BodyResponse", resp)
	}
	if cr.GetStatus() != extprocv3.CommonResponse_CONTINUE {
		t.Errorf("status = %v, want CONTINUE", cr.GetStatus())
	}
	if cr.GetHeaderMutation() == nil || cr.GetClearRouteCache() == headerRouted {
		t.Errorf("clear_route_cache = %v with header mutation %v: want %v, with a header mutation",
			cr.GetClearRouteCache(), cr.GetHeaderMutation(), !headerRouted)
	}
	body := cr.GetBodyMutation().GetBody()
	if string(body) != args {
		t.Errorf("body = %s, want %s", body, args)
	}
	set := setOf(t, cr.GetHeaderMutation())
	want := map[string]string{
		"content-type":   "application/json",
		"content-length": strconv.Itoa(len(body)),
		wire.RouteHeader: "core",
		wire.ToolHeader:  tool,
	}
	if !headerRouted {
		want[wire.ClusterHeader], want[":path"] = cluster, path
	}
	if version != "" {
		want[wire.ToolVersionHeader] = version
	}
	for k, v := range want {
		if got, ok := set[k]; !ok || got != v {
			t.Errorf("set header %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if len(set) != len(want) {
		t.Errorf("set headers = %v, want exactly %v", set, want)
	}
	removed := cr.GetHeaderMutation().GetRemoveHeaders()
	for _, h := range []string{"mcp-method", "mcp-name", "accept-encoding"} {
		if !slices.Contains(removed, h) {
			t.Errorf("remove_headers = %v, want %s", removed, h)
		}
	}
	if version == "" && !slices.Contains(removed, wire.ToolVersionHeader) {
		t.Errorf("remove_headers = %v, want %s for a tool without version", removed, wire.ToolVersionHeader)
	}
	for _, h := range removed {
		if _, ok := set[h]; ok {
			t.Errorf("header %s is both set and removed", h)
		}
	}
	ns := resp.GetDynamicMetadata().GetFields()[wire.MetadataNamespace].GetStructValue().GetFields()
	md := map[string]string{}
	for k, v := range ns {
		md[k] = v.GetStringValue()
	}
	wantMD := map[string]string{
		wire.MetadataJSONRPCID: id,
		wire.MetadataToolCall:  "true",
		wire.MetadataTool:      tool,
		"era":                  era,
	}
	for k, v := range wantMD {
		if md[k] != v {
			t.Errorf("dynamic metadata %s.%s = %q, want %q", wire.MetadataNamespace, k, md[k], v)
		}
	}
}

// TestToolsCallRouted drives whole routed calls: request headers, body,
// response headers and response body, in both eras.
func TestToolsCallRouted(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	tests := []struct {
		name        string
		extra       []string
		body        string
		headerRoute bool // routed in the headers phase too
		cluster     string
		path        string
		tool        string
		version     string
		args        string
		id          string
		era         string
	}{
		{name: "legacy with string id",
			extra:   []string{"mcp-protocol-version", mcp.Version20251125, wire.ClusterHeader, "toolsvc_evil"},
			body:    `{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo", "days":2}}}`,
			cluster: "toolsvc_weather", path: "/api/tools/forecast", tool: "forecast", version: "1.2.0",
			args: `{"city":"Oslo", "days":2}`, id: `"abc"`, era: "legacy"},
		{name: "legacy without arguments, tool without version",
			body:    `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`,
			cluster: "toolsvc_echo", path: "/invoke/echo", tool: "echo",
			args: `{}`, id: `7`, era: "legacy"},
		{name: "stateless, routed in the headers phase",
			extra:       stateless("tools/call", "forecast"),
			body:        `{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Bergen"},` + meta2026 + `}}`,
			headerRoute: true,
			cluster:     "toolsvc_weather", path: "/api/tools/forecast", tool: "forecast", version: "1.2.0",
			args: `{"city":"Bergen"}`, id: `1.0`, era: mcp.Version20260728},
		{name: "stateless, base64 Mcp-Name",
			extra:       stateless("tools/call", "=?base64?ZWNobw==?="),
			body:        `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"a":[1,2]},` + meta2026 + `}}`,
			headerRoute: true,
			cluster:     "toolsvc_echo", path: "/invoke/echo", tool: "echo",
			args: `{"a":[1,2]}`, id: `"x"`, era: mcp.Version20260728},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			extra := append([]string{"accept-encoding", "gzip", wire.ToolHeader, "spoofed"}, tc.extra...)
			hr := v.send(reqHeaders(false, post("/mcp/core", len(tc.body), extra...)...)).GetRequestHeaders().GetResponse()
			if hr == nil {
				t.Fatal("want a HeadersResponse")
			}
			hset := setOf(t, hr.GetHeaderMutation())
			removed := hr.GetHeaderMutation().GetRemoveHeaders()
			if !slices.Contains(removed, wire.ToolHeader) {
				t.Errorf("headers phase remove_headers = %v, want the client's %s", removed, wire.ToolHeader)
			}
			if tc.headerRoute {
				if hset[wire.ClusterHeader] != tc.cluster || hset[":path"] != tc.path || !hr.GetClearRouteCache() {
					t.Errorf("headers phase = %v, want a route to %s %s with clear_route_cache", hr, tc.cluster, tc.path)
				}
				if slices.Contains(removed, wire.ClusterHeader) {
					t.Errorf("headers phase both sets and removes %s", wire.ClusterHeader)
				}
			} else {
				if len(hset) != 0 || hr.GetClearRouteCache() || !slices.Contains(removed, wire.ClusterHeader) {
					t.Errorf("headers phase = %v, want only removals", hr)
				}
			}

			wantRoutedFrom(t, v.send(reqBody(tc.body)), tc.headerRoute, tc.cluster, tc.path, tc.tool, tc.version, tc.args, tc.id, tc.era)

			// The Tool Service answers with a JSON object.
			if cr := v.send(respHeaders(false, ":status", "200", "content-type", "application/json")).
				GetResponseHeaders().GetResponse(); cr == nil || cr.GetHeaderMutation() != nil || cr.GetBodyMutation() != nil {
				t.Errorf("response headers: got %v, want an empty CommonResponse", cr)
			}
			out := v.send(respBody(`{"temp":3}`)).GetResponseBody().GetResponse()
			wantResultHeaders(t, out.GetHeaderMutation(), len(out.GetBodyMutation().GetBody()), true)
			res := decodeResult(t, out.GetBodyMutation().GetBody(), tc.id)
			if res.IsError || string(res.StructuredContent) != `{"temp":3}` {
				t.Errorf("result = %+v, want structuredContent {\"temp\":3}", res)
			}
			v.close()

			labels := map[string]string{"route": "core", "method": "tools/call", "era": tc.era, "outcome": callOK} // a routed request ends with its call's outcome
			if got := metricValue(t, env.reg, "toolmesh_extproc_requests_total", labels); got < 1 {
				t.Errorf("requests_total%v = %v, want ≥ 1", labels, got)
			}
			if got := metricValue(t, env.reg, "toolmesh_tool_calls_total",
				map[string]string{"route": "core", "tool": tc.tool, "outcome": callOK}); got < 1 {
				t.Errorf("tool_calls_total ok for %s = %v, want ≥ 1", tc.tool, got)
			}
		})
	}
}

// wantResultHeaders checks the header mutation that turns a Tool Service
// reply into the client's: 200, JSON, and (for a body reply) a matching
// content-length.
func wantResultHeaders(t *testing.T, m *extprocv3.HeaderMutation, bodyLen int, withLength bool) {
	t.Helper()
	set := setOf(t, m)
	if set[":status"] != "200" || set["content-type"] != "application/json" {
		t.Errorf("result headers = %v, want :status 200 and application/json", set)
	}
	if cl, ok := set["content-length"]; withLength && cl != strconv.Itoa(bodyLen) {
		t.Errorf("content-length = %q (present %v), want %d", cl, ok, bodyLen)
	} else if !withLength && ok {
		t.Errorf("content-length set on a CONTINUE_AND_REPLACE reply")
	}
	if !slices.Contains(m.GetRemoveHeaders(), "content-encoding") {
		t.Errorf("remove_headers = %v, want content-encoding", m.GetRemoveHeaders())
	}
}

// TestToolResponses maps Tool Service replies to MCP results (docs/contracts/mcp.md
// table), including replies without a body, which get no response_body
// message and are answered with CONTINUE_AND_REPLACE.
func TestToolResponses(t *testing.T) {
	env := newTestEnv(t, Config{MaxResponseBytes: 64}, testTable(t))
	call := `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`
	tests := []struct {
		name        string
		headers     []string
		body        *string // nil: headers only (end_of_stream on the headers)
		wantError   bool
		wantText    string // substring of the first text item; "" = not checked
		wantContent string // exact JSON of content; "" = not checked
		outcome     string
	}{
		{name: "CallToolResult passes through",
			headers:     []string{":status", "200", "content-type", "application/json"},
			body:        ptr(`{"content":[{"type":"text","text":"hi"}]}`),
			wantContent: `[{"type":"text","text":"hi"}]`, outcome: callOK},
		{name: "plain text",
			headers:  []string{":status", "200", "content-type", "text/plain; charset=utf-8"},
			body:     ptr("hello there"),
			wantText: "hello there", outcome: callOK},
		{name: "server error",
			headers: []string{":status", "500", "content-type", "text/plain", "content-encoding", "identity"},
			body:    ptr("boom"), wantError: true, outcome: callUpstream5xx},
		{name: "forbidden",
			headers: []string{":status", "403", "content-type", "application/json"},
			body:    ptr(`{"error":"no"}`), wantError: true, wantText: "tool echo failed: permission denied", outcome: callUpstream4xx},
		{name: "too large",
			headers: []string{":status", "200", "content-type", "application/json"},
			body:    ptr(`{"data":"` + strings.Repeat("x", 100) + `"}`), wantError: true, outcome: callTooLarge},
		{name: "503 without body",
			headers:   []string{":status", "503"},
			wantError: true, outcome: callUpstream5xx},
		{name: "204 without body",
			headers: []string{":status", "204"}, outcome: callOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			v.send(reqHeaders(false, post("/mcp/core", len(call))...))
			wantRouted(t, v.send(reqBody(call)), "toolsvc_echo", "/invoke/echo", "echo", "", `{"x":1}`, "11", "legacy")

			var out []byte
			if tc.body == nil {
				cr := v.send(respHeaders(true, tc.headers...)).GetResponseHeaders().GetResponse()
				if cr.GetStatus() != extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
					t.Fatalf("headers-only reply: status %v, want CONTINUE_AND_REPLACE", cr.GetStatus())
				}
				out = cr.GetBodyMutation().GetBody()
				wantResultHeaders(t, cr.GetHeaderMutation(), len(out), false)
			} else {
				v.send(respHeaders(false, tc.headers...))
				cr := v.send(respBody(*tc.body)).GetResponseBody().GetResponse()
				if cr.GetStatus() != extprocv3.CommonResponse_CONTINUE {
					t.Errorf("status = %v, want CONTINUE", cr.GetStatus())
				}
				out = cr.GetBodyMutation().GetBody()
				wantResultHeaders(t, cr.GetHeaderMutation(), len(out), true)
			}
			res := decodeResult(t, out, "11")
			if res.IsError != tc.wantError {
				t.Errorf("isError = %v, want %v: %s", res.IsError, tc.wantError, out)
			}
			if tc.wantError && (len(res.Content) == 0 || res.Content[0].Type != "text" || res.Content[0].Text == "") {
				t.Errorf("error result without a text item: %s", out)
			}
			if tc.wantText != "" && (len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, tc.wantText)) {
				t.Errorf("content = %+v, want a text item containing %q", res.Content, tc.wantText)
			}
			if tc.wantContent != "" {
				var r struct {
					Result struct {
						Content json.RawMessage `json:"content"`
					} `json:"result"`
				}
				mustUnmarshal(t, out, &r)
				if string(r.Result.Content) != tc.wantContent {
					t.Errorf("content = %s, want %s", r.Result.Content, tc.wantContent)
				}
			}
			v.close()
		})
	}
	// Each case ended once with its outcome.
	counts := map[string]float64{}
	for _, tc := range tests {
		counts[tc.outcome]++
	}
	for outcome, want := range counts {
		labels := map[string]string{"route": "core", "tool": "echo", "outcome": outcome}
		if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", labels); got != want {
			t.Errorf("tool_calls_total%v = %v, want %v", labels, got, want)
		}
	}
}

func ptr(s string) *string { return &s }

// TestInvalidArguments checks that arguments failing the input schema are
// answered with an isError result and never routed.
func TestInvalidArguments(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	for _, tc := range []struct {
		name  string
		extra []string
		body  string
		id    string
	}{
		{name: "legacy", id: "21",
			body: `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"forecast","arguments":{"days":0}}}`},
		{name: "stateless", id: `"s"`, extra: stateless("tools/call", "forecast"),
			body: `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"forecast","arguments":{"city":3},` + meta2026 + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			v.send(reqHeaders(false, post("/mcp/core", len(tc.body), tc.extra...)...))
			im := v.send(reqBody(tc.body)).GetImmediateResponse()
			if im == nil {
				t.Fatal("want an ImmediateResponse: invalid arguments must not reach the Tool Service")
			}
			if im.GetStatus().GetCode() != 200 || im.GetDetails() != detailsInvalidArguments {
				t.Errorf("status %v details %q, want 200 %s", im.GetStatus().GetCode(), im.GetDetails(), detailsInvalidArguments)
			}
			if setOf(t, im.GetHeaders())["content-type"] != "application/json" {
				t.Error("no JSON content-type")
			}
			res := decodeResult(t, im.GetBody(), tc.id)
			if !res.IsError || len(res.Content) == 0 || res.Content[0].Text == "" {
				t.Errorf("result = %s, want isError with validation messages", im.GetBody())
			}
			// Envoy may still deliver response messages; nothing was routed.
			cr := v.send(respHeaders(false, ":status", "200")).GetResponseHeaders().GetResponse()
			if cr.GetBodyMutation() != nil || cr.GetHeaderMutation() != nil {
				t.Errorf("response phase after a local answer mutated: %v", cr)
			}
			v.close()
		})
	}
	labels := map[string]string{"route": "core", "tool": "forecast", "outcome": callInvalidArgs}
	if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", labels); got != 2 {
		t.Errorf("tool_calls_total%v = %v, want 2", labels, got)
	}
}

// TestCallWithoutResponse records a routed call whose stream ends before any
// Tool Service reply (Envoy answered 503/504 itself via local_reply_config).
func TestCallWithoutResponse(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body))...))
	v.send(reqBody(body))
	v.close()
	labels := map[string]string{"route": "core", "tool": "echo", "outcome": callNoResponse}
	if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", labels); got != 1 {
		t.Errorf("tool_calls_total%v = %v, want 1", labels, got)
	}
}
