package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
)

// messagesDoc holds the table of ext_proc messages per request.
const messagesDoc = "../../docs/decisions/0001-ext-proc-architecture.md"

// messageRow is one row of that table.
type messageRow struct {
	request, era string
	messages     string // a number, or "k+n" for k messages plus one per body chunk
	phases       string // the phases in order; "response body ×n" repeats
}

// readMessageTable reads the table under the "ext_proc messages per
// request" heading.
func readMessageTable(t *testing.T) []messageRow {
	t.Helper()
	b, err := os.ReadFile(messagesDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## ext_proc messages per request")
	if !ok {
		t.Fatalf("%s: no \"## ext_proc messages per request\" section", messagesDoc)
	}
	var rows []messageRow
	inTable := false
	for line := range strings.SplitSeq(sec, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) != 5 {
			t.Fatalf("%s: row %q has %d cells, want 5", messagesDoc, line, len(cells))
		}
		if cells[0] == "request" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, messageRow{request: strings.Trim(cells[0], "`"), era: cells[1], messages: cells[2], phases: cells[3]})
	}
	if len(rows) == 0 {
		t.Fatalf("%s: the messages table is empty", messagesDoc)
	}
	return rows
}

// TestExtProcMessagesPerRequest sends each request of the documented table
// through `toolmesh run` (local data plane → ext_proc → Tool Service) and
// counts the ext_proc messages of its stream, so the table in
// docs/decisions/0001-ext-proc-architecture.md cannot drift from the code.
func TestExtProcMessagesPerRequest(t *testing.T) {
	streams := make(chan []string, 1)
	count := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !strings.HasSuffix(info.FullMethod, "/Process") {
			return h(srv, ss)
		}
		c := &countingStream{ServerStream: ss}
		err := h(srv, c)
		streams <- c.phases
		return err
	}
	svc := messageToolService(t)
	portal := filepath.Join(t.TempDir(), "portal.json")
	doc := `{"routes":[{"key":"msgs","toolServices":[{"name":"msgs","url":"` + svc + `"}]}]}`
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := launch(t, hooks{extProcStream: count}, "run", "--portal", portal, "--log-level", "warn")
	p.waitReady(t)
	base := "http://" + p.addrs["dataplane"]

	cases := messageRequests()
	rows := readMessageTable(t)
	seen := map[string]bool{}
	for _, row := range rows {
		key := row.request + " | " + row.era
		seen[key] = true
		req, ok := cases[key]
		if !ok {
			t.Errorf("table row %q: the test has no request for it", key)
			continue
		}
		t.Run(key, func(t *testing.T) {
			// The route is ready once the snapshot reached the data plane.
			var status int
			var body string
			for deadline := time.Now().Add(30 * time.Second); ; {
				drainStreams(streams)
				status, body = req.send(t, base)
				if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if status != req.status || !strings.Contains(body, req.contains) {
				t.Fatalf("status %d, body %q; want %d with %q", status, body, req.status, req.contains)
			}
			var got []string
			select {
			case got = <-streams:
			case <-time.After(10 * time.Second):
				t.Fatal("the ext_proc stream did not end")
			}
			if n := messagesOf(row.messages, got); n != "" {
				t.Errorf("%d messages %v, table says %s", len(got), got, row.messages)
			}
			if !phasesMatch(row.phases, got) {
				t.Errorf("phases %v, table says %q", got, row.phases)
			}
		})
	}
	for key := range cases {
		if !seen[key] {
			t.Errorf("request %q is not in the table of %s", key, messagesDoc)
		}
	}
}

func drainStreams(c chan []string) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// messagesOf checks a count against the table's "k" or "k+n" (k plus at
// least one more); it returns "" when they agree.
func messagesOf(want string, got []string) string {
	k, plus, _ := strings.Cut(want, "+")
	n := 0
	for _, c := range k {
		if c < '0' || c > '9' {
			return "bad count " + want
		}
		n = n*10 + int(c-'0')
	}
	if (plus == "" && len(got) == n) || (plus == "n" && len(got) > n) {
		return ""
	}
	return "mismatch"
}

// phasesMatch checks the phases against the table's comma-separated list,
// where "X ×n" stands for one or more X.
func phasesMatch(want string, got []string) bool {
	var pat strings.Builder
	pat.WriteString("^")
	for p := range strings.SplitSeq(want, ",") {
		p = strings.TrimSpace(p)
		if name, ok := strings.CutSuffix(p, " ×n"); ok {
			pat.WriteString("(" + regexp.QuoteMeta(name) + ",)+")
			continue
		}
		pat.WriteString(regexp.QuoteMeta(p) + ",")
	}
	pat.WriteString("$")
	return regexp.MustCompile(pat.String()).MatchString(strings.Join(got, ",") + ",")
}

// countingStream records the phase of every message Envoy sends.
type countingStream struct {
	grpc.ServerStream
	phases []string
}

func (c *countingStream) RecvMsg(m any) error {
	err := c.ServerStream.RecvMsg(m)
	if err == nil {
		if r, ok := m.(*extprocv3.ProcessingRequest); ok {
			c.phases = append(c.phases, phaseName(r))
		}
	}
	return err
}

func phaseName(r *extprocv3.ProcessingRequest) string {
	switch r.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return "request headers"
	case *extprocv3.ProcessingRequest_RequestBody:
		return "request body"
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return "request trailers"
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return "response headers"
	case *extprocv3.ProcessingRequest_ResponseBody:
		return "response body"
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return "response trailers"
	}
	return "unknown"
}

// messageRequest is one request of the table and what its answer shows.
type messageRequest struct {
	method, path, body string
	headers            map[string]string
	status             int
	contains           string
}

func (m messageRequest) send(t *testing.T, base string) (int, string) {
	t.Helper()
	var body io.Reader
	if m.body != "" {
		body = strings.NewReader(m.body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, m.method, base+m.path, body)
	if m.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range m.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// messageRequests are the table's requests, by "request | era".
func messageRequests() map[string]messageRequest {
	const (
		legacy = "2025-11-25"
		modern = "2026-07-28"
		meta   = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	)
	old := func(body string, status int, contains string) messageRequest {
		return messageRequest{method: http.MethodPost, path: "/mcp/msgs", body: body,
			headers: map[string]string{"MCP-Protocol-Version": legacy}, status: status, contains: contains}
	}
	now := func(method, name, params string, status int, contains string) messageRequest {
		h := map[string]string{"MCP-Protocol-Version": modern, "Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
			params = `"name":"` + name + `",` + params
		}
		body := `{"jsonrpc":"2.0","id":9,"method":"` + method + `","params":{` + params + meta + `}}`
		return messageRequest{method: http.MethodPost, path: "/mcp/msgs", body: body, headers: h, status: status, contains: contains}
	}
	call := func(tool, args string) string {
		return `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	}
	return map[string]messageRequest{
		"initialize | " + legacy: old(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			200, `"protocolVersion":"2025-11-25"`),
		"notifications/initialized | " + legacy:     old(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, ""),
		"ping | " + legacy:                          old(`{"jsonrpc":"2.0","id":9,"method":"ping"}`, 200, `"result":{}`),
		"tools/list | " + legacy:                    old(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, 200, `"name":"echo"`),
		"tools/list | " + modern:                    now("tools/list", "", "", 200, `"name":"echo"`),
		"server/discover | " + modern:               now("server/discover", "", "", 200, `"result"`),
		"tools/call | " + legacy:                    old(call("echo", `{"q":"x"}`), 200, `"structuredContent":{"q":"x"}`),
		"tools/call | " + modern:                    now("tools/call", "echo", `"arguments":{"q":"x"},`, 200, `"structuredContent":{"q":"x"}`),
		"tools/call, invalid arguments | " + legacy: old(call("echo", `{"q":1}`), 200, `"isError":true`),
		"tools/call, unknown tool | " + modern:      now("tools/call", "nope", `"arguments":{},`, 200, `"error"`),
		"tools/call, event stream | " + legacy:      old(call("events", `{}`), 200, "data: two"),
		"tools/call, event stream | " + modern:      now("tools/call", "events", `"arguments":{},`, 200, "data: two"),
		"tools/call, progress stream | " + legacy: old(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"count","arguments":{},"_meta":{"progressToken":"p1"}}}`,
			200, `"counted"`),
		"tools/call, progress stream | " + modern: {method: http.MethodPost, path: "/mcp/msgs",
			body:    `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"count","arguments":{},"_meta":{"progressToken":"p1",` + meta[len(`"_meta":{`):] + `}}`,
			headers: map[string]string{"MCP-Protocol-Version": modern, "Mcp-Method": "tools/call", "Mcp-Name": "count"},
			status:  200, contains: `"counted"`},
		"unknown route | " + legacy: {method: http.MethodPost, path: "/mcp/none", body: `{"jsonrpc":"2.0","id":9,"method":"ping"}`, status: 404, contains: `"id":9`},
		"GET | —":                   {method: http.MethodGet, path: "/mcp/msgs", status: 405},
	}
}

// messageToolService serves echo (JSON), events (an event stream in two
// flushes) and count (a progress stream) and returns its URL.
func messageToolService(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[
			{"name":"echo","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"path":"/tools/echo"},
			{"name":"events","inputSchema":{"type":"object"},"path":"/tools/events"},
			{"name":"count","inputSchema":{"type":"object"},"path":"/tools/count"}]}`)
	})
	mux.HandleFunc("POST /tools/echo", func(w http.ResponseWriter, r *http.Request) {
		args, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":[],"structuredContent":`+string(args)+`}`)
	})
	mux.HandleFunc("POST /tools/events", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	mux.HandleFunc("POST /tools/count", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"progress":1,"total":2}`+"\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, `{"result":{"content":[{"type":"text","text":"counted"}]}}`+"\n")
	})
	svc := httptest.NewServer(mux)
	t.Cleanup(svc.Close)
	return svc.URL
}
