package app

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunCallBeforeEnvoyHasTheRoute: the registry can route a call to a
// Tool Service before Envoy has that Tool Service's route (the xDS push is
// debounced, and in production the extproc and xds processes refresh on
// their own). Such a call must read as the tool being briefly unavailable
// (the xds cluster_pending route's 503, shaped by local_reply_config), not
// as a 404 "no MCP route" for the MCP endpoint; once the push lands, the
// call goes through.
func TestRunCallBeforeEnvoyHasTheRoute(t *testing.T) {
	var calls atomic.Int64
	ok := func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":[{"type":"text","text":"done"}]}`)
	}
	first := toolServer(t, "first", ok)
	second := toolServer(t, "second", ok)
	portal := filepath.Join(t.TempDir(), "portal.json")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	one := `{"routes":[{"key":"r","toolServices":[{"name":"first","url":"` + first + `"}]}]}`
	two := `{"routes":[{"key":"r","toolServices":[{"name":"first","url":"` + first + `"},{"name":"second","url":"` + second + `"}]}]}`
	write(one)

	var open atomic.Bool // Envoy's routes follow the registry only when open
	p := launch(t, hooks{xdsGate: open.Load}, "run", "--portal", portal, "--refresh-interval", "100ms")
	p.waitReady(t)
	base := "http://" + p.addrs["dataplane"]
	call := func(tool string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp/r",
			strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	write(two)
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, body := call("second")
		if strings.Contains(body, `"tool second failed: unavailable"`) && status == http.StatusOK && strings.Contains(body, `"id":9`) {
			break // the registry knows the tool; Envoy has no route for it yet
		}
		if !strings.Contains(body, "Unknown tool") && !strings.Contains(body, "unknown tool") {
			t.Fatalf("before Envoy has the route: %d %s, want the tool's unavailable result", status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry never listed the second tool: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d Tool Service calls before the route existed", n)
	}

	open.Store(true)
	// A change to the route, so the registry schedules a push.
	write(strings.Replace(two, `"key":"r",`, `"key":"r","description":"two services",`, 1))
	for {
		status, body := call("second")
		if status == http.StatusOK && strings.Contains(body, `"done"`) {
			break
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("after the push: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
