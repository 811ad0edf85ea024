package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// toolServer serves a manifest with one tool, name, at /tools/name, and
// invoke for its calls.
func toolServer(t *testing.T, name string, invoke http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"`+name+`","version":"1","description":"A test tool.",
			"inputSchema":{"type":"object"},"path":"/tools/`+name+`"}]}`)
	})
	mux.HandleFunc("POST /tools/"+name, invoke)
	svc := httptest.NewServer(mux)
	t.Cleanup(svc.Close)
	return svc.URL
}

// TestRunCallOutcomesOfEnvoysReplies: through the whole path (xDS listener
// with local_reply_config → local data plane → extproc server), a Tool
// Service that hangs past its requestTimeout counts as timeout, one whose
// connection closes before any response as unavailable, and a client that
// goes away as no_response; the client of Envoy's replies reads the tool
// result without the marker header.
func TestRunCallOutcomesOfEnvoysReplies(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	hang := toolServer(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server closes
	gone := toolServer(t, "gone", func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	doc := `{"routes":[{"key":"r","toolServices":[
		{"name":"hang","url":"` + hang + `","cluster":{"requestTimeout":"1s","maxRetries":0}},
		{"name":"gone","url":"` + gone + `","cluster":{"maxRetries":0}}]}]}`
	portal := filepath.Join(t.TempDir(), "portal.json")
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--portal", portal)
	base := "http://" + p.addrs["dataplane"]
	call := func(tool string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	}

	for _, tc := range []struct{ tool, want string }{
		{"slow", "timeout"},
		{"gone", "unavailable"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp/r", strings.NewReader(call(tc.tool)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"tool `+tc.tool+` failed: `+tc.want+`"`) {
			t.Fatalf("%s: %d %s, want 200 with the %s tool result", tc.tool, resp.StatusCode, b, tc.want)
		}
		if v := resp.Header.Get(wire.LocalReplyHeader); v != "" {
			t.Errorf("%s: the client got %s: %s", tc.tool, wire.LocalReplyHeader, v)
		}
	}

	// The client goes away while the Tool Service holds the call.
	<-arrived // drain the first call's signal
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := post(ctx, base, "r", call("slow"), map[string]string{"MCP-Protocol-Version": "2025-11-25"})
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached the Tool Service")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the canceled call got an answer")
	}

	want := map[string]string{
		`toolmesh_tool_calls_total{outcome="timeout",route="r",tool="slow"} 1`:     "",
		`toolmesh_tool_calls_total{outcome="unavailable",route="r",tool="gone"} 1`: "",
		`toolmesh_tool_calls_total{outcome="no_response",route="r",tool="slow"} 1`: "",
	}
	var body string
	for range 100 { // the extproc server counts a call as its stream ends
		_, body = httpGet(t, "http://"+p.addrs["admin"]+"/metrics")
		missing := false
		for line := range want {
			if !strings.Contains(body, line) {
				missing = true
			}
		}
		if !missing {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	for line := range want {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "toolmesh_tool_calls_total") {
			t.Log(l)
		}
	}
}
