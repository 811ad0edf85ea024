package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// scriptedUpstream is a legacy MCP server whose GET stream of a session
// writes what the test sends on that session's channel; closing the
// channel ends the stream.
type scriptedUpstream struct {
	*httptest.Server
	mu        sync.Mutex
	sessions  map[string]chan string
	connected chan string // the session of each GET that came
	auth      chan string // its Authorization
}

func newScriptedUpstream(t *testing.T, sessions ...string) *scriptedUpstream {
	u := &scriptedUpstream{sessions: map[string]chan string{}, connected: make(chan string, 8), auth: make(chan string, 8)}
	for _, s := range sessions {
		u.sessions[s] = make(chan string, 8)
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		ch := u.sessions[r.Header.Get("Mcp-Session-Id")]
		u.mu.Unlock()
		if r.Method != http.MethodGet || ch == nil || r.Header.Get("Mcp-Protocol-Version") != "2025-11-25" {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		u.auth <- r.Header.Get("Authorization")
		u.connected <- r.Header.Get("Mcp-Session-Id")
		for {
			select {
			case <-r.Context().Done():
				return
			case ev, ok := <-ch:
				if !ok {
					return
				}
				_, _ = w.Write([]byte(ev))
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// recv waits for a value of ch (bounded).
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
	}
	var zero T
	return zero
}

// followSnap is route r with two legacy servers that keep sessions: "up"
// serves test://watched, "other" serves test://other.
func followSnap(t *testing.T, url string) *registry.Snapshot {
	t.Helper()
	man := func(uri string) *registry.Manifest {
		return &registry.Manifest{MCP: &registry.MCPManifest{ProtocolVersion: "2025-11-25", Logging: true, Subscribe: true,
			Resources: []json.RawMessage{json.RawMessage(`{"uri":"` + uri + `","name":"n"}`)}}}
	}
	rt := registry.Route{Key: "r", ToolServices: []registry.ToolService{
		{Name: "up", URL: url + "/mcp", Protocol: registry.ProtocolMCP},
		{Name: "other", URL: url + "/other", Protocol: registry.ProtocolMCP},
	}}
	s, err := registry.BuildSnapshot(rt, map[string]*registry.Manifest{"up": man("test://watched"), "other": man("test://other")}, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ticket(t *testing.T, keys *session.Keys, route string, services ...string) string {
	t.Helper()
	f := session.Follow{Route: route}
	for _, s := range services {
		f.Upstreams = append(f.Upstreams, session.FollowUpstream{
			Upstream: session.Upstream{Service: s, Version: "2025-11-25", Session: "sess-" + s},
			Headers:  map[string]string{"Authorization": "Bearer k"}})
	}
	tok, err := keys.SealFollow(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func sse(msg string) string { return "event: message\ndata: " + msg + "\n\n" }

// TestFollowUpstream: a legacy stream with a follow ticket holds the GET
// stream of the client's upstream session, with the ticket's headers, and
// passes on its resources/updated for a URI that server serves (pretty
// JSON compacted, so it cannot write SSE fields of its own) and its log
// messages; a server's request, and an update of a URI another server
// serves, are not passed; a list_changed re-lists the route. When the
// server ends its stream, the client's stream ends, so the client opens it
// again with a new ticket.
func TestFollowUpstream(t *testing.T) {
	up := newScriptedUpstream(t, "sess-up")
	src := newFakeSource()
	src.set(followSnap(t, up.URL))
	keys := session.Generate()
	relisted := make(chan string, 4)
	_, url := start(t, src, Options{KeepAlive: time.Hour, Upstreams: &Upstreams{
		Keys: func() *session.Keys { return keys }, Client: upstream.New(upstream.Options{}),
		Relist: func(_ context.Context, route string) error { relisted <- route; return nil }}})
	h := headers("r", "tools,resources", "", "")
	h[wire.FollowHeader] = ticket(t, keys, "r", "up")
	c, resp := open(t, url, h)
	if resp.StatusCode != 200 {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	if got := recv(t, up.connected, "upstream GET"); got != "sess-up" {
		t.Fatalf("GET on session %q", got)
	}
	if a := recv(t, up.auth, "Authorization"); a != "Bearer k" {
		t.Errorf("upstream GET Authorization %q, want the ticket's", a)
	}
	ch := up.sessions["sess-up"]
	ch <- sse(`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`)
	ch <- sse(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://other"}}`)
	ch <- "data: {\"jsonrpc\":\"2.0\",\ndata:  \"method\":\"notifications/resources/updated\",\ndata: \"params\":{\"uri\":\"test://watched\"}}\n\n"
	ch <- sse(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
	ch <- sse(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
	m, msg := c.method(t)
	if p, _ := msg["params"].(map[string]any); m != "notifications/resources/updated" || p["uri"] != "test://watched" {
		t.Fatalf("first message %s %v, want resources/updated of test://watched", m, msg)
	}
	if m, msg = c.method(t); m != "notifications/message" {
		t.Fatalf("second message %s %v, want the log message", m, msg)
	}
	if r := recv(t, relisted, "re-listing"); r != "r" {
		t.Errorf("re-listed %q", r)
	}
	close(ch)
	if m, _ := c.method(t); !strings.HasPrefix(m, "error: ") {
		t.Fatalf("after the server ended its stream: %s, want the client's stream ended", m)
	}
}

// TestFollowBounds: the upstream streams of all client streams are
// bounded (one more session is not followed, counted); a ticket of
// another route or another key is not followed, and the stream serves
// list_changed as before; a full queue drops (counted) and gives its
// bytes back.
func TestFollowBounds(t *testing.T) {
	up := newScriptedUpstream(t, "sess-up", "sess-other")
	src := newFakeSource()
	src.set(followSnap(t, up.URL))
	keys := session.Generate()
	s, url := start(t, src, Options{KeepAlive: time.Hour, Upstreams: &Upstreams{
		Keys: func() *session.Keys { return keys }, Client: upstream.New(upstream.Options{}), MaxStreams: 1}})

	h := headers("r", "tools", "", "")
	h[wire.FollowHeader] = ticket(t, keys, "r", "up", "other")
	if _, resp := open(t, url, h); resp.StatusCode != 200 {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	recv(t, up.connected, "upstream GET")
	if n := counterValue(s.m.rejected.WithLabelValues(rejectUpstream)); n != 1 || s.fol.open.Load() != 1 {
		t.Errorf("rejected{upstream_limit} = %v, open %d; want 1 and 1", n, s.fol.open.Load())
	}

	for name, tok := range map[string]string{
		"another route": ticket(t, keys, "elsewhere", "up"),
		"another key":   ticket(t, session.Generate(), "r", "up"),
		"a session":     "tms1.x.y",
	} {
		h := headers("r", "tools", "", "")
		h[wire.FollowHeader] = tok
		c, resp := open(t, url, h)
		if resp.StatusCode != 200 || s.fol.open.Load() != 1 {
			t.Errorf("%s: status %d, %d upstream streams; want 200 and still 1", name, resp.StatusCode, s.fol.open.Load())
		}
		c.close()
	}

	st := &stream{route: "r", up: make(chan upMsg, 1)}
	upd := []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched"}}`)
	s.pass(t.Context(), st, "up", upd)
	s.pass(t.Context(), st, "up", upd)
	if n := counterValue(s.m.dropped.WithLabelValues(kindUpdated)); n != 1 || s.fol.queued.Load() != int64(len(upd)) {
		t.Errorf("dropped %v, queued %d bytes; want 1 and %d", n, s.fol.queued.Load(), len(upd))
	}
	s.unfollow(st, func() {})
	if s.fol.queued.Load() != 0 {
		t.Errorf("queued %d bytes after the stream ended", s.fol.queued.Load())
	}
}

// counterValue is a counter's value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
