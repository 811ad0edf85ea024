package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// rpc is a JSON-RPC request as a test server reads it.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Cursor          string                     `json:"cursor"`
		ProtocolVersion string                     `json:"protocolVersion"`
		Meta            map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// server is an MCP server on 127.0.0.1 written for one test: handle
// answers each POST; the log records every request's method (DELETE
// included) in order.
type server struct {
	t      *testing.T
	mu     sync.Mutex
	log    []string
	handle func(w http.ResponseWriter, r *http.Request, m rpc)
	url    string
}

func newServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, m rpc)) *server {
	s := &server{t: t, handle: handle}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/mcp" {
			http.NotFound(w, r)
			return
		}
		if r.Method == http.MethodDelete {
			s.record("DELETE " + r.Header.Get("Mcp-Session-Id"))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		var m rpc
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("server: bad request body %q", body)
		}
		s.record(m.Method)
		handle(w, r, m)
	}))
	t.Cleanup(ts.Close)
	s.url = ts.URL + "/v1/mcp"
	return s
}

func (s *server) record(m string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, m)
}

func (s *server) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func result(id json.RawMessage, res any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "result": res}
}

func rpcError(id json.RawMessage, code int, msg string, data any) map[string]any {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": e}
}

func tool(name string) map[string]any {
	return map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}}
}

// statelessServer is a 2026-07-28 server: every request must carry the
// version header, Mcp-Method equal to the body's method and the _meta
// protocol fields. tools/list is paged three tools at a time over names.
func statelessServer(t *testing.T, names []string, token string) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request, m rpc) {
		if got := r.Header.Get("Authorization"); got != token {
			t.Errorf("%s: Authorization %q, want %q", m.Method, got, token)
		}
		if r.Header.Get("MCP-Protocol-Version") != "2026-07-28" || r.Header.Get("Mcp-Method") != m.Method {
			writeJSON(w, 400, rpcError(m.ID, -32020, "Header mismatch", nil))
			return
		}
		if string(m.Params.Meta[mcp.MetaProtocolVersion]) != `"2026-07-28"` || m.Params.Meta[mcp.MetaClientCapabilities] == nil {
			writeJSON(w, 400, rpcError(m.ID, -32602, "missing _meta", nil))
			return
		}
		if r.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a stateless request carried Mcp-Session-Id", m.Method)
		}
		switch m.Method {
		case "server/discover":
			writeJSON(w, 200, result(m.ID, map[string]any{
				"resultType": "complete", "supportedVersions": []string{"2026-07-28"},
				"capabilities": map[string]any{"tools": map[string]any{}, "resources": map[string]any{}, "prompts": map[string]any{}},
				"ttlMs":        60000, "cacheScope": "public",
				"_meta": map[string]any{mcp.MetaServerInfo: map[string]any{"name": "weather-mcp", "version": "2.1.0"}},
			}))
		case "tools/list":
			start := 0
			if m.Params.Cursor != "" {
				fmt.Sscanf(m.Params.Cursor, "page-%d", &start)
			}
			end := min(start+3, len(names))
			var page []any
			for _, n := range names[start:end] {
				page = append(page, tool(n))
			}
			res := map[string]any{"resultType": "complete", "tools": page, "ttlMs": 30000, "cacheScope": "public"}
			if end < len(names) {
				res["nextCursor"] = fmt.Sprintf("page-%d", end)
			}
			writeJSON(w, 200, result(m.ID, res))
		case "resources/list":
			writeJSON(w, 200, result(m.ID, map[string]any{"resultType": "complete", "ttlMs": 45000, "cacheScope": "private",
				"resources": []any{map[string]any{"uri": "file:///a.txt", "name": "a"}}}))
		case "resources/templates/list":
			writeJSON(w, 200, result(m.ID, map[string]any{"resultType": "complete", "ttlMs": 45000, "cacheScope": "public",
				"resourceTemplates": []any{map[string]any{"uriTemplate": "file:///{p}", "name": "files"}}}))
		case "prompts/list":
			writeJSON(w, 200, result(m.ID, map[string]any{"resultType": "complete", "ttlMs": 90000, "cacheScope": "public",
				"prompts": []any{map[string]any{"name": "summarize"}}}))
		default:
			writeJSON(w, 404, rpcError(m.ID, -32601, "Method not found", nil))
		}
	})
}

func TestDiscoverStateless(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	s := statelessServer(t, names, "Bearer s3cret")
	c := upstream.New(upstream.Options{})
	l, err := c.Discover(context.Background(), s.url, map[string]string{"Authorization": "Bearer s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Era != mcp.EraStateless || l.ProtocolVersion != "2026-07-28" || l.Server.Name != "weather-mcp" || l.Server.Version != "2.1.0" {
		t.Errorf("era %v version %q server %+v", l.Era, l.ProtocolVersion, l.Server)
	}
	var got []string
	for _, raw := range l.Tools {
		var tl struct{ Name string }
		_ = json.Unmarshal(raw, &tl)
		got = append(got, tl.Name)
	}
	if !slices.Equal(got, names) {
		t.Errorf("tools %v, want %v (every page, in order)", got, names)
	}
	if len(l.Resources) != 1 || len(l.ResourceTemplates) != 1 || len(l.Prompts) != 1 {
		t.Errorf("resources %d templates %d prompts %d, want 1 each", len(l.Resources), len(l.ResourceTemplates), len(l.Prompts))
	}
	// The smallest ttlMs of every result; private wins over public.
	if !l.HasTTL || l.TTL != 30*time.Second || l.CacheScope != "private" {
		t.Errorf("ttl %v (has %v) scope %q, want 30s private", l.TTL, l.HasTTL, l.CacheScope)
	}
	want := []string{"server/discover", "tools/list", "tools/list", "tools/list", "resources/list", "resources/templates/list", "prompts/list"}
	if calls := s.calls(); !slices.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
}

// legacyServer requires initialize and its Mcp-Session-Id, answers
// tools/list as an event stream (a notification and a server request
// first), declares no resources or prompts, and refuses server/discover the
// way a legacy server does: 400 with a plain-text body.
func legacyServer(t *testing.T, discover func(w http.ResponseWriter, m rpc)) *server {
	const sid = "sess-42"
	return newServer(t, func(w http.ResponseWriter, r *http.Request, m rpc) {
		if m.Method == "server/discover" {
			discover(w, m)
			return
		}
		if m.Method == "initialize" {
			v := m.Params.ProtocolVersion
			w.Header().Set("Mcp-Session-Id", sid)
			writeJSON(w, 200, result(m.ID, map[string]any{"protocolVersion": v,
				"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
				"serverInfo":   map[string]any{"name": "legacy-mcp", "version": "0.9"}}))
			return
		}
		if r.Header.Get("Mcp-Session-Id") != sid {
			http.Error(w, "Bad Request: missing session", 400)
			return
		}
		if r.Header.Get("MCP-Protocol-Version") == "" {
			t.Errorf("%s: no MCP-Protocol-Version after initialize", m.Method)
		}
		switch m.Method {
		case "notifications/initialized":
			w.WriteHeader(202)
		case "tools/list":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			fmt.Fprint(w, ": keep-alive\n\n")
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"ping\"}\n\n")
			// The response, split over two data lines (joined with \n).
			fmt.Fprintf(w, "id: 3\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\r\ndata: \"result\":{\"tools\":[{\"name\":\"search\",\"inputSchema\":{\"type\":\"object\"}}]}}\r\n\r\n", m.ID)
		case "resources/list", "prompts/list", "resources/templates/list":
			t.Errorf("%s called on a server without that capability", m.Method)
			writeJSON(w, 200, result(m.ID, map[string]any{}))
		default:
			writeJSON(w, 200, rpcError(m.ID, -32601, "Method not found", nil))
		}
	})
}

func TestDiscoverLegacyFallback(t *testing.T) {
	cases := []struct {
		name     string
		discover func(w http.ResponseWriter, m rpc)
		version  string
	}{
		{"400 plain text", func(w http.ResponseWriter, m rpc) {
			http.Error(w, "Unsupported protocol version: 2026-07-28", 400)
		}, "2025-11-25"},
		{"404 empty", func(w http.ResponseWriter, m rpc) { w.WriteHeader(404) }, "2025-11-25"},
		{"200 method not found", func(w http.ResponseWriter, m rpc) {
			writeJSON(w, 200, rpcError(m.ID, -32601, "Method not found", nil))
		}, "2025-11-25"},
		{"unsupported version listing legacy ones", func(w http.ResponseWriter, m rpc) {
			writeJSON(w, 400, rpcError(m.ID, -32022, "Unsupported protocol version",
				map[string]any{"supported": []string{"2025-06-18", "2025-03-26"}, "requested": "2026-07-28"}))
		}, "2025-06-18"},
		{"discover answered with legacy versions only", func(w http.ResponseWriter, m rpc) {
			writeJSON(w, 200, result(m.ID, map[string]any{"supportedVersions": []string{"2025-03-26"}, "capabilities": map[string]any{}}))
		}, "2025-03-26"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := legacyServer(t, tc.discover)
			l, err := upstream.New(upstream.Options{}).Discover(context.Background(), s.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if l.Era != mcp.EraLegacy || l.ProtocolVersion != tc.version || l.Server.Name != "legacy-mcp" || l.Session != "sess-42" {
				t.Errorf("era %v version %q server %+v session %q", l.Era, l.ProtocolVersion, l.Server, l.Session)
			}
			if len(l.Tools) != 1 || !strings.Contains(string(l.Tools[0]), `"search"`) {
				t.Errorf("tools %s", l.Tools)
			}
			if l.HasTTL || !l.ListChanged || len(l.Resources) != 0 {
				t.Errorf("hasTTL %v listChanged %v resources %d", l.HasTTL, l.ListChanged, len(l.Resources))
			}
			want := []string{"server/discover", "initialize", "notifications/initialized", "tools/list", "DELETE sess-42"}
			if calls := s.calls(); !slices.Equal(calls, want) {
				t.Errorf("calls %v, want %v", calls, want)
			}
		})
	}
}

// TestDiscoverErrors: each failure is an error naming the method, and a
// modern server's refusal is not mistaken for a legacy server.
func TestDiscoverErrors(t *testing.T) {
	cases := []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request, m rpc)
		want   string
		calls  []string
	}{
		{"html answer", func(w http.ResponseWriter, r *http.Request, m rpc) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html>login</html>")
		}, `initialize: status 200 with content type "text/html"`, []string{"server/discover", "initialize"}},
		{"garbage json", func(w http.ResponseWriter, r *http.Request, m rpc) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"hello":`)
		}, "initialize: not a JSON-RPC message", []string{"server/discover", "initialize"}},
		{"wrong id", func(w http.ResponseWriter, r *http.Request, m rpc) {
			writeJSON(w, 200, result(json.RawMessage(`"other"`), map[string]any{}))
		}, "initialize: the answer is not the response to request id 2", []string{"server/discover", "initialize"}},
		{"header mismatch is modern", func(w http.ResponseWriter, r *http.Request, m rpc) {
			writeJSON(w, 400, rpcError(m.ID, -32020, "Header mismatch", nil))
		}, "server/discover: status 400: JSON-RPC error -32020", []string{"server/discover"}},
		{"unsupported version without a legacy one", func(w http.ResponseWriter, r *http.Request, m rpc) {
			writeJSON(w, 400, rpcError(m.ID, -32022, "Unsupported protocol version", map[string]any{"supported": []string{"2027-01-01"}}))
		}, "server/discover: status 400: JSON-RPC error -32022", []string{"server/discover"}},
		{"stream without the response", func(w http.ResponseWriter, r *http.Request, m rpc) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n")
		}, "initialize: the event stream ended without the response", []string{"server/discover", "initialize"}},
		{"initialize picks an unknown version", func(w http.ResponseWriter, r *http.Request, m rpc) {
			if m.Method == "initialize" {
				writeJSON(w, 200, result(m.ID, map[string]any{"protocolVersion": "2024-11-05", "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "old"}}))
				return
			}
			w.WriteHeader(404)
		}, `initialize: the server chose protocol version "2024-11-05"`, []string{"server/discover", "initialize"}},
		{"input required", func(w http.ResponseWriter, r *http.Request, m rpc) {
			if m.Method == "server/discover" {
				writeJSON(w, 200, result(m.ID, map[string]any{"supportedVersions": []string{"2026-07-28"}, "capabilities": map[string]any{"tools": map[string]any{}}}))
				return
			}
			writeJSON(w, 200, result(m.ID, map[string]any{"resultType": "input_required", "tools": []any{}}))
		}, `tools/list: resultType "input_required"`, []string{"server/discover", "tools/list"}},
		{"tools/list rpc error", func(w http.ResponseWriter, r *http.Request, m rpc) {
			if m.Method == "server/discover" {
				writeJSON(w, 200, result(m.ID, map[string]any{"supportedVersions": []string{"2026-07-28"}, "capabilities": map[string]any{"tools": map[string]any{}}}))
				return
			}
			writeJSON(w, 200, rpcError(m.ID, -32603, "boom", nil))
		}, "tools/list: JSON-RPC error -32603: boom", []string{"server/discover", "tools/list"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, tc.handle)
			_, err := upstream.New(upstream.Options{}).Discover(context.Background(), s.url, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if calls := s.calls(); !slices.Equal(calls, tc.calls) {
				t.Errorf("calls %v, want %v", calls, tc.calls)
			}
		})
	}
}

// statelessWith answers discover with tools and hands tools/list to list.
func statelessWith(t *testing.T, list func(w http.ResponseWriter, m rpc)) *server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request, m rpc) {
		if m.Method == "server/discover" {
			writeJSON(w, 200, result(m.ID, map[string]any{"supportedVersions": []string{"2026-07-28"}, "capabilities": map[string]any{"tools": map[string]any{}}}))
			return
		}
		list(w, m)
	})
}

func TestDiscoverBounds(t *testing.T) {
	t.Run("page bound", func(t *testing.T) {
		n := 0
		s := statelessWith(t, func(w http.ResponseWriter, m rpc) {
			n++
			writeJSON(w, 200, result(m.ID, map[string]any{"tools": []any{tool(fmt.Sprint("t", n))}, "nextCursor": fmt.Sprint("c", n)}))
		})
		_, err := upstream.New(upstream.Options{MaxPages: 4}).Discover(context.Background(), s.url, nil)
		if err == nil || !strings.Contains(err.Error(), "tools/list: more than 4 pages") {
			t.Fatalf("error %v", err)
		}
		if got := len(s.calls()); got != 5 {
			t.Errorf("%d requests, want discover + 4 pages", got)
		}
	})
	t.Run("repeated cursor", func(t *testing.T) {
		s := statelessWith(t, func(w http.ResponseWriter, m rpc) {
			writeJSON(w, 200, result(m.ID, map[string]any{"tools": []any{}, "nextCursor": "same"}))
		})
		_, err := upstream.New(upstream.Options{}).Discover(context.Background(), s.url, nil)
		if err == nil || !strings.Contains(err.Error(), `tools/list: nextCursor "same" repeats`) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("response size", func(t *testing.T) {
		s := statelessWith(t, func(w http.ResponseWriter, m rpc) {
			writeJSON(w, 200, result(m.ID, map[string]any{"tools": []any{map[string]any{"name": strings.Repeat("x", 5000)}}}))
		})
		_, err := upstream.New(upstream.Options{MaxBytes: 1024}).Discover(context.Background(), s.url, nil)
		if err == nil || !strings.Contains(err.Error(), "tools/list: response larger than 1024 bytes") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("event stream size", func(t *testing.T) {
		s := statelessWith(t, func(w http.ResponseWriter, m rpc) {
			w.Header().Set("Content-Type", "text/event-stream")
			for range 100 {
				fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n")
			}
		})
		_, err := upstream.New(upstream.Options{MaxBytes: 1024}).Discover(context.Background(), s.url, nil)
		if err == nil || !strings.Contains(err.Error(), "tools/list: event stream larger than 1024 bytes") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("hanging server", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		s := newServer(t, func(w http.ResponseWriter, r *http.Request, m rpc) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := upstream.New(upstream.Options{}).Discover(ctx, s.url, nil)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "server/discover") {
			t.Fatalf("error %v, want a deadline naming server/discover", err)
		}
		// A timeout is not a reason to try the legacy handshake.
		if calls := s.calls(); !slices.Equal(calls, []string{"server/discover"}) {
			t.Errorf("calls %v", calls)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		ts := httptest.NewServer(http.NotFoundHandler())
		u := ts.URL
		ts.Close()
		_, err := upstream.New(upstream.Options{}).Discover(context.Background(), u+"/mcp", nil)
		if err == nil || !strings.Contains(err.Error(), "server/discover") || strings.Contains(err.Error(), "initialize") {
			t.Fatalf("error %v, want server/discover without a fallback", err)
		}
	})
}

// TestDiscoverSessionLost: a legacy server that restarts between the
// handshake and a page (its sessions gone) answers 404 as the transport
// says, or 400 naming the session as the TypeScript SDK's reference server
// does: the listing opens a new session and asks once more. A 400 about
// anything else fails the listing.
func TestDiscoverSessionLost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"404", 404, "session not found", true},
		{"400 naming the session", 400, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`, true},
		{"400 about something else", 400, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Bad Request: invalid"},"id":null}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			sessions, live := 0, ""
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, m rpc) {
				mu.Lock()
				defer mu.Unlock()
				switch m.Method {
				case "server/discover":
					writeJSON(w, 200, rpcError(m.ID, -32601, "Method not found", nil))
				case "initialize":
					sessions++
					live = fmt.Sprint("s", sessions)
					w.Header().Set("Mcp-Session-Id", live)
					writeJSON(w, 200, result(m.ID, map[string]any{"protocolVersion": m.Params.ProtocolVersion,
						"capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "l", "version": "1"}}))
				case "notifications/initialized":
					if sessions == 1 {
						live = "" // the server restarts after the handshake
					}
					w.WriteHeader(202)
				default:
					if r.Header.Get("Mcp-Session-Id") != live {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(tc.status)
						_, _ = io.WriteString(w, tc.body)
						return
					}
					writeJSON(w, 200, result(m.ID, map[string]any{"tools": []any{tool("a")}}))
				}
			})
			l, err := upstream.New(upstream.Options{}).Discover(context.Background(), s.url, nil)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "tools/list: status 400") {
					t.Fatalf("error %v, want the server's 400", err)
				}
				return
			}
			if err != nil || len(l.Tools) != 1 {
				t.Fatalf("listing %+v, %v", l, err)
			}
			if want := []string{"server/discover", "initialize", "notifications/initialized", "tools/list", "initialize", "notifications/initialized", "tools/list", "DELETE s2"}; !slices.Equal(s.calls(), want) {
				t.Errorf("calls %v, want %v", s.calls(), want)
			}
		})
	}
}

// TestDiscoverRedirects: a server that redirects gets no credential
// header across origins. Without allowSameOriginRedirects no redirect is
// followed; with it, same-origin ones are, and another origin still is
// not.
func TestDiscoverRedirects(t *testing.T) {
	var leaked sync.Map // header values the other origin received
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-Api-Key"); v != "" {
			leaked.Store("X-Api-Key", v)
		}
		if v := r.Header.Get("Mcp-Session-Id"); v != "" {
			leaked.Store("Mcp-Session-Id", v)
		}
		http.Error(w, "no", 500)
	}))
	t.Cleanup(other.Close)
	target := func(self string) map[string]string {
		return map[string]string{"same": self + "/v2/mcp", "other": other.URL + "/v1/mcp"}
	}
	for _, tc := range []struct {
		name, to   string
		allow, ok  bool
		wantErrSub string
	}{
		{"same origin, not allowed", "same", false, false, "follows no redirect"},
		{"other origin, not allowed", "other", false, false, "follows no redirect"},
		{"same origin, allowed", "same", true, true, ""},
		{"other origin, allowed", "other", true, false, "another origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var self string
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/mcp" {
					http.Redirect(w, r, target(self)[tc.to], http.StatusTemporaryRedirect)
					return
				}
				var m rpc
				_ = json.NewDecoder(r.Body).Decode(&m)
				if r.Header.Get("X-Api-Key") != "k" {
					t.Errorf("%s after the redirect without the credential", m.Method)
				}
				if m.Method == "server/discover" {
					writeJSON(w, 200, result(m.ID, map[string]any{"supportedVersions": []string{"2026-07-28"}, "capabilities": map[string]any{"tools": map[string]any{}}}))
					return
				}
				writeJSON(w, 200, result(m.ID, map[string]any{"tools": []any{tool("a")}}))
			}))
			t.Cleanup(ts.Close)
			self = ts.URL
			ctx := context.Background()
			if tc.allow {
				ctx = upstream.AllowSameOriginRedirects(ctx)
			}
			l, err := upstream.New(upstream.Options{}).Discover(ctx, ts.URL+"/v1/mcp", map[string]string{"X-Api-Key": "k"})
			if tc.ok {
				if err != nil || len(l.Tools) != 1 {
					t.Fatalf("listing %+v, %v", l, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
				t.Fatalf("error %v, want %q", err, tc.wantErrSub)
			}
		})
	}
	leaked.Range(func(k, v any) bool {
		t.Errorf("the other origin received %s: %v", k, v)
		return true
	})
}

// TestDiscoverListingBounds: a hostile server whose pages each stay under
// the page bound but together list without end is refused at the item
// bound (per kind, across pages) or the byte bound (all results), before
// it reaches the page bound, with an error naming the bound.
func TestDiscoverListingBounds(t *testing.T) {
	page := func(n int) []any {
		tools := make([]any, n)
		for i := range tools {
			tools[i] = tool(fmt.Sprint("t", i))
		}
		return tools
	}
	hostile := func(t *testing.T) *server {
		n := 0
		return statelessWith(t, func(w http.ResponseWriter, m rpc) {
			n++
			writeJSON(w, 200, result(m.ID, map[string]any{"tools": page(150), "nextCursor": fmt.Sprint("c", n)}))
		})
	}
	for _, tc := range []struct {
		name   string
		opts   upstream.Options
		bounds upstream.Bounds
		want   string
		reqs   int
	}{
		{"items", upstream.Options{MaxItems: 1000}, upstream.Bounds{}, "tools/list: the server lists more than 1000 tools (toolmesh's listing bound listingBounds.tools", 1 + 7},
		{"bytes", upstream.Options{MaxListingBytes: 64 << 10}, upstream.Bounds{}, "tools/list: the server lists more than 65536 bytes of list results (toolmesh's listing bound listingBounds.bytes", 1 + 10},
		// A server's own bounds replace the client's for its listing.
		{"server's items", upstream.Options{MaxItems: 1000}, upstream.Bounds{Tools: 200, Prompts: 1}, "tools/list: the server lists more than 200 tools", 1 + 2},
		{"server's bytes", upstream.Options{}, upstream.Bounds{Bytes: 32 << 10}, "more than 32768 bytes of list results", 1 + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := hostile(t)
			_, err := upstream.New(tc.opts).DiscoverWithin(context.Background(), s.url, nil, tc.bounds)
			var be *upstream.BoundError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if got := len(s.calls()); got != tc.reqs {
				t.Errorf("%d requests, want %d", got, tc.reqs)
			}
		})
	}
}

// TestDiscoverErrorsSayWhichSide: a server refusing the gateway's request
// (4xx, or a request-shape JSON-RPC error) reads as a refusal of toolmesh's
// request; a 5xx as the server's failure.
func TestDiscoverErrorsSayWhichSide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, m rpc)
		want   string
	}{
		{"400 parse error", func(w http.ResponseWriter, m rpc) {
			writeJSON(w, 400, rpcError(nil, -32700, "Parse error: Invalid JSON-RPC message", nil))
		}, "tools/list: status 400: JSON-RPC error -32700: Parse error: Invalid JSON-RPC message (the server refused toolmesh's request)"},
		{"200 invalid params", func(w http.ResponseWriter, m rpc) {
			writeJSON(w, 200, rpcError(m.ID, -32602, "bad cursor", nil))
		}, "tools/list: JSON-RPC error -32602: bad cursor (the server refused toolmesh's request)"},
		{"500", func(w http.ResponseWriter, m rpc) { http.Error(w, "boom", 500) }, `tools/list: status 500: "boom" (the server failed)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := statelessWith(t, tc.answer)
			_, err := upstream.New(upstream.Options{}).Discover(context.Background(), s.url, nil)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestDiscoverUnauthorized: a 401 ends the listing at once, without the
// legacy fallback, and its error carries the challenges.
func TestDiscoverUnauthorized(t *testing.T) {
	const challenge = `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, m rpc) {
		w.Header().Add("WWW-Authenticate", challenge)
		w.Header().Add("WWW-Authenticate", `Basic realm="x"`)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_token"})
	})
	_, err := upstream.New(upstream.Options{}).Discover(t.Context(), s.url, nil)
	got, ok := upstream.Unauthorized(err)
	if !ok || !slices.Equal(got, []string{challenge, `Basic realm="x"`}) {
		t.Fatalf("Unauthorized(%v) = %q, %v", err, got, ok)
	}
	if calls := s.calls(); !slices.Equal(calls, []string{"server/discover"}) {
		t.Errorf("requests %q, want server/discover alone", calls)
	}
	if _, ok := upstream.Unauthorized(errors.New("status 401")); ok {
		t.Error("an error without a 401 answer counts as one")
	}
}
