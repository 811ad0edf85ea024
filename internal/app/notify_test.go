package app

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/extproc/notify"
	"github.com/toolmesh/toolmesh/registry/fetch"
	"github.com/toolmesh/toolmesh/registry/refresher"
)

// mutableToolService serves a manifest whose tool names the test changes.
type mutableToolService struct {
	url   string
	tools atomic.Pointer[[]string]
}

func newMutableToolService(t *testing.T, tools ...string) *mutableToolService {
	t.Helper()
	m := &mutableToolService{}
	m.tools.Store(&tools)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		var entries []string
		for _, n := range *m.tools.Load() {
			entries = append(entries, `{"name":"`+n+`","version":"1","description":"A test tool.","inputSchema":{"type":"object"},"path":"/tools/`+n+`"}`)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[`+strings.Join(entries, ",")+`]}`)
	})
	svc := httptest.NewServer(mux)
	t.Cleanup(svc.Close)
	m.url = svc.URL
	return m
}

func (m *mutableToolService) set(tools ...string) { m.tools.Store(&tools) }

// sseReader reads the events of a stream, one JSON-RPC message each.
type sseReader struct {
	resp *http.Response
	br   *bufio.Reader
}

// next returns the next event's data, or an error at the end of the stream.
// Comments (keep-alives) are skipped.
func (s *sseReader) next() (map[string]any, error) {
	var data strings.Builder
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && data.Len() > 0:
			var m map[string]any
			if err := json.Unmarshal([]byte(data.String()), &m); err != nil {
				return nil, err
			}
			return m, nil
		case strings.HasPrefix(line, "data: "):
			data.WriteString(line[len("data: "):])
		}
	}
}

// openStream opens a change-notification stream through the data plane: a
// legacy GET when body is empty, else a 2026-07-28 subscriptions/listen.
func openStream(t *testing.T, ctx context.Context, base, route, body string) *sseReader {
	t.Helper()
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	req, _ := http.NewRequestWithContext(ctx, method, base+"/mcp/"+route, strings.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
	} else {
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s /mcp/%s = %d %q %s, want 200 text/event-stream", method, route, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return &sseReader{resp: resp, br: bufio.NewReader(resp.Body)}
}

func listenBody(id int, filter string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"subscriptions/listen","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},` +
		`"notifications":` + filter + `}}`
}

// metricSum is the labelled metric name summed over its series, from
// /metrics.
func metricSum(t *testing.T, admin, name string) float64 {
	t.Helper()
	_, body := httpGet(t, "http://"+admin+"/metrics")
	sum := 0.0
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, name+"{") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

// TestRunChangeNotifications: through `run`'s wiring (xDS-programmed
// notifications cluster, local data plane, ext_proc routing and STREAMED
// override, the notifications server), a Portal change reaches a 2026-07-28
// subscriptions/listen stream and a legacy GET stream within a refresh; an
// xDS push in between does not cut them; SIGTERM ends both, the 2026 one
// with its completion result, and the process still exits 0.
func TestRunChangeNotifications(t *testing.T) {
	svc := newMutableToolService(t, "a")
	portal := filepath.Join(t.TempDir(), "portal.json")
	writePortal := func(routes ...string) {
		var rs []string
		for _, r := range routes {
			rs = append(rs, `{"key":"`+r+`","toolServices":[{"name":"svc`+r+`","url":"`+svc.url+`"}]}`)
		}
		if err := os.WriteFile(portal, []byte(`{"routes":[`+strings.Join(rs, ",")+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writePortal("r")
	// No keep-alive during the test: a legacy stream's first bytes are its
	// headers, which must not wait for a comment (envoy/dataplane/internal/rules/rules.go, response
	// headers on the wire).
	cfg := filepath.Join(filepath.Dir(portal), "toolmesh.yaml")
	if err := os.WriteFile(cfg, []byte("notificationsKeepAlive: 4m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--config", cfg, "--portal", portal, "--refresh-interval", "100ms",
		"--notifications-listen", "127.0.0.1:0")
	base := "http://" + p.addrs["dataplane"]

	// listChanged is declared, in both eras.
	_, init := rpc(t, base, "r", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		map[string]string{"MCP-Protocol-Version": "2025-11-25"})
	if got := dig(init, "result", "capabilities", "tools", "listChanged"); got != true {
		t.Errorf("initialize tools.listChanged = %v, want true", got)
	}
	_, disc := rpc(t, base, "r", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, nil)
	if got := dig(disc, "result", "capabilities", "tools", "listChanged"); got != true {
		t.Errorf("server/discover tools.listChanged = %v, want true", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	modern := openStream(t, ctx, base, "r", listenBody(7, `{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["x:/y"]}`))
	ack, err := modern.next()
	if err != nil {
		t.Fatal(err)
	}
	if ack["method"] != "notifications/subscriptions/acknowledged" ||
		dig(ack, "params", "_meta", "io.modelcontextprotocol/subscriptionId") != 7.0 {
		t.Fatalf("first event %v, want the acknowledgement of subscription 7", ack)
	}
	// Only what the route serves is acknowledged: no prompts, no resource
	// subscriptions on a route of native tools.
	if n, _ := dig(ack, "params", "notifications").(map[string]any); len(n) != 1 || n["toolsListChanged"] != true {
		t.Errorf("acknowledged %v, want only toolsListChanged", dig(ack, "params", "notifications"))
	}
	legacy := openStream(t, ctx, base, "r", "")

	// A config push: a new route changes the xDS resources.
	before := metricSum(t, p.addrs["admin"], "toolmesh_xds_responses_total")
	writePortal("r", "s")
	for metricSum(t, p.addrs["admin"], "toolmesh_xds_responses_total") == before {
		if ctx.Err() != nil {
			t.Fatal("no xDS response after the Portal gained a route")
		}
		time.Sleep(20 * time.Millisecond)
	}

	svc.set("a", "b") // the route's tool list changes
	for name, s := range map[string]*sseReader{"2026-07-28": modern, "legacy": legacy} {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("%s stream: %v (cut by the xDS push?)", name, err)
		}
		if ev["method"] != "notifications/tools/list_changed" {
			t.Fatalf("%s stream: event %v, want notifications/tools/list_changed", name, ev)
		}
		if id := dig(ev, "params", "_meta", "io.modelcontextprotocol/subscriptionId"); (name == "legacy") != (id == nil) {
			t.Errorf("%s stream: subscriptionId %v", name, id)
		}
	}
	_, list := rpc(t, base, "r", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"MCP-Protocol-Version": "2025-11-25"})
	if tools, _ := dig(list, "result", "tools").([]any); len(tools) != 2 {
		t.Errorf("tools/list after the notification has %d tools, want 2", len(tools))
	}

	// SIGTERM: the 2026 stream gets its completion result, both end.
	p.cancel()
	end, err := modern.next()
	if err != nil {
		t.Fatalf("2026 stream at shutdown: %v, want the completion result", err)
	}
	if end["id"] != 7.0 || dig(end, "result", "resultType") != "complete" ||
		dig(end, "result", "_meta", "io.modelcontextprotocol/subscriptionId") != 7.0 {
		t.Errorf("2026 stream ended with %v, want the completion result of subscription 7", end)
	}
	for name, s := range map[string]*sseReader{"2026-07-28": modern, "legacy": legacy} {
		if ev, err := s.next(); err != io.EOF {
			t.Errorf("%s stream after shutdown: %v %v, want EOF", name, ev, err)
		}
	}
	p.stop(t)
}

// replica is a notifications server over its own registry of the same
// Portal: what another toolmesh replica runs.
func startReplica(t *testing.T, portal string) (*notify.Server, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reg := refresher.New(refresher.Options{Source: fetch.NewFileSource(portal), Interval: 100 * time.Millisecond})
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := notify.New(reg, notify.Options{KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	done := make(chan struct{}, 2)
	go func() { reg.Run(ctx); done <- struct{}{} }()
	go func() { srv.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
		<-done
	})
	return srv, strings.TrimPrefix(hs.URL, "http://")
}

// TestRunNotificationsTwoReplicas: the notifications cluster has two
// endpoints, two replicas each building its snapshots from the same Portal
// (so the same versions). The data plane spreads two streams over them and
// one Portal change reaches both streams.
func TestRunNotificationsTwoReplicas(t *testing.T) {
	svc := newMutableToolService(t, "a")
	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	if err := os.WriteFile(portal, []byte(`{"routes":[{"key":"r","toolServices":[{"name":"svc","url":"`+svc.url+`"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r0, a0 := startReplica(t, portal)
	r1, a1 := startReplica(t, portal)
	replicas := []*notify.Server{r0, r1}
	cfg := filepath.Join(dir, "toolmesh.yaml")
	if err := os.WriteFile(cfg, []byte("notificationsAddresses: ["+a0+", "+a1+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--config", cfg, "--portal", portal, "--refresh-interval", "100ms",
		"--notifications-listen", "127.0.0.1:0")
	base := "http://" + p.addrs["dataplane"]
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	streams := []*sseReader{openStream(t, ctx, base, "r", ""), openStream(t, ctx, base, "r", "")}
	for i, r := range replicas {
		if n := r.Listeners(); n != 1 {
			t.Fatalf("replica %d holds %d streams, want 1 each (round robin over the two endpoints)", i, n)
		}
	}
	svc.set("a", "b")
	for i, s := range streams {
		ev, err := s.next()
		if err != nil || ev["method"] != "notifications/tools/list_changed" {
			t.Fatalf("stream %d: %v %v, want notifications/tools/list_changed", i, ev, err)
		}
	}
}

// TestRunStreamBoundsAndDisconnect: through the data plane, a stream over
// the per-client bound gets the notifications server's 429 and JSON-RPC
// error; a client that goes away frees its stream (the data plane cancels
// the upstream request, the server releases it).
func TestRunStreamBoundsAndDisconnect(t *testing.T) {
	svc := newMutableToolService(t, "a")
	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	if err := os.WriteFile(portal, []byte(`{"routes":[{"key":"r","toolServices":[{"name":"svc","url":"`+svc.url+`"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "toolmesh.yaml")
	if err := os.WriteFile(cfg, []byte("notificationsMaxStreamsPerClient: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--config", cfg, "--portal", portal, "--notifications-listen", "127.0.0.1:0")
	base := "http://" + p.addrs["dataplane"]
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	first := openStream(t, ctx, base, "r", listenBody(1, `{"toolsListChanged":true}`))
	if _, err := first.next(); err != nil {
		t.Fatal(err)
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/mcp/r", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rpcErr map[string]any
	_ = json.Unmarshal(body, &rpcErr)
	if resp.StatusCode != http.StatusTooManyRequests || dig(rpcErr, "error", "code") != -32603.0 {
		t.Fatalf("second stream of the client: %d %s, want 429 with a JSON-RPC error", resp.StatusCode, body)
	}

	if n := metricSum(t, p.addrs["admin"], "toolmesh_listeners"); n != 1 {
		t.Fatalf("toolmesh_listeners = %v, want 1", n)
	}
	cancel() // the client goes away
	deadline := time.Now().Add(20 * time.Second)
	for metricSum(t, p.addrs["admin"], "toolmesh_listeners") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream of a client that went away is still counted")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
