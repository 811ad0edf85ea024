package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// toolService is a Tool Service on loopback implementing the wire contract
// (docs/contracts/toolservice.md) with tools that exercise every row of the result mapping table.
// Its manifest can be broken on purpose to test failure isolation.
type toolService struct {
	name   string
	srv    *httptest.Server
	tools  atomic.Pointer[[]map[string]any]
	broken atomic.Bool // manifest answers 500
	// fault, when set, makes the manifest misbehave: "hang", "garbage",
	// "huge" (a valid-looking document past any sane size bound) or "gone"
	// (the connection closes without an answer).
	fault atomic.Pointer[string]
	calls atomic.Int64 // tool invocations seen
	// lastHeaders keeps the headers of the last tool call, to check what the
	// gateway sets and forwards.
	lastHeaders atomic.Pointer[http.Header]
	lastBody    atomic.Pointer[[]byte]
	// refuse, when set, answers a tool call 401 when it returns true for
	// the call's headers.
	refuse atomic.Pointer[func(http.Header) bool]
}

var objectSchema = map[string]any{"type": "object", "additionalProperties": false}

// standardTools returns the tools every test Tool Service offers, with names
// prefixed so several services can share a route without ambiguity.
func standardTools(prefix string) []map[string]any {
	num := map[string]any{"type": "number"}
	return []map[string]any{
		{"name": prefix + "add", "version": "1", "description": "Add two numbers.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"a": num, "b": num},
				"required": []string{"a", "b"}, "additionalProperties": false},
			"annotations": map[string]any{"readOnlyHint": true}},
		{"name": prefix + "echo", "version": "1", "description": "Echo text back as text/plain.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}},
				"required": []string{"message"}}},
		{"name": prefix + "json", "version": "1", "description": "Return a JSON object that is not a CallToolResult.",
			"inputSchema": objectSchema},
		{"name": prefix + "fail", "version": "1", "description": "Always answers HTTP 500.", "inputSchema": objectSchema},
		{"name": prefix + "denied", "version": "1", "description": "Always answers HTTP 403.", "inputSchema": objectSchema},
		{"name": prefix + "empty", "version": "1", "description": "Answers 204 with no body.", "inputSchema": objectSchema},
		{"name": prefix + "slow", "version": "1", "description": "Sleeps for ms milliseconds.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"ms": map[string]any{"type": "integer"}}}},
	}
}

func newToolService(t *testing.T, name string, tools []map[string]any) *toolService {
	t.Helper()
	s := &toolService{name: name}
	s.setTools(tools)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, r *http.Request) {
		if s.broken.Load() {
			http.Error(w, "manifest store down", http.StatusInternalServerError)
			return
		}
		if f := s.fault.Load(); f != nil {
			w.Header().Set("content-type", "application/json")
			switch *f {
			case "hang":
				select { // until the gateway gives up (its fetch timeout)
				case <-r.Context().Done():
				case <-time.After(30 * time.Second):
				}
				return
			case "garbage":
				io.WriteString(w, `{"tools": [ this is not JSON`)
				return
			case "gone": // the connection dies without an answer
				if hj, ok := w.(http.Hijacker); ok {
					if conn, _, err := hj.Hijack(); err == nil {
						conn.Close()
					}
				}
				return
			case "huge":
				io.WriteString(w, `{"tools":[],"pad":"`)
				chunk := strings.Repeat("x", 64<<10)
				for i := 0; i < 128 && r.Context().Err() == nil; i++ { // 8 MiB
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
				}
				io.WriteString(w, `"}`)
				return
			}
		}
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"tools": *s.tools.Load()})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /tools/{tool}", s.invoke)
	s.srv = newLoopbackServer(t, mux)
	return s
}

// setFault makes the manifest misbehave ("" heals it).
func (s *toolService) setFault(f string) {
	if f == "" {
		s.fault.Store(nil)
		return
	}
	s.fault.Store(&f)
}

// setTools replaces the manifest the service answers with.
func (s *toolService) setTools(tools []map[string]any) { s.tools.Store(&tools) }

// newLoopbackServer serves h on 127.0.0.1 for the life of the test.
func newLoopbackServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func (s *toolService) invoke(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	h := r.Header.Clone()
	s.lastHeaders.Store(&h)
	if f := s.refuse.Load(); f != nil && (*f)(h) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.lastBody.Store(&body)
	var args map[string]any
	_ = json.Unmarshal(body, &args)
	tool := r.PathValue("tool")
	switch {
	case strings.HasSuffix(tool, "add"):
		a, _ := args["a"].(float64)
		b, _ := args["b"].(float64)
		w.Header().Set("content-type", "application/json")
		fmt.Fprintf(w, `{"content":[{"type":"text","text":"%g"}],"structuredContent":{"sum":%g}}`, a+b, a+b)
	case strings.HasSuffix(tool, "echo"):
		w.Header().Set("content-type", "text/plain")
		msg, _ := args["message"].(string)
		io.WriteString(w, msg)
	case strings.HasSuffix(tool, "json"):
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"temperature":21.5,"unit":"C"}`)
	case strings.HasSuffix(tool, "fail"):
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":"database exploded"}`)
	case strings.HasSuffix(tool, "denied"):
		w.WriteHeader(http.StatusForbidden)
	case strings.HasSuffix(tool, "empty"):
		w.WriteHeader(http.StatusNoContent)
	case strings.HasSuffix(tool, "slow"):
		ms, _ := args["ms"].(float64)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("content-type", "text/plain")
		io.WriteString(w, "done")
	default:
		http.NotFound(w, r)
	}
}

// portalRoute is one route of a test Portal file.
type portalRoute struct {
	Key      string
	Services []*toolService
	// Cluster is the Portal cluster object applied to every service of the route.
	Cluster map[string]any
	// MCP are further service entries written as they are (federated
	// servers: protocol mcp), after the Tool Services.
	MCP []map[string]any
}

// writePortal writes a Portal listing file (docs/contracts/portal.md) and returns its path.
func writePortal(t *testing.T, routes ...portalRoute) string {
	t.Helper()
	var out []map[string]any
	for _, r := range routes {
		var svcs []map[string]any
		for _, s := range r.Services {
			svc := map[string]any{"name": s.name, "url": s.srv.URL, "manifestPath": "/manifest"}
			if r.Cluster != nil {
				svc["cluster"] = r.Cluster
			}
			svcs = append(svcs, svc)
		}
		svcs = append(svcs, r.MCP...)
		out = append(out, map[string]any{"key": r.Key, "description": "route " + r.Key, "toolServices": svcs})
	}
	b, err := json.MarshalIndent(map[string]any{"routes": out}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "portal.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
