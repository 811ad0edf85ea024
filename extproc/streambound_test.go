package extproc

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// floodServer is a hostile 2026-07-28 MCP server: its tool "slow" answers
// with an event stream that never ends an event ({"mode":"endless"}), or
// that sends its response and then floods complete progress events
// ({"mode":"after"}). Each sends flood bytes, then ends.
func floodServer(t *testing.T, flood int) *httptest.Server {
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
		chunk := strings.Repeat("x", 4096)
		if m.Params.Arguments.Mode == "after" {
			_, _ = io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":"done"}],"resultType":"complete"}}`+"\n\n")
			chunk = "event: message\ndata: " + progressEvent + "\n\n"
		} else {
			_, _ = io.WriteString(w, "event: message\ndata: {")
		}
		for n := 0; n < flood; n += len(chunk) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFederatedStreamBounds: a federated server's event stream is bounded
// on every path, through the local data plane: with the stream deadline
// off (the stream passes unchanged, formerly without ext_proc) and on
// (FULL_DUPLEX_STREAMED). An event that never ends is cut at
// MaxResponseBytes and the client gets an isError result for its call; a
// flood after the response is dropped past the bound. Without the bounds
// the client would get every flooded byte.
func TestFederatedStreamBounds(t *testing.T) {
	const limit, flood = 16 << 10, 512 << 10
	up := floodServer(t, flood)
	for _, tc := range []struct {
		name     string
		cfg      Config
		mode     string
		wantLast string // a substring of the last event
	}{
		{"pass-through: an endless event", Config{MaxResponseBytes: limit, FederatedStreamDeadlineOff: true}, "endless", `"isError":true`},
		{"pass-through: a flood after the response", Config{MaxResponseBytes: limit, FederatedStreamDeadlineOff: true}, "after", `"text":"done"`},
		{"with the deadline: an endless event", Config{MaxResponseBytes: limit, FederatedStreamTimeout: time.Minute}, "endless", `"isError":true`},
		{"with the deadline: a flood after the response", Config{MaxResponseBytes: limit, FederatedStreamTimeout: time.Minute}, "after", `"text":"done"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			front, _ := duplexStack(t, up.URL, time.Minute, tc.cfg)
			resp := stallingCall(t, front.URL, front.Client(), tc.mode)
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 2*flood))
			if err != nil {
				t.Fatalf("read: %v after %d bytes", err, len(body))
			}
			if len(body) > limit+4096 {
				t.Fatalf("the client got %d bytes of a %d-byte flood; the bound is %d", len(body), flood, limit)
			}
			events, _ := sseEvents(strings.NewReader(string(body)))
			var answers []string
			for _, ev := range events {
				if strings.Contains(ev, `"id":7`) {
					answers = append(answers, ev)
				}
			}
			if len(answers) != 1 || !strings.Contains(answers[0], tc.wantLast) {
				t.Fatalf("answers to the call %q: want one, with %s", answers, tc.wantLast)
			}
		})
	}
}
