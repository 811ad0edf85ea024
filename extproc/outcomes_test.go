package extproc

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// outcomeCase drives one request and names the outcome labels it must
// produce: request is the outcome of toolmesh_extproc_requests_total, call
// the one of toolmesh_tool_calls_total ("" when no tool was resolved).
type outcomeCase struct {
	name          string
	filtered      bool // on the server with filters
	request, call string
	tool          string
	drive         func(t *testing.T, e *testEnv)
}

func callReq(tool, args string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

// routed sends a call that is routed and returns the stream, for the
// response phase.
func routed(t *testing.T, e *testEnv, tool, args string) *envoy {
	t.Helper()
	body := callReq(tool, args)
	v := e.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body))...))
	if v.send(reqBody(body)).GetRequestBody() == nil {
		t.Fatalf("%s not routed", tool)
	}
	return v
}

// answered sends one request whose reply is an ImmediateResponse with want.
func answered(t *testing.T, e *testEnv, path, body string, want int) {
	t.Helper()
	v := e.open(t)
	v.send(reqHeaders(false, post(path, len(body))...))
	ir := v.send(reqBody(body)).GetImmediateResponse()
	if ir == nil || int(ir.GetStatus().GetCode()) != want {
		t.Fatalf("got %v, want an ImmediateResponse %d", ir, want)
	}
	v.close()
}

func upstreamReply(status string, body string) func(t *testing.T, e *testEnv) {
	return func(t *testing.T, e *testEnv) {
		v := routed(t, e, "echo", `{}`)
		v.send(respHeaders(false, ":status", status, "content-type", "application/json"))
		v.send(respBody(body))
		v.close()
	}
}

var outcomeCases = []outcomeCase{
	{name: "tools/list answered", request: outcomeAnswered, drive: func(t *testing.T, e *testEnv) {
		answered(t, e, "/mcp/core", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 200)
	}},
	{name: "GET is an HTTP-level rejection", request: outcomeRejected, drive: func(t *testing.T, e *testEnv) {
		v := e.open(t)
		ir := v.send(reqHeaders(true, ":method", "GET", ":path", "/mcp/core", ":scheme", "http",
			":authority", "localhost:10000", "accept", "text/event-stream")).GetImmediateResponse()
		if ir.GetStatus().GetCode() != 405 {
			t.Fatalf("GET answered %v, want 405", ir)
		}
		v.close()
	}},
	{name: "unknown route", request: outcomeUnknownRoute, drive: func(t *testing.T, e *testEnv) {
		answered(t, e, "/mcp/nope", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 404)
	}},
	{name: "route without snapshot", request: outcomeNotReady, drive: func(t *testing.T, e *testEnv) {
		v := e.open(t)
		if ir := v.send(reqHeaders(false, post("/mcp/cold", 2)...)).GetImmediateResponse(); ir.GetStatus().GetCode() != 503 {
			t.Fatalf("got %v, want 503", ir)
		}
		v.close()
	}},
	{name: "stream ended before the body", request: outcomeIncomplete, drive: func(t *testing.T, e *testEnv) {
		v := e.open(t)
		v.send(reqHeaders(false, post("/mcp/core", 40)...))
		v.close()
	}},
	{name: "stream failed", request: outcomeStreamError, drive: func(t *testing.T, e *testEnv) {
		// A message over the server's gRPC receive limit (GRPCServerOptions)
		// fails the stream with ResourceExhausted, not Envoy closing it.
		v := e.open(t)
		v.send(reqHeaders(false, post("/mcp/core", 3<<20)...))
		if err := v.stream.Send(reqBody(strings.Repeat("x", 3<<20))); err != nil {
			t.Fatal(err)
		}
		if _, err := v.stream.Recv(); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("Recv after an oversized message = %v, want ResourceExhausted", err)
		}
	}},
	{name: "schema-invalid arguments", request: outcomeInvalidArgs, call: callInvalidArgs, tool: "forecast",
		drive: func(t *testing.T, e *testEnv) {
			answered(t, e, "/mcp/core", callReq("forecast", `{"days":0}`), 200)
		}},
	{name: "schema-invalid arguments, input_schema filter", filtered: true, request: outcomeInvalidArgs, call: callInvalidArgs, tool: "forecast",
		drive: func(t *testing.T, e *testEnv) {
			answered(t, e, "/mcp/core", callReq("forecast", `{"days":0}`), 200)
		}},
	{name: "denied by a filter", filtered: true, request: outcomeDenied, call: callDenied, tool: "echo",
		drive: func(t *testing.T, e *testEnv) {
			answered(t, e, "/mcp/core", callReq("echo", `{"s":"`+strings.Repeat("x", 40)+`"}`), 200)
		}},
	{name: "body over the Tool Service's limit", request: outcomeRejected, call: callRejected, tool: "forecast",
		drive: func(t *testing.T, e *testEnv) {
			answered(t, e, "/mcp/core", callReq("forecast", `{"city":"`+strings.Repeat("x", 200)+`"}`), 413)
		}},
	{name: "Tool Service 2xx", request: callOK, call: callOK, tool: "echo", drive: upstreamReply("200", `{"a":1}`)},
	{name: "Tool Service 4xx", request: callUpstream4xx, call: callUpstream4xx, tool: "echo", drive: upstreamReply("404", `no`)},
	{name: "Tool Service 5xx", request: callUpstream5xx, call: callUpstream5xx, tool: "echo", drive: upstreamReply("502", `down`)},
	{name: "Tool Service 3xx", request: callToolError, call: callToolError, tool: "echo", drive: upstreamReply("302", ``)},
	{name: "Tool Service reply too large", request: callTooLarge, call: callTooLarge, tool: "echo",
		drive: upstreamReply("200", `{"data":"`+strings.Repeat("x", 100)+`"}`)},
	{name: "Envoy's route timeout", request: callTimeout, call: callTimeout, tool: "echo", drive: envoyReply("timeout")},
	{name: "Envoy's 503 (unavailable)", request: callUnavailable, call: callUnavailable, tool: "echo", drive: envoyReply("unavailable")},
	{name: "a Tool Service sending the marker is still the Tool Service", request: callOK, call: callOK, tool: "echo",
		drive: func(t *testing.T, e *testEnv) {
			v := routed(t, e, "echo", `{}`)
			v.send(respHeaders(false, ":status", "200", "content-type", "application/json",
				"x-envoy-upstream-service-time", "3", wire.LocalReplyHeader, "timeout"))
			v.send(respBody(`{"a":1}`))
			v.close()
		}},
	{name: "no reply at all (client gone)", request: callNoResponse, call: callNoResponse, tool: "echo",
		drive: func(t *testing.T, e *testEnv) { routed(t, e, "echo", `{}`).close() }},
	{name: "answered by the approval step", request: outcomeApproval, call: outcomeApproval, tool: "echo",
		drive: func(t *testing.T, e *testEnv) {
			a, err := approval.New(approval.Config{Keys: []approval.Key{approvalKey1}, Routes: map[string]approval.Rule{"core": {Tools: []string{"echo"}}}})
			if err != nil {
				t.Fatal(err)
			}
			e.srv.SetApproval(a)
			defer e.srv.SetApproval(nil)
			answered(t, e, "/mcp/core", callReq("echo", `{}`), 200) // legacy era: an isError result
		}},
	{name: "refused by a rate limit", request: outcomeRateLimited, call: outcomeRateLimited, tool: "echo",
		drive: func(t *testing.T, e *testEnv) {
			l, err := ratelimit.New(&ratelimit.Config{Default: []ratelimit.Limit{{Name: "none", Tools: []string{"echo"}, Concurrency: 1}}}, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			e.srv.SetRateLimiter(l)
			defer e.srv.SetRateLimiter(nil)
			// The slot is taken by a call in flight; the next is refused
			// (and only it counts here: the routed one ends with the test).
			_, held := l.Check(t.Context(), &ratelimit.Call{Route: "core", Tool: "echo"})
			defer held.Release()
			answered(t, e, "/mcp/core", callReq("echo", `{}`), 429)
		}},
}

// envoyReply drives Envoy's local reply to a routed call as Envoy >= 1.37
// sends it through ext_proc: the headers local_reply_config wrote (200, the
// marker, no x-envoy-upstream-service-time), then its body, which must pass
// unchanged, and the marker removed.
func envoyReply(kind string) func(t *testing.T, e *testEnv) {
	return func(t *testing.T, e *testEnv) {
		v := routed(t, e, "echo", `{}`)
		hr := v.send(respHeaders(false, ":status", "200", "content-type", "application/json",
			"content-length", "60", wire.LocalReplyHeader, kind)).GetResponseHeaders().GetResponse()
		if rm := hr.GetHeaderMutation().GetRemoveHeaders(); hr.GetStatus() != extprocv3.CommonResponse_CONTINUE ||
			!slices.Equal(rm, []string{wire.LocalReplyHeader}) || len(hr.GetHeaderMutation().GetSetHeaders()) != 0 {
			t.Fatalf("local reply headers answered %v, want CONTINUE removing only the marker", hr)
		}
		br := v.send(respBody(`{"jsonrpc":"2.0","id":1,"result":{"isError":true}}`)).GetResponseBody().GetResponse()
		if br.GetBodyMutation() != nil || br.GetHeaderMutation() != nil {
			t.Fatalf("local reply body answered %v, want it unchanged", br)
		}
		v.close()
	}
}

// TestOutcomeLabels drives each case on its own and checks that exactly the
// named series grew by one, and that docs/metrics.md documents exactly the
// values these cases produce.
func TestOutcomeLabels(t *testing.T) {
	set := outcomeFilters(t)
	plain := newTestEnv(t, Config{MaxResponseBytes: 64}, testTable(t))
	filtered := newTestEnv(t, Config{MaxResponseBytes: 64, Runtime: &Runtime{Filters: set}}, testTable(t))
	for _, e := range []*testEnv{plain, filtered} {
		e.srv.SetBodyLimits(BodyLimits{Default: 1 << 20, Services: map[string]int64{"weather": 150}})
	}
	for _, tc := range outcomeCases {
		t.Run(tc.name, func(t *testing.T) {
			e := plain
			if tc.filtered {
				e = filtered
			}
			before := outcomeSeries(t, e.reg)
			tc.drive(t, e)
			want := map[string]float64{}
			for k, v := range before {
				want[k] = v
			}
			want["request/"+tc.request]++
			if tc.call != "" {
				want["call/"+tc.tool+"/"+tc.call]++
			}
			var got map[string]float64
			for range 100 { // the server records a request as its stream ends
				if got = outcomeSeries(t, e.reg); mapsEqual(got, want) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if !mapsEqual(got, want) {
				t.Errorf("series after the case:\n got %v\nwant %v", got, want)
			}
		})
	}

	var requests, calls []string
	for _, tc := range outcomeCases {
		requests = append(requests, tc.request)
		if tc.call != "" {
			calls = append(calls, tc.call)
		}
	}
	calls = append(calls, callFederatedFailed, callNoCredentials) // TestFederatedCredentialsUnreadable, TestUpstreamAuthCredentialUnreadable
	documented := documentedOutcomes(t)
	for metric, produced := range map[string][]string{
		"toolmesh_extproc_requests_total": requests,
		"toolmesh_tool_calls_total":       calls,
	} {
		slices.Sort(produced)
		produced = slices.Compact(produced)
		if doc := documented[metric]; !slices.Equal(doc, produced) {
			t.Errorf("docs/metrics.md documents outcomes %q of %s; the cases produce %q", doc, metric, produced)
		}
	}
}

// outcomeFilters is a filter set whose argument_size filter denies the
// arguments of the "denied" case; the input_schema filter runs implicitly.
func outcomeFilters(t *testing.T) *filters.Set {
	t.Helper()
	set := buildFilters(t, `
definitions:
  - {name: size, type: argument_size, config: {maxBytes: 30}}
defaults: [size]
`)
	return set
}

// outcomeSeries sums the outcome counters: "request/OUTCOME" over every
// other label, "call/TOOL/OUTCOME".
func outcomeSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetName() {
			case "toolmesh_extproc_requests_total":
				out["request/"+l["outcome"]] += m.GetCounter().GetValue()
			case "toolmesh_tool_calls_total":
				out["call/"+l["tool"]+"/"+l["outcome"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// documentedOutcomes reads the outcome tables of docs/metrics.md: under a
// heading naming a metric, the first column of each row is a `value`.
func documentedOutcomes(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	metric := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			metric = ""
			for _, m := range []string{"toolmesh_extproc_requests_total", "toolmesh_tool_calls_total"} {
				if strings.Contains(line, "`"+m+"`") && strings.Contains(line, "outcome") {
					metric = m
				}
			}
			continue
		}
		if metric == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		out[metric] = append(out[metric], strings.Trim(cell, "`"))
	}
	for m := range out {
		slices.Sort(out[m])
	}
	return out
}
