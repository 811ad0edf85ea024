package extproc

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// sessionServer is a 2025-11-25 MCP server that requires the session it
// opened (so the gateway calls it in its shared legacy session, with ids
// of its own). Its tool "slow" answers by arguments.mode: "hang" an event
// stream with one progress event and then nothing until the request goes
// away (reported on closed), "finish" that stream and then the response,
// "json" a JSON response, "fail" HTTP 500. The ids it was called with
// arrive on ids.
type sessionServer struct {
	*httptest.Server
	closed chan struct{}
	ids    chan string
}

// secretText is in every result of the server: a result filter redacts it.
const secretText = "ssn 123-45-6789"

func newSessionServer(t *testing.T) *sessionServer {
	s := &sessionServer{closed: make(chan struct{}, 8), ids: make(chan string, 64)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Mode string `json:"mode"`
				} `json:"arguments"`
				Meta struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "sess-1")
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`)
			return
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if r.Header.Get("Mcp-Session-Id") != "sess-1" {
			http.Error(w, "Bad Request: no session", http.StatusBadRequest)
			return
		}
		select {
		case s.ids <- string(m.ID):
		default:
		}
		result := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"` + secretText + `"}]}}`
		switch m.Params.Arguments.Mode {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, result)
			return
		case "fail":
			http.Error(w, "internal failure", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		tok := m.Params.Meta.ProgressToken
		if len(tok) == 0 {
			tok = json.RawMessage(`"none"`)
		}
		_, _ = io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+string(tok)+`,"progress":1}}`+"\n\n")
		w.(http.Flusher).Flush()
		if m.Params.Arguments.Mode == "finish" {
			_, _ = io.WriteString(w, "event: message\ndata: "+result+"\n\n")
			return
		}
		<-r.Context().Done()
		s.closed <- struct{}{}
	}))
	t.Cleanup(s.Close)
	return s
}

// nativeService is a Tool Service "nat": {"ok":true}, or by arguments
// "fail" HTTP 503 and "big" a reply past the response limit.
func nativeService(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(b), "fail"):
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		case strings.Contains(string(b), "progress"):
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, `{"progress":1,"total":2}`+"\n")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, `{"result":{"content":[{"type":"text","text":"done"}]}}`+"\n")
		case strings.Contains(string(b), "big"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"pad":"`+strings.Repeat("x", 3*testResponseLimit)+`"}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// testResponseLimit is MaxResponseBytes in these tests.
const testResponseLimit = 100 << 10

// mixedStack serves route "core" through the local data plane: the legacy
// session server "old" (tool "slow"), a 2026-07-28 server "new" (tool
// "fast", the same handler) and the native Tool Service "nat";
// requestTimeout is the MCP servers' route timeout.
func mixedStack(t *testing.T, legacyURL, nativeURL string, requestTimeout time.Duration, cfg Config) (*httptest.Server, *testEnv) {
	t.Helper()
	return mixedStackWith(t, legacyURL, nativeURL, requestTimeout, cfg, nil)
}

// mixedStackWith is mixedStack with an edit of the translated resources
// (serveThroughDataPlaneEdited).
func mixedStackWith(t *testing.T, legacyURL, nativeURL string, requestTimeout time.Duration, cfg Config, edit func(*xds.Resources)) (*httptest.Server, *testEnv) {
	t.Helper()
	cl := &registry.ClusterSettings{RequestTimeout: config.Duration(requestTimeout)}
	route := registry.Route{Key: "core", PublicPath: "/mcp/core", ToolServices: []registry.ToolService{
		{Name: "old", URL: legacyURL + "/mcp", Protocol: registry.ProtocolMCP, Cluster: cl},
		{Name: "nat", URL: nativeURL},
		// Nothing listens there: Envoy answers itself (503).
		{Name: "gone", URL: "http://127.0.0.1:1"},
	}}
	obj := json.RawMessage(`{"type":"object"}`)
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{
		"old": {Tools: []registry.ManifestTool{{Name: "slow", InputSchema: obj}},
			MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20251125}},
		"nat":  {Tools: []registry.ManifestTool{{Name: "nat", InputSchema: obj}}},
		"gone": {Tools: []registry.ManifestTool{{Name: "gone", InputSchema: obj}}},
	})
	cfg.MaxResponseBytes = testResponseLimit
	env := newTestEnv(t, cfg, testRoutes{"/mcp/core": {key: "core", snap: snap}})
	return serveThroughDataPlaneEdited(t, env, route, xds.Options{}, edit), env
}

// clientCall is a tools/call of tool with arguments args and progress token
// "tok-1", as a client of era sends it, with the JSON-RPC id "c-7".
func clientCall(t *testing.T, front *httptest.Server, era mcp.Era, tool, args string) *http.Response {
	t.Helper()
	meta := `"_meta":{"progressToken":"tok-1"}`
	if era == mcp.EraStateless {
		meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"tok-1"}`
	}
	body := `{"jsonrpc":"2.0","id":"c-7","method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + meta + `}}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", front.URL+"/mcp/core", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if era == mcp.EraStateless {
		req.Header.Set("MCP-Protocol-Version", mcp.Version20260728)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
	} else {
		req.Header.Set("MCP-Protocol-Version", mcp.Version20251125)
	}
	resp, err := front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// streamedCall is one call's events as the client read them.
type streamedCall struct {
	status      int
	contentType string
	events      []string
	end         error // nil: a clean end of stream
}

func readStream(resp *http.Response) streamedCall {
	events, err := sseEvents(resp.Body)
	return streamedCall{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), events: events, end: err}
}

// redactFilters redacts secretText and the word "timeout" from results.
func redactFilters(t *testing.T) *filters.Set {
	return buildFilters(t, `
definitions:
  - {name: hide, type: redact, config: {patterns: ['\b\d{3}-\d{2}-\d{4}\b', 'timeout']}}
defaults: [hide]
`)
}

// TestDuplexStreamDeadlineTranslated: with federatedStreamTimeout below the
// route timeout, a never-ending event stream that the gateway rewrites
// (the shared legacy session's ids remapped, translated for a client of
// the other era, filtered) ends, through the local data plane, with the
// progress event as the client gets it (its progress token), then the
// isError "timeout" result for the client's id in the client's era (through
// the route's result filters), then a clean end; the server's request is
// closed and the call counts as timeout. Without the setting, and with
// federatedStreamDeadline off, the route timeout resets the same stream
// (the control case).
func TestDuplexStreamDeadlineTranslated(t *testing.T) {
	srv := newSessionServer(t)
	nat := nativeService(t)
	tests := []struct {
		name           string
		era            mcp.Era
		filtered       bool
		timeout        time.Duration
		requestTimeout time.Duration
		wantReset      bool
		wantText       string // in the last event's text
	}{
		{name: "legacy client, shared session (ids remapped)", era: mcp.EraLegacy,
			timeout: 300 * time.Millisecond, requestTimeout: time.Minute, wantText: "tool slow failed: timeout"},
		{name: "2026-07-28 client, translated and remapped", era: mcp.EraStateless,
			timeout: 300 * time.Millisecond, requestTimeout: time.Minute, wantText: "tool slow failed: timeout"},
		{name: "result filters on the route", era: mcp.EraLegacy, filtered: true,
			timeout: 300 * time.Millisecond, requestTimeout: time.Minute, wantText: "tool slow failed: [redacted]"},
		{name: "switched off, without the setting, the route timeout resets", era: mcp.EraLegacy,
			requestTimeout: 500 * time.Millisecond, wantReset: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{FederatedStreamTimeout: tt.timeout, FederatedStreamDeadlineOff: tt.timeout == 0}
			if tt.filtered {
				runtimeOf(&cfg).Filters = redactFilters(t)
			}
			front, env := mixedStack(t, srv.URL, nat.URL, tt.requestTimeout, cfg)
			got := readStream(clientCall(t, front, tt.era, "slow", `{"mode":"hang"}`))
			if got.status != 200 || !reqheaders.IsEventStream(got.contentType) {
				t.Fatalf("status %d, content type %q", got.status, got.contentType)
			}
			select {
			case id := <-srv.ids:
				if id == `"c-7"` {
					t.Fatalf("the server got the client's id %s: not the shared session's", id)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server got no call")
			}
			if len(got.events) == 0 {
				t.Fatalf("no events (end %v)", got.end)
			}
			var progress struct {
				Method string `json:"method"`
				Params struct {
					ProgressToken string `json:"progressToken"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte(got.events[0]), &progress); err != nil ||
				progress.Method != "notifications/progress" || progress.Params.ProgressToken != "tok-1" {
				t.Fatalf("first event %s: want the progress notification with the client's token", got.events[0])
			}
			if tt.wantReset {
				if got.end == nil || len(got.events) != 1 {
					t.Fatalf("events %q, end %v: want the progress event and a reset", got.events, got.end)
				}
			} else {
				if got.end != nil || len(got.events) != 2 {
					t.Fatalf("events %q, end %v: want the progress event, a result, a clean end", got.events, got.end)
				}
				var last struct {
					ID     json.RawMessage `json:"id"`
					Result struct {
						IsError    bool   `json:"isError"`
						ResultType string `json:"resultType"`
						Content    []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"result"`
				}
				if err := json.Unmarshal([]byte(got.events[1]), &last); err != nil || string(last.ID) != `"c-7"` ||
					!last.Result.IsError || len(last.Result.Content) == 0 || !strings.Contains(last.Result.Content[0].Text, tt.wantText) {
					t.Fatalf("last event %s: want id \"c-7\", isError, text with %q (%v)", got.events[1], tt.wantText, err)
				}
				// The client's era: resultType only in 2026-07-28.
				if wantRT := tt.era == mcp.EraStateless; (last.Result.ResultType != "") != wantRT {
					t.Errorf("last event %s: resultType for era %v", got.events[1], tt.era)
				}
			}
			select {
			case <-srv.closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the server's request was not closed")
			}
			if !tt.wantReset {
				labels := map[string]string{"route": "core", "tool": "slow", "outcome": callTimeout}
				waitToolCallCounted(t, env, labels)
			}
		})
	}
}

// TestDuplexResponsesUnchanged: on a route whose responses are
// FULL_DUPLEX_STREAMED because of the setting, what the client gets is what
// it gets without the setting: a finishing translated stream (every event,
// in order, the result filtered), JSON answers of the federated server
// (also its HTTP 500 mapped to an isError result) and of the native Tool
// Service (its 503 mapped, and a reply past the response limit answered as
// too large), and Envoy's own local reply for a Tool Service it cannot
// reach. Only content-length differs: a body Envoy streams has none.
func TestDuplexResponsesUnchanged(t *testing.T) {
	srv := newSessionServer(t)
	nat := nativeService(t)
	calls := []struct {
		name, tool, args string
		era              mcp.Era
		json             bool   // a JSON answer, else an event stream
		want             string // in the answer
	}{
		{"finishing stream, legacy client", "slow", `{"mode":"finish"}`, mcp.EraLegacy, false, "[redacted]"},
		{"finishing stream, 2026-07-28 client", "slow", `{"mode":"finish"}`, mcp.EraStateless, false, "[redacted]"},
		{"federated JSON", "slow", `{"mode":"json"}`, mcp.EraLegacy, true, "[redacted]"},
		{"federated HTTP 500", "slow", `{"mode":"fail"}`, mcp.EraStateless, true, `"isError":true`},
		{"native JSON", "nat", `{}`, mcp.EraLegacy, true, `"ok":true`},
		{"native 503", "nat", `{"a":"fail"}`, mcp.EraStateless, true, `"isError":true`},
		{"native too large", "nat", `{"a":"big"}`, mcp.EraLegacy, true, "too large"},
		{"native progress stream", "nat", `{"a":"progress"}`, mcp.EraLegacy, false, `"text":"done"`},
		{"Envoy's local reply (connect failure)", "gone", `{}`, mcp.EraLegacy, true, `"isError":true`},
	}
	type answer struct {
		status      int
		contentType string
		body        string
	}
	run := func(timeout time.Duration) ([]answer, []int64) {
		// Without the setting: federatedStreamDeadline off too, so that
		// the responses are BUFFERED as in earlier releases.
		front, _ := mixedStack(t, srv.URL, nat.URL, time.Minute, Config{FederatedStreamTimeout: timeout, FederatedStreamDeadlineOff: timeout == 0, Runtime: &Runtime{Filters: redactFilters(t)}})
		var out []answer
		var lengths []int64
		for _, c := range calls {
			resp := clientCall(t, front, c.era, c.tool, c.args)
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("%s (setting %v): %v", c.name, timeout, err)
			}
			out = append(out, answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)})
			lengths = append(lengths, resp.ContentLength)
		}
		return out, lengths
	}
	without, withoutCL := run(0)
	with, withCL := run(time.Minute)
	for i, c := range calls {
		if with[i] != without[i] {
			t.Errorf("%s:\nwith the setting    %+v\nwithout the setting %+v", c.name, with[i], without[i])
		}
		// The JSON answers took the FULL_DUPLEX_STREAMED path: streamed
		// back, they have no content-length.
		if c.json && (withCL[i] != -1 || withoutCL[i] != int64(len(without[i].body))) {
			t.Errorf("%s: content-length %d with the setting, %d without", c.name, withCL[i], withoutCL[i])
		}
		if strings.Contains(with[i].body, "123-45-6789") {
			t.Errorf("%s: the result filter did not run: %s", c.name, with[i].body)
		}
		// The answers are what each case is about (so equal answers are
		// not equally broken).
		if !strings.Contains(with[i].body, c.want) {
			t.Errorf("%s: %q lacks %q", c.name, with[i].body, c.want)
		}
		if n := strings.Count(with[i].body, "data: "); !c.json && (n != 2 || !reqheaders.IsEventStream(with[i].contentType)) {
			t.Errorf("%s: %d events (%q), want the progress event and the result", c.name, n, with[i].body)
		}
	}
}

// TestDuplexBufferedAnswer: a JSON answer on a FULL_DUPLEX_STREAMED route
// gets no reply to its headers until its body ended; then the buffered
// logic's result goes back as the headers reply (no content-length: Envoy
// removes it in this mode) and StreamedBodyResponse messages of at most
// 64 KiB, the last with end_of_stream, whose bytes are the body the
// BUFFERED path gives.
func TestDuplexBufferedAnswer(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	big := `{"pad":"` + strings.Repeat("x", 150<<10) + `"}`
	headers := respHeaders(false, ":status", "200", "content-type", "application/json", "content-length", strconv.Itoa(len(big)))

	// Without the setting: BUFFERED, one body message.
	env := newTestEnv(t, Config{}, federatedRoutes(t, "http://127.0.0.1:1"))
	v, _ := routeCall(t, env, call)
	v.send(headers)
	want := string(v.send(respBody(big)).GetResponseBody().GetResponse().GetBodyMutation().GetBody())
	v.close()
	if !strings.Contains(want, `"id":5`) {
		t.Fatalf("buffered result %.200s", want)
	}

	env = newTestEnv(t, Config{FederatedStreamTimeout: time.Hour}, federatedRoutes(t, "http://127.0.0.1:1"))
	v, _ = routeCall(t, env, call)
	defer v.close()
	chunks := []*extprocv3.ProcessingRequest{headers,
		{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(big[:100<<10])}}},
		{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(big[100<<10:]), EndOfStream: true}}},
	}
	for _, c := range chunks {
		if err := v.stream.Send(c); err != nil {
			t.Fatal(err)
		}
	}
	// The first message is the headers reply: nothing was answered before
	// the end of the body.
	r, err := v.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	hm := r.GetResponseHeaders().GetResponse().GetHeaderMutation()
	if h := setOf(t, hm); r.GetResponseHeaders() == nil || h[":status"] != "200" || h["content-type"] != procmsg.ContentTypeJSON || h["content-length"] != "" {
		t.Fatalf("first message %v: want the held headers reply", r)
	}
	var got strings.Builder
	for n := 0; ; n++ {
		r, err := v.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		sr := r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil || len(sr.GetBody()) > maxStreamedBody {
			t.Fatalf("message %d: %.200v, want a streamed response of at most 64 KiB", n, r)
		}
		got.Write(sr.GetBody())
		if sr.GetEndOfStream() {
			if n == 0 {
				t.Error("one streamed response for a body over 64 KiB")
			}
			break
		}
	}
	if got.String() != want {
		t.Errorf("streamed body (%d bytes) differs from the buffered one (%d bytes)", got.Len(), len(want))
	}
}

// TestDuplexSessionExpired: on a FULL_DUPLEX_STREAMED route, the result of
// a call re-issued after a 404 of the gateway's session (made at the
// response headers) waits for the first body chunk, since Envoy takes a
// body response only once it sent one; then the headers reply (HTTP 200,
// JSON, no content-length) and the result with end_of_stream follow.
func TestDuplexSessionExpired(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{FederatedStreamTimeout: time.Hour}, federatedRoutes(t, ls.URL))
	body := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	v := env.open(t)
	defer v.close()
	if rh := v.send(reqHeaders(false, post("/mcp/fed", len(body))...)); rh.GetModeOverride() == nil {
		t.Fatal("no override at the request headers")
	}
	v.send(reqBody(body))
	ls.live.Store("") // the server restarts
	for _, m := range []*extprocv3.ProcessingRequest{
		respHeaders(false, ":status", "404", "content-type", "text/plain"),
		{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte("session not found\n"), EndOfStream: true}}},
	} {
		if err := v.stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	r, err := v.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if set := setOf(t, r.GetResponseHeaders().GetResponse().GetHeaderMutation()); r.GetResponseHeaders() == nil ||
		r.GetResponseHeaders().GetResponse().GetStatus() != extprocv3.CommonResponse_CONTINUE || set[":status"] != "200" {
		t.Fatalf("first message %v: want the headers reply", r)
	}
	r, err = v.stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	sr := r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	if sr == nil || !sr.GetEndOfStream() {
		t.Fatalf("second message %v: want the streamed result", r)
	}
	if res := decodeResult(t, sr.GetBody(), "8"); res.IsError || res.Content[0].Text != "again" {
		t.Errorf("result %+v", res)
	}
}
