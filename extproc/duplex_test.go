package extproc

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

const progressEvent = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`

// stallingServer is a 2026-07-28 MCP server whose tool "slow" answers with
// an event stream: one progress event, then either its response
// (arguments {"mode":"finish"}) or nothing until the request goes away
// ({"mode":"hang"}), which it reports on closed; {"mode":"spoof"} hangs
// too, after sending wire.RouteTimeoutHeader itself.
func stallingServer(t *testing.T) (*httptest.Server, chan struct{}) {
	closed := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Arguments struct {
					Mode string `json:"mode"`
				} `json:"arguments"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		w.Header().Set("Content-Type", "text/event-stream")
		if m.Params.Arguments.Mode == "spoof" {
			// A server claiming a route timeout of 10 minutes, then hanging.
			w.Header().Set(wire.RouteTimeoutHeader, "600000")
		}
		_, _ = io.WriteString(w, "event: message\ndata: "+progressEvent+"\n\n")
		w.(http.Flusher).Flush()
		if m.Params.Arguments.Mode == "finish" {
			_, _ = io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":"done"}],"resultType":"complete"}}`+"\n\n")
			return
		}
		<-r.Context().Done()
		closed <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return srv, closed
}

// duplexStack serves route "core" with the federated server at url through
// the local data plane; requestTimeout is the route timeout.
func duplexStack(t *testing.T, url string, requestTimeout time.Duration, cfg Config) (*httptest.Server, *testEnv) {
	t.Helper()
	return duplexStackWith(t, url, requestTimeout, cfg, xds.Options{}, nil)
}

// waitToolCallCounted waits for toolmesh_tool_calls_total{labels} to
// reach 1: the ext_proc stream ends, and counts the call, after the HTTP
// stream.
func waitToolCallCounted(t *testing.T, env *testEnv, labels map[string]string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); metricValue(t, env.reg, "toolmesh_tool_calls_total", labels) != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("toolmesh_tool_calls_total %v not counted", labels)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// duplexStackWith is duplexStack with xDS options and an edit of the
// translated resources (serveThroughDataPlaneEdited).
func duplexStackWith(t *testing.T, url string, requestTimeout time.Duration, cfg Config, opts xds.Options, edit func(*xds.Resources)) (*httptest.Server, *testEnv) {
	t.Helper()
	route := registry.Route{Key: "core", PublicPath: "/mcp/core", ToolServices: []registry.ToolService{{
		Name: "fed", URL: url + "/mcp", Protocol: registry.ProtocolMCP,
		Cluster: &registry.ClusterSettings{RequestTimeout: config.Duration(requestTimeout)},
	}}}
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{"fed": {
		Tools: []registry.ManifestTool{{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		MCP:   &registry.MCPManifest{ProtocolVersion: mcp.Version20260728},
	}})
	env := newTestEnv(t, cfg, testRoutes{"/mcp/core": {key: "core", snap: snap}})
	front := serveThroughDataPlaneEdited(t, env, route, opts, edit)
	return front, env
}

// sseEvents reads a response body's events (their data) until it ends; err
// is how it ended (nil: a clean end of stream).
func sseEvents(body io.Reader) (events []string, err error) {
	sc := bufio.NewScanner(body)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
		if line == "" && len(data) > 0 {
			events, data = append(events, strings.Join(data, "\n")), nil
		}
	}
	return events, sc.Err()
}

// TestFederatedStreamDeadline: a federated server's event stream that
// answers a tools/call and then stalls ends, through the local data plane,
// with the progress event, then an isError "timeout" result carrying the
// request id, then a clean end of stream, before the route timeout; the
// upstream request is closed. A stream that finishes is unchanged. Without
// federatedStreamTimeout and with federatedStreamDeadline off the stall
// lasts until the route timeout, which can only reset the stream (the
// control case).
func TestFederatedStreamDeadline(t *testing.T) {
	up, closed := stallingServer(t)
	tests := []struct {
		name           string
		mode           string
		timeout        time.Duration // FederatedStreamTimeout
		requestTimeout time.Duration // the route timeout
		wantLast       string        // a substring of the last event
		wantIsError    bool
		wantReset      bool
		wantUpClosed   bool
		wantOutcome    string // of toolmesh_tool_calls_total
	}{
		{name: "stalled stream ends with a timeout result", mode: "hang",
			timeout: 200 * time.Millisecond, requestTimeout: time.Minute,
			wantLast: "tool slow failed: timeout", wantIsError: true, wantUpClosed: true, wantOutcome: callTimeout},
		{name: "a stream that finishes is unchanged", mode: "finish",
			timeout: time.Minute, requestTimeout: time.Minute, wantLast: `"text":"done"`, wantOutcome: callOK},
		{name: "switched off, without the setting, the route timeout resets the stream", mode: "hang",
			requestTimeout: 500 * time.Millisecond, wantReset: true, wantUpClosed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No timeout: federatedStreamDeadline off, the behaviour of
			// earlier releases (TestRouteStreamDeadline has the default).
			front, env := duplexStack(t, up.URL, tt.requestTimeout, Config{FederatedStreamTimeout: tt.timeout, FederatedStreamDeadlineOff: tt.timeout == 0})
			resp := stallingCall(t, front.URL, front.Client(), tt.mode) // routedeadline_test.go
			defer resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			events, err := sseEvents(resp.Body)
			if len(events) == 0 || events[0] != progressEvent {
				t.Fatalf("events %q: the progress event is not first", events)
			}
			if tt.wantReset {
				if err == nil || len(events) != 1 {
					t.Fatalf("events %q, end %v: want the progress event and a reset", events, err)
				}
			} else {
				if err != nil {
					t.Fatalf("stream ended with %v after %q", err, events)
				}
				if len(events) != 2 || !strings.Contains(events[1], tt.wantLast) {
					t.Fatalf("events %q: want the progress event and a last one with %q", events, tt.wantLast)
				}
				var last struct {
					ID     json.RawMessage `json:"id"`
					Result struct {
						IsError bool `json:"isError"`
					} `json:"result"`
				}
				if err := json.Unmarshal([]byte(events[1]), &last); err != nil || string(last.ID) != "7" || last.Result.IsError != tt.wantIsError {
					t.Fatalf("last event %s: want id 7, isError %v (%v)", events[1], tt.wantIsError, err)
				}
			}
			if tt.wantUpClosed {
				select {
				case <-closed:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream request was not closed")
				}
			}
			if tt.wantOutcome != "" {
				// The ext_proc stream ends after the HTTP stream; wait for
				// its count.
				labels := map[string]string{"route": "core", "tool": "slow", "outcome": tt.wantOutcome}
				waitToolCallCounted(t, env, labels)
			}
		})
	}
}

// TestDuplexChunks: in FULL_DUPLEX_STREAMED the server passes complete
// events back unchanged and holds an incomplete one until its end (so a
// final event never lands inside it), passes everything once the response
// to the request went by, and the deadline drops a held partial event.
func TestDuplexChunks(t *testing.T) {
	progress := "event: message\ndata: " + progressEvent + "\n\n"
	final := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[]}}\n\n"
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gh_search","arguments":{},` + meta2026 + `}}`
	streamed := func(r *extprocv3.ProcessingResponse) (string, bool) {
		sr := r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			t.Fatalf("not a streamed response: %v", r)
		}
		return string(sr.GetBody()), sr.GetEndOfStream()
	}
	env := newTestEnv(t, Config{FederatedStreamTimeout: time.Hour}, federatedRoutes(t, "http://127.0.0.1:1"))
	v, _ := routeCall(t, env, call, stateless("tools/call", "gh_search")...)
	defer v.close()
	// The body is FULL_DUPLEX_STREAMED since the request headers
	// (TestDuplexOverrideAtRequestHeaders): the headers reply overrides
	// nothing.
	hr := v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream"))
	if hr.GetResponseHeaders() == nil || hr.GetModeOverride() != nil {
		t.Fatalf("response headers reply %v", hr)
	}
	steps := []struct {
		chunk    string
		eos      bool
		want     string
		wantEnds bool
	}{
		{chunk: progress + "event: mess", want: progress},
		{chunk: "age\ndata: " + progressEvent + "\n", want: ""},
		{chunk: "\n" + final[:20], want: "event: message\ndata: " + progressEvent + "\n\n"},
		{chunk: final[20:] + "data: after", want: final + "data: after"},
		{chunk: "\n\n", eos: true, want: "\n\n", wantEnds: true},
	}
	for i, s := range steps {
		body, eos := streamed(v.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: []byte(s.chunk), EndOfStream: s.eos}}}))
		if body != s.want || eos != s.wantEnds {
			t.Errorf("step %d: got %q (eos %v), want %q (eos %v)", i, body, eos, s.want, s.wantEnds)
		}
	}

	// The deadline: a held partial event is dropped, the final result
	// follows what was complete.
	x := env.srv.newRequest(t.Context())
	x.call = &mcp.Call{ID: json.RawMessage("9"), Era: mcp.EraStateless, Tool: "gh_search"}
	s := &federatedStream{call: &federatedCall{id: x.call.ID}, duplex: &duplexStream{}}
	x.kind = s
	if r := x.duplexDeadline(s); r != nil {
		t.Fatalf("deadline before any chunk sent %v; Envoy would refuse it", r)
	}
	body, eos := streamed(x.duplexChunk(s, &extprocv3.HttpBody{Body: []byte(progress + "data: {\"partial")}))
	if !eos || !strings.HasPrefix(body, progress+"event: message\ndata: {") || strings.Contains(body, "partial") ||
		!strings.Contains(body, `"id":9`) || !strings.Contains(body, `"isError":true`) {
		t.Fatalf("first chunk after an expired deadline: %q (eos %v)", body, eos)
	}
	if x.callOutcome != callTimeout {
		t.Errorf("outcome %q", x.callOutcome)
	}
}

// TestDuplexOverrideAtRequestHeaders: with federatedStreamTimeout set, the
// request-headers reply of every POST on a route with a federated MCP
// server switches the response body to FULL_DUPLEX_STREAMED (request body
// BUFFERED, response trailers SEND: the listener's allowed entry), so no
// chunk can race a response-headers reply (ADR 0013); the response-headers
// reply then overrides nothing, whether the stream passes unchanged, is
// translated, or is not a tools/call. A route without federated servers,
// and any route without the setting, get no override.
func TestDuplexOverrideAtRequestHeaders(t *testing.T) {
	call2026 := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gh_search","arguments":{},` + meta2026 + `}}`
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		path    string
		body    string
		extra   []string
		want    bool
	}{
		{"same era tools/call", time.Hour, "/mcp/fed", call2026, stateless("tools/call", "gh_search"), true},
		{"legacy client, translated", time.Hour, "/mcp/fed", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gh_search","arguments":{}}}`, nil, true},
		{"resources/read", time.Hour, "/mcp/fed", `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"gh://readme",` + meta2026 + `}}`,
			stateless("resources/read", "gh://readme"), true},
		{"without the setting", 0, "/mcp/fed", call2026, stateless("tools/call", "gh_search"), false},
		{"route without federated servers", time.Hour, "/mcp/core", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes := federatedRoutes(t, "http://127.0.0.1:1")
			routes["/mcp/core"] = testTable(t)["/mcp/core"]
			env := newTestEnv(t, Config{FederatedStreamTimeout: tc.timeout}, routes)
			v := env.open(t)
			defer v.close()
			rh := v.send(reqHeaders(false, post(tc.path, len(tc.body), tc.extra...)...))
			mo := rh.GetModeOverride()
			if !tc.want {
				if mo != nil {
					t.Fatalf("request headers reply overrides %v", mo)
				}
				return
			}
			if mo.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
				mo.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_BUFFERED ||
				mo.GetResponseTrailerMode() != extprocfilterv3.ProcessingMode_SEND || rh.GetRequestHeaders() == nil {
				t.Fatalf("request headers reply %v", rh)
			}
			if r := v.send(reqBody(tc.body)); r.GetRequestBody() == nil {
				t.Fatalf("not routed: %v", r)
			}
			hr := v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream"))
			if hr.GetResponseHeaders() == nil || hr.GetModeOverride() != nil {
				t.Fatalf("response headers reply %v", hr)
			}
		})
	}
}
