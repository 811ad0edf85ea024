package extproc

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/mcp"
)

// sseMessage is one decoded event of a streamed answer: a progress
// notification or the JSON-RPC response.
type sseMessage struct {
	Method string `json:"method"`
	Params struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      float64         `json:"progress"`
		Total         *float64        `json:"total"`
		Message       string          `json:"message"`
	} `json:"params"`
	raw []byte
}

// parseEvents splits an event stream into the data of its events, failing
// on anything that is not "event: message" plus data lines.
func parseEvents(t *testing.T, stream []byte) []sseMessage {
	t.Helper()
	var out []sseMessage
	for ev := range strings.SplitSeq(strings.TrimSuffix(string(stream), "\n\n"), "\n\n") {
		if ev == "" {
			continue
		}
		var data []string
		for line := range strings.SplitSeq(ev, "\n") {
			switch {
			case line == "event: message":
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			default:
				t.Fatalf("unexpected event line %q in %q", line, stream)
			}
		}
		raw := []byte(strings.Join(data, "\n"))
		var m sseMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("event data is not JSON: %v: %s", err, raw)
		}
		m.raw = raw
		out = append(out, m)
	}
	return out
}

// TestProgressStream drives a native Tool Service's progress stream
// (application/x-ndjson) through the response phases: with a progress token
// and an event-stream Accept the body is STREAMED and each complete line
// becomes an event as its chunk arrives; without, the body stays BUFFERED
// and one JSON result comes back.
func TestProgressStream(t *testing.T) {
	env := newTestEnv(t, Config{MaxResponseBytes: 1 << 20}, testTable(t))
	const (
		legacyTok = `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"progressToken":"p-1"}}}`
		legacyNo  = `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
		modernTok = `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{},` +
			`"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		modernNo = `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta2026 + `}}`
	)
	p1 := `{"progress":1,"total":3,"message":"größe ✓"}` + "\n"
	p2 := `{"progress":2.5}` + "\n"
	res := `{"result":{"content":[{"type":"text","text":"done"}]}}` + "\n"
	cut := strings.Index(p1, "✓") + 1 // inside the three bytes of ✓
	type progress struct {
		progress float64
		total    float64 // 0: absent
		message  string
	}
	tests := []struct {
		name      string
		body      string
		extra     []string
		accept    string
		chunks    []string
		stream    bool
		token     string
		progress  []progress
		isError   bool
		text      string // the result's first text item contains it
		stateless bool
	}{
		{name: "legacy, lines and a rune split across chunks", body: legacyTok, stream: true, token: `"p-1"`,
			chunks:   []string{p1[:cut], p1[cut:] + p2[:4], p2[4:], res[:10], res[10:]},
			progress: []progress{{1, 3, "größe ✓"}, {2.5, 0, ""}}, text: "done"},
		{name: "2026, numeric token", body: modernTok, extra: stateless("tools/call", "echo"), stream: true, token: `7`,
			chunks: []string{p1, p2 + res}, progress: []progress{{1, 3, "größe ✓"}, {2.5, 0, ""}}, text: "done", stateless: true},
		{name: "result without its newline, CRLF lines", body: legacyTok, stream: true, token: `"p-1"`,
			chunks:   []string{strings.TrimSuffix(p1, "\n") + "\r\n", strings.TrimSuffix(res, "\n")},
			progress: []progress{{1, 3, "größe ✓"}}, text: "done"},
		{name: "plain JSON result value", body: legacyTok, stream: true, token: `"p-1"`,
			chunks: []string{p1, `{"result":{"temp":21}}` + "\n"}, progress: []progress{{1, 3, "größe ✓"}}, text: `{"temp":21}`},
		{name: "a frame that is not JSON", body: legacyTok, stream: true, token: `"p-1"`,
			chunks:   []string{p1, "oops\n", res},
			progress: []progress{{1, 3, "größe ✓"}}, isError: true, text: "not a JSON object: oops"},
		{name: "an unknown frame", body: modernTok, extra: stateless("tools/call", "echo"), stream: true, token: `7`,
			chunks: []string{`{"status":"x"}` + "\n", res}, isError: true, text: "neither a progress, result nor error frame", stateless: true},
		{name: "progress that is not a number", body: legacyTok, stream: true, token: `"p-1"`,
			chunks: []string{`{"progress":"half"}` + "\n", res}, isError: true, text: "not a number"},
		{name: "no result frame", body: legacyTok, stream: true, token: `"p-1"`,
			chunks: []string{p1, p2}, progress: []progress{{1, 3, "größe ✓"}, {2.5, 0, ""}},
			isError: true, text: "tool echo failed: the Tool Service ended its stream without a result"},
		{name: "2026, no result frame", body: modernTok, extra: stateless("tools/call", "echo"), stream: true, token: `7`,
			chunks: []string{p1}, progress: []progress{{1, 3, "größe ✓"}},
			isError: true, text: "the Tool Service ended its stream without a result", stateless: true},
		{name: "error frame", body: legacyTok, stream: true, token: `"p-1"`,
			chunks: []string{p1, `{"error":"disk full"}` + "\n"}, progress: []progress{{1, 3, "größe ✓"}},
			isError: true, text: "tool echo failed: the Tool Service reported an error: disk full"},
		{name: "frames after the result are dropped", body: legacyTok, stream: true, token: `"p-1"`,
			chunks: []string{res, p1, "junk\n"}, text: "done"},
		{name: "legacy, no progress token: JSON", body: legacyNo, chunks: []string{p1 + p2 + res}, text: "done"},
		{name: "2026, no progress token: JSON", body: modernNo, extra: stateless("tools/call", "echo"),
			chunks: []string{p1 + res}, text: "done", stateless: true},
		{name: "token, but JSON accepted only", body: legacyTok, accept: "application/json",
			chunks: []string{p1 + res}, text: "done"},
		{name: "no token, no result: JSON error", body: legacyNo, chunks: []string{p1},
			isError: true, text: "ended its stream without a result"},
		{name: "a line over the reply limit", body: legacyTok, stream: true, token: `"p-1"`,
			chunks:  []string{`{"progress":1,"message":"` + strings.Repeat("x", 1<<20), `"}` + "\n" + res},
			isError: true, text: "response too large"},
		{name: "no token, over the reply limit", body: legacyNo, chunks: []string{strings.Repeat(" ", 1<<20) + res},
			isError: true, text: "response too large"},
		{name: "no token, bad frame: JSON error", body: legacyNo, chunks: []string{"[1]\n" + res},
			isError: true, text: "not a JSON object: [1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			defer v.close()
			extra := tc.extra
			if tc.accept != "" {
				extra = append(slices.Clone(extra), "accept", tc.accept)
			}
			v.send(reqHeaders(false, post("/mcp/core", len(tc.body), extra...)...))
			if v.send(reqBody(tc.body)).GetRequestBody() == nil {
				t.Fatal("request body not routed")
			}
			resp := v.send(respHeaders(false, ":status", "200", "content-type", "application/x-ndjson", "content-length", "999"))
			hm := resp.GetResponseHeaders().GetResponse().GetHeaderMutation()
			var final []byte
			if tc.stream {
				want := &extprocfilterv3.ProcessingMode{
					RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
				if !proto.Equal(resp.GetModeOverride(), want) {
					t.Fatalf("mode_override %v, want %v", resp.GetModeOverride(), want)
				}
				if set := setOf(t, hm); set[":status"] != "200" || set["content-type"] != "text/event-stream" {
					t.Errorf("set_headers %v, want :status 200 and content-type text/event-stream", set)
				}
				if !slices.Contains(hm.GetRemoveHeaders(), "content-length") {
					t.Errorf("remove_headers %v, want content-length", hm.GetRemoveHeaders())
				}
				var stream []byte
				for i, c := range tc.chunks {
					out := v.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
						ResponseBody: &extprocv3.HttpBody{Body: []byte(c)}}}).GetResponseBody().GetResponse().GetBodyMutation()
					if out == nil {
						t.Fatalf("chunk %d passed unchanged: the raw frames would reach the client", i)
					}
					b := out.GetBody()
					if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n\n")) {
						t.Fatalf("chunk %d answered with an incomplete event: %q", i, b)
					}
					stream = append(stream, b...)
					if i == 0 && len(tc.progress) > 0 {
						// The first progress event leaves with the chunk
						// that completes its line, not at the end.
						complete := strings.HasSuffix(tc.chunks[0], "\n")
						if n := len(parseEvents(t, stream)); complete != (n == 1) {
							t.Fatalf("after chunk %q: %d events, want 1 only when its line is complete", tc.chunks[0], n)
						}
					}
				}
				end := v.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
					ResponseBody: &extprocv3.HttpBody{EndOfStream: true}}}).GetResponseBody().GetResponse().GetBodyMutation()
				if end == nil {
					t.Fatal("end of stream passed unchanged")
				}
				stream = append(stream, end.GetBody()...)
				msgs := parseEvents(t, stream)
				if len(msgs) != len(tc.progress)+1 {
					t.Fatalf("%d events, want %d progress events and the result:\n%s", len(msgs), len(tc.progress), stream)
				}
				for i, want := range tc.progress {
					m := msgs[i]
					if m.Method != "notifications/progress" || string(m.Params.ProgressToken) != tc.token ||
						m.Params.Progress != want.progress || m.Params.Message != want.message ||
						(want.total == 0) != (m.Params.Total == nil) || (m.Params.Total != nil && *m.Params.Total != want.total) {
						t.Errorf("event %d = %s, want progress %+v with token %s", i, m.raw, want, tc.token)
					}
				}
				final = msgs[len(msgs)-1].raw
			} else {
				if resp.GetModeOverride() != nil {
					t.Fatalf("mode_override %v, want none (BUFFERED)", resp.GetModeOverride())
				}
				cr := v.send(respBody(strings.Join(tc.chunks, ""))).GetResponseBody().GetResponse()
				set := setOf(t, cr.GetHeaderMutation())
				final = cr.GetBodyMutation().GetBody()
				if set["content-type"] != "application/json" || set["content-length"] != strconv.Itoa(len(final)) {
					t.Errorf("set_headers %v, want JSON with content-length %d", set, len(final))
				}
			}
			r := decodeResult(t, final, "11")
			if r.IsError != tc.isError || len(r.Content) == 0 || !strings.Contains(r.Content[0].Text, tc.text) {
				t.Errorf("result %s, want isError %v and text containing %q", final, tc.isError, tc.text)
			}
			var envl struct {
				Result struct {
					ResultType string                     `json:"resultType"`
					Meta       map[string]json.RawMessage `json:"_meta"`
				} `json:"result"`
			}
			if err := json.Unmarshal(final, &envl); err != nil {
				t.Fatal(err)
			}
			_, info := envl.Result.Meta[mcp.MetaServerInfo]
			if tc.stateless != (envl.Result.ResultType == "complete" && info) {
				t.Errorf("result %s: resultType/serverInfo present = %v, want %v", final, !tc.stateless, tc.stateless)
			}
		})
	}
	// Error frames are answers (ok); broken or unfinished streams are not.
	for outcome, want := range map[string]float64{callOK: 9, callToolError: 7} {
		labels := map[string]string{"route": "core", "tool": "echo", "outcome": outcome}
		if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", labels); got != want {
			t.Errorf("tool_calls_total%v = %v, want %v", labels, got, want)
		}
	}
}
