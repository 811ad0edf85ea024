package extproc

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/extproc/notify"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// serveGET is the server's GET stream of a session: it carries what
// update sends to the session, as go-sdk sends resources/updated to the
// sessions subscribed to the URI.
func (ss *statefulServer) serveGET(w http.ResponseWriter, r *http.Request) {
	ch := make(chan string, 4)
	ss.mu.Lock()
	s := ss.sessions[r.Header.Get("Mcp-Session-Id")]
	if s != nil {
		s.stream = ch
	}
	ss.mu.Unlock()
	if s == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	select {
	case ss.gets <- r.Header.Get("Mcp-Session-Id"):
	default:
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-ch:
			_, _ = w.Write([]byte(ev))
			w.(http.Flusher).Flush()
		}
	}
}

// update sends resources/updated of uri on the GET stream of every
// session subscribed to it and reports how many it reached.
func (ss *statefulServer) update(uri string) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := 0
	for _, s := range ss.sessions {
		if s.stream == nil || !strings.Contains(strings.Join(s.subs, " "), uri) {
			continue
		}
		select {
		case s.stream <- "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"" + uri + "\"}}\n\n":
			n++
		default:
		}
	}
	return n
}

// oneRoute is a notify.Source of one snapshot.
type oneRoute struct{ snap *registry.Snapshot }

func (o oneRoute) Subscribe() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }
func (o oneRoute) Routes() []registry.Route             { return []registry.Route{{Key: o.snap.Route}} }
func (o oneRoute) Snapshot(key string) *registry.Snapshot {
	if key == o.snap.Route {
		return o.snap
	}
	return nil
}

// TestGetStreamFollowsClientSession: a legacy client that subscribed to a
// resource on its own upstream session opens its GET stream: the extproc
// server routes it with a follow ticket (its session token stays here),
// and the notifications server (here another process's, sharing only the
// keys) holds the client's upstream session's GET stream and passes the
// server's resources/updated on. A client without a session gets no
// ticket; a token that does not open is 404.
func TestGetStreamFollowsClientSession(t *testing.T) {
	ss := newStatefulServer(t)
	routes := statefulRoutes(t, ss.URL)
	env := newTestEnv(t, Config{MCP: mcp.Config{ListChanged: true}}, routes)
	tok := immediateHeader(ask(t, env, "/mcp/fed", initBody), "mcp-session-id")
	sid := []string{"mcp-session-id", tok}
	if r := ask(t, env, "/mcp/fed", `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"test://watched"}}`, sid...); string(r.GetImmediateResponse().GetBody()) != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Fatalf("subscribe: %s", r.GetImmediateResponse().GetBody())
	}

	get := func(extra ...string) map[string]string {
		v := env.open(t)
		defer v.close()
		h := append([]string{":method", "GET", ":path", "/mcp/fed", ":authority", "localhost:10000",
			"accept", "text/event-stream", "mcp-protocol-version", "2025-11-25"}, extra...)
		resp := v.send(reqHeaders(true, h...))
		if c := resp.GetImmediateResponse().GetStatus().GetCode(); c != 0 {
			return map[string]string{":status": c.String()}
		}
		cr := resp.GetRequestHeaders().GetResponse()
		set := setOf(t, cr.GetHeaderMutation())
		for _, k := range cr.GetHeaderMutation().GetRemoveHeaders() {
			set["removed "+k] = "yes"
		}
		return set
	}
	if set := get(); set[wire.FollowHeader] != "" || set[wire.ClusterHeader] != wire.NotificationsCluster {
		t.Errorf("a GET without a session: %v, want routed without a ticket", set)
	}
	if set := get("mcp-session-id", tok[:len(tok)-4]+"AAAA"); set[":status"] != "NotFound" {
		t.Errorf("a GET with a forged token: %v, want 404", set)
	}
	set := get(sid...)
	ticket := set[wire.FollowHeader]
	if !strings.HasPrefix(ticket, session.FollowPrefix) || set["removed mcp-session-id"] != "yes" || set[wire.RouteHeader] != "fed" {
		t.Fatalf("a GET with the session: %v, want a follow ticket, the token removed", set)
	}

	ns, err := notify.New(oneRoute{routes["/mcp/fed"].snap}, notify.Options{KeepAlive: time.Hour, Upstreams: &notify.Upstreams{
		Keys: func() *session.Keys { return env.srv.Runtime().SessionKeys }, Client: upstream.New(upstream.Options{})}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ns)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+wire.NotificationsPath, nil)
	for _, k := range []string{wire.RouteHeader, wire.NotifyHeader, wire.FollowHeader} {
		req.Header.Set(k, set[k])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	select {
	case got := <-ss.gets:
		if got != "up1" {
			t.Fatalf("GET stream on upstream session %q, want the client's up1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client's upstream GET stream did not open within 10s")
	}
	if n := ss.update("test://watched"); n != 1 {
		t.Fatalf("the update reached %d sessions, want the client's", n)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			if want := `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched"}}`; strings.TrimSpace(line[6:]) != want {
				t.Fatalf("event %q, want %s", line, want)
			}
			return
		}
	}
}
