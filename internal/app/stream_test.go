package app

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startToolService serves one tool, "t", whose invocation is handled by
// invoke, and runs `toolmesh run` with a Portal listing it under route
// "r" (cluster is the Portal cluster object, "" for the defaults). It
// returns the data plane's base URL.
func startToolService(t *testing.T, cluster string, invoke http.HandlerFunc) string {
	t.Helper()
	svcURL := toolServer(t, "t", invoke)
	if cluster != "" {
		cluster = `,"cluster":` + cluster
	}
	doc := `{"routes":[{"key":"r","toolServices":[{"name":"svc","url":"` + svcURL + `"` + cluster + `}]}]}`
	portal := filepath.Join(t.TempDir(), "portal.json")
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, "run", "--portal", portal)
	return "http://" + p.addrs["dataplane"]
}

const callT = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"t","arguments":{}}}`

// TestRunStreamsEventStream: a Tool Service answering text/event-stream
// reaches an SSE-accepting client event by event through the whole path
// (xDS listener → local data plane → ext_proc mode_override). The Tool
// Service sends its second event only after the client has read the first,
// so a response buffered anywhere (an override Envoy would reject, as with
// an allowed_override_modes entry naming response_body_mode alone) never
// completes; the request's context bounds that failure.
func TestRunStreamsEventStream(t *testing.T) {
	next := make(chan struct{})
	base := startToolService(t, "", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "event: message\ndata: two\n\n")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp/r", strings.NewReader(callT))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("got %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp.ContentLength != -1 {
		t.Errorf("content-length %d on a streamed body", resp.ContentLength)
	}
	br := bufio.NewReader(resp.Body)
	var got strings.Builder
	for {
		line, err := br.ReadString('\n')
		got.WriteString(line)
		if line == "data: one\n" {
			close(next) // the first event arrived while the second was held back
		}
		if err != nil {
			if err != io.EOF {
				t.Fatalf("reading the stream after %q: %v", got.String(), err)
			}
			break
		}
	}
	if want := "event: message\ndata: one\n\nevent: message\ndata: two\n\n"; got.String() != want {
		t.Fatalf("client read %q, want %q", got.String(), want)
	}
}

// TestRunUpstreamAbortAfterHeaders: a Tool Service that sends its response
// headers and then stalls past requestTimeout, or drops the connection
// mid-body, while ext_proc holds those headers for the BUFFERED body. Envoy
// answers with the router's local reply sent directly (FilterManager::
// sendLocalReply → sendDirectLocalReply, local_reply_config applied), so
// the client gets the listener's JSON-RPC result, not a reset stream.
func TestRunUpstreamAbortAfterHeaders(t *testing.T) {
	tests := []struct {
		name    string
		invoke  http.HandlerFunc
		cluster string
		want    string
	}{
		{name: "headers, then a stall past requestTimeout", cluster: `{"requestTimeout":"1s"}`,
			invoke: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, `{"content":`)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			},
			want: "tool t failed: timeout"},
		{name: "headers, then the connection drops",
			invoke: func(w http.ResponseWriter, r *http.Request) {
				conn, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"content\":")
				_ = brw.Flush()
			},
			want: "tool t failed: unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := startToolService(t, tt.cluster, tt.invoke)
			code, out := rpc(t, base, "r", callT, map[string]string{"MCP-Protocol-Version": "2025-11-25"})
			if code != http.StatusOK || dig(out, "id") != float64(5) || dig(out, "result", "isError") != true {
				t.Fatalf("tools/call = %d %v, want 200 with an isError result for id 5", code, out)
			}
			if text, _ := dig(out, "result", "content", 0, "text").(string); text != tt.want {
				t.Errorf("text %q, want %q", text, tt.want)
			}
		})
	}
}
