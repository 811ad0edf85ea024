package extproc

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// statefulServer is a legacy MCP server on 127.0.0.1 that keeps, per
// session, the capabilities its client declared, the log level and the
// subscriptions, as go-sdk does.
type statefulServer struct {
	*httptest.Server
	mu       sync.Mutex
	n        int
	sessions map[string]*upSession
	gets     chan string // the session of each GET stream opened
	// deletes are the Mcp-Session-Id of each DELETE, in order;
	// deleteStatus, when set, is the answer to one instead of ending the
	// session (sessionend_test.go).
	deletes      []string
	deleteStatus int
}

type upSession struct {
	caps  string
	level string
	subs  []string
	// stream takes the events of the session's GET stream while one is
	// open (listenfollow_test.go).
	stream chan string
}

func newStatefulServer(t *testing.T) *statefulServer {
	ss := &statefulServer{sessions: map[string]*upSession{}, gets: make(chan string, 8)}
	ss.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			ss.serveGET(w, r)
			return
		case http.MethodDelete:
			ss.serveDELETE(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Capabilities json.RawMessage `json:"capabilities"`
				Level        string          `json:"level"`
				URI          string          `json:"uri"`
			} `json:"params"`
		}
		_ = json.Unmarshal(b, &m)
		ss.mu.Lock()
		defer ss.mu.Unlock()
		result := `{}`
		switch m.Method {
		case "initialize":
			ss.n++
			id := "up" + strconv.Itoa(ss.n)
			ss.sessions[id] = &upSession{caps: string(m.Params.Capabilities)}
			w.Header().Set("Mcp-Session-Id", id)
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"logging":{},"resources":{"subscribe":true}},"serverInfo":{"name":"s","version":"1"}}`
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
			return
		default:
			s := ss.sessions[r.Header.Get("Mcp-Session-Id")]
			if s == nil {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			switch m.Method {
			case "logging/setLevel":
				s.level = m.Params.Level
			case "resources/subscribe":
				s.subs = append(s.subs, m.Params.URI)
			case "tools/call":
				result = `{"content":[{"type":"text","text":"ok"}]}`
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`))
	}))
	t.Cleanup(ss.Close)
	return ss
}

func (ss *statefulServer) session(id string) upSession {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.sessions[id]; s != nil {
		return *s
	}
	return upSession{}
}

// statefulRoutes: route "fed" with a legacy server "old" that declared
// logging and resources.subscribe, and route "plain" whose legacy server
// declared neither.
func statefulRoutes(t *testing.T, url string) testRoutes {
	obj := json.RawMessage(`{"type":"object"}`)
	snap := func(key string, m *registry.MCPManifest) *registry.Snapshot {
		return buildSnapshot(t, registry.Route{Key: key, ToolServices: []registry.ToolService{
			{Name: "old", URL: url + "/mcp", Protocol: registry.ProtocolMCP},
		}}, map[string]*registry.Manifest{"old": {Tools: []registry.ManifestTool{{Name: "legacy_tool", InputSchema: obj}}, MCP: m}})
	}
	return testRoutes{
		"/mcp/fed": {key: "fed", snap: snap("fed", &registry.MCPManifest{ProtocolVersion: mcp.Version20251125, Logging: true, Subscribe: true,
			Resources: []json.RawMessage{json.RawMessage(`{"uri":"test://watched","name":"w"}`)}})},
		"/mcp/plain": {key: "plain", snap: snap("plain", &registry.MCPManifest{ProtocolVersion: mcp.Version20251125})},
	}
}

// ask sends one request and returns the answer to its body.
func ask(t *testing.T, env *testEnv, path, body string, extra ...string) *extprocv3.ProcessingResponse {
	t.Helper()
	v, r := askOpen(t, env, path, body, extra...)
	v.close()
	return r
}

// askOpen is ask with the stream left open for the response phases.
func askOpen(t *testing.T, env *testEnv, path, body string, extra ...string) (*envoy, *extprocv3.ProcessingResponse) {
	t.Helper()
	v := env.open(t)
	v.send(reqHeaders(false, post(path, len(body), extra...)...))
	return v, v.send(reqBody(body))
}

func immediateHeader(r *extprocv3.ProcessingResponse, key string) string {
	for _, h := range r.GetImmediateResponse().GetHeaders().GetSetHeaders() {
		if h.GetHeader().GetKey() == key {
			return string(h.GetHeader().GetRawValue())
		}
	}
	return ""
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}`

// TestClientSessions: a legacy client initializing on a route whose legacy
// server keeps per-client state gets a sealed Mcp-Session-Id naming an
// upstream session of its own, declared with its capabilities; its
// setLevel, subscribe and calls use that session, with its own ids;
// another client gets another; a client without it uses the shared
// session; a token that does not open is 404.
func TestClientSessions(t *testing.T) {
	ss := newStatefulServer(t)
	env := newTestEnv(t, Config{}, statefulRoutes(t, ss.URL))

	r := ask(t, env, "/mcp/fed", initBody)
	tokA := immediateHeader(r, "mcp-session-id")
	if !session.Is(tokA) {
		t.Fatalf("initialize answer without a session token: %q", tokA)
	}
	caps := string(mcp.Member(mcp.Member(r.GetImmediateResponse().GetBody(), "result"), "capabilities"))
	if !strings.Contains(caps, `"logging":{}`) || !strings.Contains(caps, `"subscribe":true`) {
		t.Errorf("capabilities %s: want logging and resources.subscribe", caps)
	}
	if got := ss.session("up1").caps; !strings.Contains(got, `"elicitation"`) {
		t.Errorf("the client's upstream session declared %s, want its elicitation", got)
	}
	r = ask(t, env, "/mcp/fed", initBody)
	tokB := immediateHeader(r, "mcp-session-id")
	if !session.Is(tokB) || tokB == tokA {
		t.Fatalf("second client's token %q", tokB)
	}

	sid := []string{"mcp-session-id", tokA}
	r = ask(t, env, "/mcp/fed", `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`, sid...)
	if got := string(r.GetImmediateResponse().GetBody()); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("setLevel answer %s", got)
	}
	r = ask(t, env, "/mcp/fed", `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"test://watched"}}`, sid...)
	if got := string(r.GetImmediateResponse().GetBody()); got != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Errorf("subscribe answer %s", got)
	}
	if a, b := ss.session("up1"), ss.session("up2"); a.level != "debug" || len(a.subs) != 1 || b.level != "" || len(b.subs) != 0 {
		t.Errorf("client A's session %+v, client B's %+v: the state must be A's alone", a, b)
	}

	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	r = ask(t, env, "/mcp/fed", call, sid...)
	set := setOf(t, r.GetRequestBody().GetResponse().GetHeaderMutation())
	if set["mcp-session-id"] != "up1" || string(mcp.Member([]byte(bodyOf(r)), "id")) != "3" {
		t.Errorf("call routed with session %q and id %s, want up1 and the client's id", set["mcp-session-id"], mcp.Member([]byte(bodyOf(r)), "id"))
	}
	r = ask(t, env, "/mcp/fed", call)
	if set := setOf(t, r.GetRequestBody().GetResponse().GetHeaderMutation()); set["mcp-session-id"] == "up1" || set["mcp-session-id"] == "up2" {
		t.Errorf("a sessionless call went on a client's session %q", set["mcp-session-id"])
	}

	for name, tok := range map[string]string{
		"forged":        tokA[:len(tokA)-4] + "AAAA",
		"another route": mintFor(t, env, "plain"),
	} {
		r = ask(t, env, "/mcp/fed", call, "mcp-session-id", tok)
		if got := r.GetImmediateResponse().GetStatus().GetCode(); got != 404 {
			t.Errorf("%s token: status %d, want 404", name, got)
		}
	}
	r = ask(t, env, "/mcp/fed", `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}`)
	if code := string(mcp.Member(mcp.Member(r.GetImmediateResponse().GetBody(), "error"), "code")); code != "-32600" {
		t.Errorf("setLevel without a session: %s", r.GetImmediateResponse().GetBody())
	}

	// The server forgets the client's session (a restart): the call is
	// sent again on the shared session, once, and the client's next calls
	// go there at once; setLevel, which must not reach the shared session,
	// tells the client to initialize again.
	v, _ := askOpen(t, env, "/mcp/fed", call, sid...)
	ss.mu.Lock()
	delete(ss.sessions, "up1")
	ss.mu.Unlock()
	cr := v.send(respHeaders(false, ":status", "404", "content-type", "text/plain")).GetResponseHeaders().GetResponse()
	v.close()
	if res := decodeResult(t, cr.GetBodyMutation().GetBody(), "3"); res.IsError || res.Content[0].Text != "ok" {
		t.Errorf("call after the client's session was lost: %+v", res)
	}
	r = ask(t, env, "/mcp/fed", call, sid...)
	if up := setOf(t, r.GetRequestBody().GetResponse().GetHeaderMutation())["mcp-session-id"]; up == "up1" || up == "" {
		t.Errorf("a call after the loss went on session %q", up)
	}
	r = ask(t, env, "/mcp/fed", `{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"info"}}`, sid...)
	if got := r.GetImmediateResponse().GetStatus().GetCode(); got != 404 {
		t.Errorf("setLevel on a lost session: status %d, want 404", got)
	}
}

// mintFor is a token of another route, sealed with the server's keys.
func mintFor(t *testing.T, env *testEnv, route string) string {
	tok, err := env.srv.Runtime().SessionKeys.Mint(session.State{Route: route, Caller: "", Version: mcp.Version20251125,
		Upstreams: []session.Upstream{{Service: "old", Version: mcp.Version20251125, Session: "up1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestClientSessionsOnlyWhenNeeded: a route whose legacy server keeps no
// per-client state issues no session to a client that declares nothing,
// and a session carrying only the capabilities to one that declares them;
// a 2026-07-28 client never gets one.
func TestClientSessionsOnlyWhenNeeded(t *testing.T) {
	ss := newStatefulServer(t)
	env := newTestEnv(t, Config{}, statefulRoutes(t, ss.URL))
	bare := strings.Replace(initBody, `{"elicitation":{}}`, `{}`, 1)
	if r := ask(t, env, "/mcp/plain", bare); immediateHeader(r, "mcp-session-id") != "" {
		t.Error("a client that needs no state got a session")
	}
	r := ask(t, env, "/mcp/plain", initBody)
	tok := immediateHeader(r, "mcp-session-id")
	st, err := env.srv.Runtime().SessionKeys.Open(tok, "plain", "")
	if err != nil || session.Caps(st.Caps) != session.CapElicitForm || len(st.Upstreams) != 0 {
		t.Fatalf("session %+v (%v): want the capabilities only", st, err)
	}
	if caps := string(mcp.Member(mcp.Member(r.GetImmediateResponse().GetBody(), "result"), "capabilities")); strings.Contains(caps, "logging") {
		t.Errorf("capabilities %s on a route without logging", caps)
	}
	if ss.n != 0 {
		t.Errorf("%d upstream sessions opened for a route without per-client state", ss.n)
	}
	// The capabilities reach the shared session the client's call uses.
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	r = ask(t, env, "/mcp/plain", call, "mcp-session-id", tok)
	up := setOf(t, r.GetRequestBody().GetResponse().GetHeaderMutation())["mcp-session-id"]
	if got := ss.session(up).caps; !strings.Contains(got, "elicitation") {
		t.Errorf("shared session %q declared %s, want the client's elicitation", up, got)
	}
}
