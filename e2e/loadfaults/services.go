package loadfaults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// toolService is a Tool Service on 127.0.0.1 (docs/contracts/toolservice.md)
// whose listener can be stopped and started again on the same port, and
// whose manifest can gain and lose one extra tool. Its tools are
// deterministic, so every answer can be checked exactly:
//
//	P_add  {a, b}      → CallToolResult, text "a+b", structuredContent {sum}
//	P_echo {message}   → text/plain message
//	P_extra {message}  → text/plain "extra:" + message (only while listed)
type toolService struct {
	name, prefix, addr string
	extra              atomic.Bool

	mu  sync.Mutex
	srv *http.Server
}

func newToolService(name, prefix string) (*toolService, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tool service %s: listen: %w", name, err)
	}
	s := &toolService{name: name, prefix: prefix, addr: l.Addr().String()}
	s.serve(l)
	return s, nil
}

func (s *toolService) url() string { return "http://" + s.addr }

func (s *toolService) tools() []string {
	names := []string{s.prefix + "add", s.prefix + "echo"}
	if s.extra.Load() {
		names = append(names, s.prefix+"extra")
	}
	return names
}

func (s *toolService) handler() http.Handler {
	num := map[string]any{"type": "number"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, r *http.Request) {
		tools := []map[string]any{
			{"name": s.prefix + "add", "version": "1", "description": "Add two numbers.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"a": num, "b": num},
					"required": []string{"a", "b"}, "additionalProperties": false},
				"annotations": map[string]any{"readOnlyHint": true}},
			{"name": s.prefix + "echo", "version": "1", "description": "Echo a message.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}},
					"required": []string{"message"}}},
		}
		if s.extra.Load() {
			tools = append(tools, map[string]any{"name": s.prefix + "extra", "version": "1", "description": "Echo with a prefix.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}},
					"required": []string{"message"}}})
		}
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"tools": tools})
	})
	mux.HandleFunc("POST /tools/{tool}", func(w http.ResponseWriter, r *http.Request) {
		var args struct {
			A, B    float64
			Message string
		}
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, "bad arguments", http.StatusBadRequest)
			return
		}
		switch strings.TrimPrefix(r.PathValue("tool"), s.prefix) {
		case "add":
			w.Header().Set("content-type", "application/json")
			sum := strconv.FormatFloat(args.A+args.B, 'f', -1, 64)
			fmt.Fprintf(w, `{"content":[{"type":"text","text":"%s"}],"structuredContent":{"sum":%s}}`, sum, sum)
		case "echo":
			w.Header().Set("content-type", "text/plain")
			io.WriteString(w, args.Message)
		case "extra":
			w.Header().Set("content-type", "text/plain")
			io.WriteString(w, "extra:"+args.Message)
		default:
			http.NotFound(w, r)
		}
	})
	return mux
}

func (s *toolService) serve(l net.Listener) {
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

// stop closes the listener and every connection at once, as a crashed or
// killed process would.
func (s *toolService) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// start listens on the same port again. The port was ours a moment ago;
// binding it can fail briefly, so it is retried for a few seconds.
func (s *toolService) start(ctx context.Context) error {
	var err error
	for range 50 {
		var l net.Listener
		if l, err = net.Listen("tcp", s.addr); err == nil {
			s.serve(l)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("tool service %s: listen again on %s: %w", s.name, s.addr, err)
}

// portal is the Portal file (docs/contracts/portal.md) the gateway reads at
// every refresh. It alternates between two versions:
//
//	v0: alpha [svc-a], beta [svc-b]
//	v1: alpha [svc-a, svc-c], beta [svc-b], gamma [svc-c]
//
// so a change adds (or removes) tools on alpha and adds (or removes) the
// route gamma.
type portal struct {
	path    string
	a, b, c *toolService
	version atomic.Int32
}

func (p *portal) write(version int) error {
	svc := func(s *toolService) map[string]any {
		return map[string]any{"name": s.name, "url": s.url(), "manifestPath": "/manifest"}
	}
	routes := []map[string]any{
		{"key": "alpha", "toolServices": []any{svc(p.a)}},
		{"key": "beta", "toolServices": []any{svc(p.b)}},
	}
	if version == 1 {
		routes[0]["toolServices"] = []any{svc(p.a), svc(p.c)}
		routes = append(routes, map[string]any{"key": "gamma", "toolServices": []any{svc(p.c)}})
	}
	b, err := json.MarshalIndent(map[string]any{"routes": routes}, "", "  ")
	if err != nil {
		return err
	}
	// Written whole and renamed into place, so a refresh never reads half
	// a file.
	tmp := filepath.Join(filepath.Dir(p.path), ".portal.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write portal: %w", err)
	}
	if err := os.Rename(tmp, p.path); err != nil {
		return fmt.Errorf("write portal: %w", err)
	}
	p.version.Store(int32(version))
	return nil
}

// errNotReady is returned while the gateway has not served the first
// Portal version yet.
var errNotReady = errors.New("gateway not ready")
