package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/envoy/dataplane"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// rawReply is a response read off the wire.
type rawReply struct {
	status int
	header http.Header
	body   []byte
}

// rawPost writes one HTTP/1.1 request byte for byte, so the test controls
// exactly which headers (and how many) reach the data plane. A nil body with
// chunked true sends chunks of 64 KiB until size bytes.
func rawPost(t *testing.T, addr, path string, headers []string, body string, chunkedSize int) rawReply {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: %s\r\n", path, addr)
	for _, h := range headers {
		fmt.Fprintf(w, "%s\r\n", h)
	}
	if chunkedSize > 0 {
		fmt.Fprintf(w, "Transfer-Encoding: chunked\r\n\r\n")
		chunk := strings.Repeat("x", 64<<10)
		for sent := 0; sent < chunkedSize; sent += len(chunk) {
			fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk)
		}
		fmt.Fprintf(w, "0\r\n\r\n")
	} else {
		fmt.Fprintf(w, "Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	// The data plane may answer before it read everything (413).
	_ = w.Flush()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawReply{resp.StatusCode, resp.Header, b}
}

// requireRPCError checks a JSON-RPC error body with id null.
func requireRPCError(t *testing.T, r rawReply, status, code int) {
	t.Helper()
	var doc struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("%d %q: body is not JSON: %v", r.status, r.body, err)
	}
	if r.status != status || r.header.Get("Content-Type") != "application/json" ||
		doc.JSONRPC != "2.0" || string(doc.ID) != "null" || doc.Error.Code != code || doc.Error.Message == "" {
		t.Errorf("got %d %q %s, want %d application/json with a JSON-RPC error %d and id null",
			r.status, r.header.Get("Content-Type"), r.body, status, code)
	}
}

// clientHeaders returns n header lines as a client sends them, Host
// included (rawPost writes Host and Content-Length itself).
func clientHeaders(n int) []string {
	h := []string{
		"Content-Type: application/json",
		"Accept: application/json, text/event-stream",
		"MCP-Protocol-Version: 2025-11-25",
	}
	for i := len(h) + 2; i < n; i++ {
		h = append(h, fmt.Sprintf("X-Client-Header-%02d: value-%02d", i, i))
	}
	return h
}

// TestLocalRepliesThroughTheDataPlane runs `toolmesh run` and sends what
// only Envoy itself answers: every such reply must be a JSON-RPC error with
// id null, and a client with 60 headers must still get its tools/call
// routed (the routing headers the body phase adds count against the same
// max_headers_count).
func TestLocalRepliesThroughTheDataPlane(t *testing.T) {
	p := startProcess(t, "run")
	addr := p.addrs["dataplane"]
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"math.add","arguments":{"a":2,"b":3}}}`

	t.Run("60 client headers on a routed tools/call", func(t *testing.T) {
		h := clientHeaders(60)
		if n := len(h) + 2; n != 60 {
			t.Fatalf("sending %d headers", n)
		}
		r := rawPost(t, addr, "/mcp/core", h, call, 0)
		var doc map[string]any
		_ = json.Unmarshal(r.body, &doc)
		if r.status != http.StatusOK || dig(doc, "id") != float64(7) || dig(doc, "result", "content", 0, "text") != "5" {
			t.Fatalf("tools/call with 60 headers = %d %s", r.status, r.body)
		}
	})
	t.Run("431 too many headers", func(t *testing.T) {
		requireRPCError(t, rawPost(t, addr, "/mcp/core", clientHeaders(150), call, 0), 431, -32600)
	})
	t.Run("400 escaped slash in the path", func(t *testing.T) {
		requireRPCError(t, rawPost(t, addr, "/mcp/core%2Fx", clientHeaders(5), call, 0), 400, -32600)
	})
	t.Run("413 body over the buffer limit", func(t *testing.T) {
		// Chunked, so the extproc server cannot refuse it by Content-Length
		// and Envoy's buffer limit (1 MiB by default) is what answers.
		requireRPCError(t, rawPost(t, addr, "/mcp/core", clientHeaders(5), "", 2<<20), 413, -32600)
	})
	t.Run("extproc answers keep their bodies", func(t *testing.T) {
		r := rawPost(t, addr, "/mcp/core", clientHeaders(5), `{"jsonrpc":"2.0","id":9,"method":`, 0)
		var doc map[string]any
		if err := json.Unmarshal(r.body, &doc); err != nil || r.status != http.StatusBadRequest || dig(doc, "error", "code") != float64(-32700) {
			t.Errorf("parse error = %d %s, want the extproc server's 400 -32700", r.status, r.body)
		}
	})
}

// TestExtProcUnreachableIsJSON programs a data plane with the translator's
// real configuration but no extproc server behind it: Envoy's 500
// (ext_proc_error_gRPC_error_14) must still be a JSON-RPC error.
func TestExtProcUnreachableIsJSON(t *testing.T) {
	routes := []registry.Route{{Key: "core", PublicPath: "/mcp/core",
		ToolServices: []registry.ToolService{{Name: "weather", URL: "http://127.0.0.1:1"}}}}
	res, err := xds.Translate(routes, xds.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	dp, err := dataplane.New(dataplane.Options{ExtProcTarget: closed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	if err := dp.Apply(res.ByType()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(dp)
	t.Cleanup(srv.Close)
	r := rawPost(t, strings.TrimPrefix(srv.URL, "http://"), "/mcp/core", clientHeaders(5),
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0)
	requireRPCError(t, r, http.StatusInternalServerError, -32603)
}

// TestToolServiceBodyLimitFollowsOverrides runs `toolmesh run` with an
// override file that gives the demo calc service a small maxRequestBytes:
// Envoy lets the call through (the route's other services keep 1 MiB) and
// the extproc server answers 413, while other services still get bigger
// calls.
func TestToolServiceBodyLimitFollowsOverrides(t *testing.T) {
	dir := t.TempDir()
	over := dir + "/overrides.yaml"
	if err := os.WriteFile(over, []byte("services:\n  calc: {maxRequestBytes: 200}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := dir + "/toolmesh.yaml"
	if err := os.WriteFile(cfg, []byte("overrides: "+over+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--config", cfg)
	addr := p.addrs["dataplane"]
	pad := strings.Repeat(" ", 300)
	requireRPCError(t, rawPost(t, addr, "/mcp/core", clientHeaders(5),
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"math.add","arguments":{"a":2,"b":3}}}`+pad, 0),
		http.StatusRequestEntityTooLarge, -32600)
	r := rawPost(t, addr, "/mcp/core", clientHeaders(5),
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"time.now","arguments":{}}}`+pad, 0)
	var doc map[string]any
	if err := json.Unmarshal(r.body, &doc); err != nil || r.status != http.StatusOK || dig(doc, "id") != float64(8) || dig(doc, "result") == nil {
		t.Errorf("time.now with the same padding = %d %s, want a result", r.status, r.body)
	}
}
