package notify

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// fakeSource is a registry stand-in whose snapshots the test replaces.
type fakeSource struct {
	mu     sync.Mutex
	routes []registry.Route
	snaps  map[string]*registry.Snapshot
	subs   map[int]chan struct{}
	next   int
}

func newFakeSource() *fakeSource {
	return &fakeSource{snaps: map[string]*registry.Snapshot{}, subs: map[int]chan struct{}{}}
}

func (f *fakeSource) Subscribe() (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{}, 1)
	id := f.next
	f.next++
	f.subs[id] = ch
	return ch, func() { f.mu.Lock(); delete(f.subs, id); f.mu.Unlock() }
}

func (f *fakeSource) Routes() []registry.Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]registry.Route(nil), f.routes...)
}

func (f *fakeSource) Snapshot(key string) *registry.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snaps[key]
}

// set publishes a snapshot and wakes subscribers, as the refresher does.
func (f *fakeSource) set(s *registry.Snapshot) {
	f.mu.Lock()
	if _, ok := f.snaps[s.Route]; !ok {
		f.routes = append(f.routes, registry.Route{Key: s.Route})
	}
	f.snaps[s.Route] = s
	for _, ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
}

// snap builds route r with these tools and prompts (a federated server
// carries the prompts, so the route offers them when there are any).
func snap(t testing.TB, r string, tools, prompts []string) *registry.Snapshot {
	t.Helper()
	m := &registry.Manifest{MCP: &registry.MCPManifest{ProtocolVersion: "2025-11-25"}}
	for _, n := range tools {
		m.Tools = append(m.Tools, registry.ManifestTool{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	for _, p := range prompts {
		m.MCP.Prompts = append(m.MCP.Prompts, json.RawMessage(`{"name":"`+p+`"}`))
	}
	rt := registry.Route{Key: r, ToolServices: []registry.ToolService{
		{Name: "up", URL: "http://127.0.0.1:1/mcp", Protocol: registry.ProtocolMCP}}}
	s, err := registry.BuildSnapshot(rt, map[string]*registry.Manifest{"up": m}, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start serves a Server over src on loopback with Run going.
func start(t testing.TB, src Source, opts Options) (*Server, string) {
	t.Helper()
	s, err := New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
	})
	return s, hs.URL + wire.NotificationsPath
}

// client is one open stream.
type client struct {
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
}

// open requests a stream with the headers the extproc server would set.
func open(t testing.TB, url string, h map[string]string) (*client, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &client{resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(c.close)
	return c, resp
}

func (c *client) close() { c.cancel(); c.resp.Body.Close() }

// event returns the next event's JSON message; comments are returned as
// the comment line itself.
func (c *client) event(t testing.TB) (map[string]any, string) {
	t.Helper()
	var data string
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return nil, "error: " + err.Error()
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, ":"):
			if _, err := c.br.ReadString('\n'); err != nil { // the blank line
				return nil, "error: " + err.Error()
			}
			return nil, line
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		case line == "" && data != "":
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			return m, ""
		}
	}
}

// method reads events up to the next JSON message and returns its method
// (or "result" for a response).
func (c *client) method(t testing.TB) (string, map[string]any) {
	t.Helper()
	for {
		m, other := c.event(t)
		if strings.HasPrefix(other, "error: ") {
			return other, nil
		}
		if m == nil {
			continue // a keep-alive comment
		}
		if m["result"] != nil {
			return "result", m
		}
		s, _ := m["method"].(string)
		return s, m
	}
}

func subscriptionID(m map[string]any) any {
	params, _ := m["params"].(map[string]any)
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		r, _ := m["result"].(map[string]any)
		meta, _ = r["_meta"].(map[string]any)
	}
	return meta["io.modelcontextprotocol/subscriptionId"]
}

func headers(route, kinds, id, caller string) map[string]string {
	h := map[string]string{wire.RouteHeader: route, wire.NotifyHeader: kinds}
	if id != "" {
		h[wire.SubscriptionHeader] = id
	}
	if caller != "" {
		h[wire.CallerHeader] = caller
	}
	return h
}

// TestStreamNotifiesOptedKinds: a version change sends tools/list_changed
// and, when the prompts changed, prompts/list_changed, each only to streams
// that opted into it. Absence is shown by order: after a change the stream
// must not hear of, a second change it does hear of must be the next event.
func TestStreamNotifiesOptedKinds(t *testing.T) {
	tests := []struct {
		name    string
		kinds   string
		changes [][2][]string // tools, prompts of successive snapshots
		want    []string      // methods of the events after the acknowledgement
	}{
		{"tools: tool change", "tools", [][2][]string{{{"a", "b"}, {"p"}}},
			[]string{"notifications/tools/list_changed"}},
		{"tools and prompts: prompt change", "tools,prompts", [][2][]string{{{"a"}, {"p", "q"}}},
			[]string{"notifications/tools/list_changed", "notifications/prompts/list_changed"}},
		{"prompts: a tool change is not heard", "prompts", [][2][]string{{{"a", "b"}, {"p"}}, {{"a", "b"}, {"q"}}},
			[]string{"notifications/prompts/list_changed"}},
		{"tools: an unchanged version is not heard", "tools", [][2][]string{{{"a"}, {"p"}}, {{"c"}, {"p"}}},
			[]string{"notifications/tools/list_changed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource()
			src.set(snap(t, "r", []string{"a"}, []string{"p"}))
			_, url := start(t, src, Options{KeepAlive: time.Hour})
			c, resp := open(t, url, headers("r", tc.kinds, `"sub-1"`, ""))
			if resp.StatusCode != 200 || resp.Header.Get("content-type") != "text/event-stream" ||
				resp.Header.Get("x-accel-buffering") != "no" {
				t.Fatalf("open: %d %v", resp.StatusCode, resp.Header)
			}
			m, ack := c.method(t)
			if m != "notifications/subscriptions/acknowledged" || subscriptionID(ack) != "sub-1" {
				t.Fatalf("first message %s %v, want the acknowledgement", m, ack)
			}
			for _, ch := range tc.changes {
				src.set(snap(t, "r", ch[0], ch[1]))
			}
			for _, w := range tc.want {
				got, msg := c.method(t)
				if got != w {
					t.Fatalf("event %q %v, want %q", got, msg, w)
				}
				if subscriptionID(msg) != "sub-1" {
					t.Errorf("event %v lacks subscriptionId sub-1", msg)
				}
			}
		})
	}
}

// TestLegacyStream: no acknowledgement, no subscription id; the first
// message is the change.
func TestLegacyStream(t *testing.T) {
	src := newFakeSource()
	src.set(snap(t, "r", []string{"a"}, nil))
	_, url := start(t, src, Options{KeepAlive: time.Hour})
	c, resp := open(t, url, headers("r", "tools", "", ""))
	if resp.StatusCode != 200 {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	src.set(snap(t, "r", []string{"a", "b"}, nil))
	m, msg := c.method(t)
	if m != "notifications/tools/list_changed" || msg["params"] != nil {
		t.Fatalf("got %s %v, want a bare tools/list_changed", m, msg)
	}
}

// TestKeepAlive: an idle stream gets SSE comments.
func TestKeepAlive(t *testing.T) {
	src := newFakeSource()
	src.set(snap(t, "r", []string{"a"}, nil))
	_, url := start(t, src, Options{KeepAlive: 5 * time.Millisecond})
	c, _ := open(t, url, headers("r", "tools", "", ""))
	if m, other := c.event(t); m != nil || other != ":" {
		t.Fatalf("got %v %q, want the comment \":\"", m, other)
	}
}

// TestStreamBounds: per client (the caller header, else the downstream
// address) and in total; a freed slot can be taken again.
func TestStreamBounds(t *testing.T) {
	src := newFakeSource()
	src.set(snap(t, "r", []string{"a"}, nil))
	s, url := start(t, src, Options{KeepAlive: time.Hour, MaxStreams: 4, MaxStreamsPerClient: 2})
	status := func(h map[string]string) (int, *client) {
		c, resp := open(t, url, h)
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(b), `"error":{"code":-32603`) {
				t.Errorf("refusal body %s, want a JSON-RPC error", b)
			}
		}
		return resp.StatusCode, c
	}
	alice := headers("r", "tools", `7`, "alice")
	byAddr := headers("r", "tools", "", "")
	byAddr["x-forwarded-for"] = "10.0.0.1, 192.0.2.9"
	steps := []struct {
		h    map[string]string
		want int
	}{
		{alice, 200}, {alice, 200}, {alice, 429}, // per caller
		{byAddr, 200}, {byAddr, 200}, // per downstream address (the last XFF entry)
		{headers("r", "tools", "", "bob"), 503}, // in total
	}
	var first *client
	for i, st := range steps {
		got, c := status(st.h)
		if got != st.want {
			t.Fatalf("step %d: status %d, want %d", i, got, st.want)
		}
		if i == 0 {
			first = c
		}
	}
	if n := s.Listeners(); n != 4 {
		t.Errorf("Listeners() = %d, want 4", n)
	}
	first.close()
	waitFor(t, func() bool { return s.Listeners() == 3 })
	if got, _ := status(alice); got != 200 {
		t.Errorf("after a close, alice got %d, want 200", got)
	}
}

// TestStreamUnknownRoute: a route without a snapshot is refused.
func TestStreamUnknownRoute(t *testing.T) {
	src := newFakeSource()
	_, url := start(t, src, Options{})
	_, resp := open(t, url, headers("nope", "tools", `1`, ""))
	if resp.StatusCode != 404 {
		t.Fatalf("status %d, want 404", resp.StatusCode)
	}
}

// waitFor polls cond (bounded).
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDisconnectCleanup: streams whose clients went away are released:
// the count returns to zero and so do the goroutines.
func TestDisconnectCleanup(t *testing.T) {
	src := newFakeSource()
	src.set(snap(t, "r", []string{"a"}, nil))
	s, url := start(t, src, Options{KeepAlive: time.Hour})
	http.DefaultClient.CloseIdleConnections()
	base := runtime.NumGoroutine()
	const n = 50
	var cs []*client
	for i := range n {
		c, resp := open(t, url, headers("r", "tools", "", "c"+string(rune('a'+i%26))+string(rune('a'+i/26))))
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
		cs = append(cs, c)
	}
	if got := s.Listeners(); got != n {
		t.Fatalf("Listeners() = %d, want %d", got, n)
	}
	if runtime.NumGoroutine() < base+n {
		t.Fatalf("goroutines %d with %d streams open, base %d: the count below cannot show a leak", runtime.NumGoroutine(), n, base)
	}
	for _, c := range cs {
		c.close()
	}
	waitFor(t, func() bool { return s.Listeners() == 0 })
	http.DefaultClient.CloseIdleConnections()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= base+2 })
	// A change after the clients left reaches nobody and blocks nothing.
	src.set(snap(t, "r", []string{"a", "b"}, nil))
}

// TestDrain: Drain ends a 2026 stream with its completion result and a
// legacy one with the end of the body, and refuses new streams.
func TestDrain(t *testing.T) {
	src := newFakeSource()
	src.set(snap(t, "r", []string{"a"}, nil))
	s, url := start(t, src, Options{KeepAlive: time.Hour})
	modern, _ := open(t, url, headers("r", "tools", `42`, ""))
	if m, _ := modern.method(t); m != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %s", m)
	}
	legacy, _ := open(t, url, headers("r", "tools", "", ""))
	waitFor(t, func() bool { return s.Listeners() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	m, res := modern.method(t)
	if m != "result" || res["id"] != 42.0 || subscriptionID(res) != 42.0 ||
		res["result"].(map[string]any)["resultType"] != "complete" {
		t.Fatalf("2026 stream ended with %s %v, want the completion result", m, res)
	}
	for name, c := range map[string]*client{"2026": modern, "legacy": legacy} {
		if _, err := c.br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("%s stream after Drain: %v, want EOF", name, err)
		}
	}
	if _, resp := open(t, url, headers("r", "tools", "", "")); resp.StatusCode != 503 {
		t.Errorf("a stream opened while draining got %d, want 503", resp.StatusCode)
	}
}
