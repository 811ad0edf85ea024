package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// validateLine is one message for tsclient/validate.mjs: dir "up" is a
// message toolmesh sent to an MCP server, "down" one it sent to a client;
// method names the request a response answers.
type validateLine struct {
	Dir    string          `json:"dir"`
	Method string          `json:"method,omitempty"`
	Msg    json.RawMessage `json:"msg"`
	what   string
}

// tsValidate checks msgs with the official TypeScript SDK's zod schemas
// and returns a complaint per invalid message.
func tsValidate(t *testing.T, msgs []validateLine) []string {
	t.Helper()
	node := tsClientNode(t)
	var in bytes.Buffer
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v: %s", m.what, err, m.Msg)
		}
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.CommandContext(t.Context(), node, "validate.mjs")
	cmd.Dir = tsClientDir
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node validate.mjs: %v\n%s", err, stderr.String())
	}
	verdicts := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(verdicts) != len(msgs) {
		t.Fatalf("node validate.mjs: %d verdicts for %d messages:\n%s", len(verdicts), len(msgs), out)
	}
	var bad []string
	for i, v := range verdicts {
		if v != "ok" {
			bad = append(bad, fmt.Sprintf("%s: %s\n  %s", msgs[i].what, msgs[i].Msg, v))
		}
	}
	return bad
}

// TestValidatorRefusesNullParams: the check itself fails on the message
// discovery once sent (params null), so a builder that regresses to it
// cannot pass TestFederatedMessagesValid.
func TestValidatorRefusesNullParams(t *testing.T) {
	bad := tsValidate(t, []validateLine{
		{Dir: "up", Msg: json.RawMessage(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":null}`), what: "params null"},
		{Dir: "up", Msg: json.RawMessage(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`), what: "params absent"},
	})
	if len(bad) != 1 || !strings.HasPrefix(bad[0], "params null") {
		t.Fatalf("want only params null refused, got %q", bad)
	}
}

// messageRecorder keeps every JSON-RPC message toolmesh sent upstream (the
// request bodies a reverse proxy in front of the servers saw) and down (the
// bodies it answered clients with, event streams split into events).
type messageRecorder struct {
	mu   sync.Mutex
	msgs []validateLine
}

func (r *messageRecorder) add(dir, method, what string, msg []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, validateLine{Dir: dir, Method: method, Msg: append(json.RawMessage(nil), msg...), what: what})
}

// proxy records the POST bodies sent to target.
func (r *messageRecorder) proxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	return newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &m)
			r.add("up", "", "to "+req.URL.Path+" ("+m.Method+")", body)
		}
		rp.ServeHTTP(w, req)
	})).URL
}

// post sends one request to the gateway and records every message of its
// answer.
func (r *messageRecorder) post(t *testing.T, endpoint, era string, id int, method string, params map[string]any) {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	req, _ := http.NewRequest(http.MethodPost, endpoint, nil)
	req.Header.Set("content-type", "application/json")
	req.Header.Set("accept", "application/json, text/event-stream")
	if era == "legacy" {
		req.Header.Set("mcp-protocol-version", "2025-11-25")
	} else {
		req.Header.Set("mcp-protocol-version", "2026-07-28")
		req.Header.Set("mcp-method", method)
		if name, ok := params["name"].(string); ok && method != "completion/complete" {
			req.Header.Set("mcp-name", name)
		} else if uri, ok := params["uri"].(string); ok {
			req.Header.Set("mcp-name", uri)
		}
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", era, method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	what := fmt.Sprintf("%s answer to %s (HTTP %d)", era, method, resp.StatusCode)
	if !strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		r.add("down", method, what, raw)
		return
	}
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	flush := func() {
		if len(data) > 0 {
			r.add("down", method, what+" event", []byte(strings.Join(data, "\n")))
		}
		data = nil
	}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			flush()
		} else if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		}
	}
	flush()
}

// TestFederatedMessagesValid walks every message builder of the federated
// path and checks what it sent against the official TypeScript SDK's
// schemas: discovery of a 2026-07-28 and a legacy server (server/discover,
// initialize, notifications/initialized, the list methods), the gateway's
// own legacy session set-up, the calls it routes and builds (renamed,
// era-translated both ways, re-issued after the server forgot the session),
// and every answer the gateway wrote to the clients of both eras, its own
// errors included.
func TestFederatedMessagesValid(t *testing.T) {
	up := newFedUpstream(t)
	rec := &messageRecorder{}
	via := rec.proxy(t, up.URL)
	native := newToolService(t, "native", standardTools(""))
	timeouts := map[string]any{"requestTimeout": "5s", "connectTimeout": "1s", "maxRetries": 0}
	listing := map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "native", "url": native.srv.URL},
		map[string]any{"name": "new", "protocol": "mcp", "url": via + "/new", "toolPrefix": "n_", "cluster": timeouts},
		map[string]any{"name": "old", "protocol": "mcp", "url": via + "/old", "toolPrefix": "o_", "cluster": timeouts},
	}}}}
	b, _ := json.Marshal(listing)
	portal := filepath.Join(t.TempDir(), "portal.json")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal)
	endpoint := gw.URL + "/mcp/fed"

	id := 0
	for _, era := range eras {
		post := func(method string, params map[string]any) {
			id++
			rec.post(t, endpoint, era, id, method, params)
		}
		if era == "legacy" {
			post("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "e2e", "version": "1"}})
		} else {
			post("server/discover", nil)
		}
		for _, m := range []string{"tools/list", "resources/list", "resources/templates/list", "prompts/list"} {
			post(m, nil)
		}
		for _, p := range []string{"n_", "o_"} {
			post("tools/call", map[string]any{"name": p + "whoami", "arguments": map[string]any{"word": "x"}})
			post("prompts/get", map[string]any{"name": p + "greet", "arguments": map[string]any{"name": "ada"}})
			post("completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": p + "greet"},
				"argument": map[string]any{"name": "name", "value": "al"}})
		}
		for _, uri := range []string{"new://readme", "old://items/7", "nowhere://x"} {
			post("resources/read", map[string]any{"uri": uri})
		}
		post("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "native"}})
		post("tools/call", map[string]any{"name": "no_such_tool", "arguments": map[string]any{}})
		// The legacy server forgets its sessions: the gateway opens a new
		// one and re-issues the call.
		up.forget()
		post("tools/call", map[string]any{"name": "o_whoami", "arguments": map[string]any{"word": "again"}})
	}

	rec.mu.Lock()
	msgs := slices.Clone(rec.msgs)
	rec.mu.Unlock()
	ups, downs := 0, 0
	methods := map[string]bool{}
	for _, m := range msgs {
		if m.Dir == "up" {
			ups++
			var v struct{ Method string }
			_ = json.Unmarshal(m.Msg, &v)
			methods[v.Method] = true
		} else {
			downs++
		}
	}
	// The walk must have reached every builder it claims to check.
	for _, want := range []string{"server/discover", "initialize", "notifications/initialized", "tools/list",
		"resources/list", "resources/templates/list", "prompts/list", "tools/call", "prompts/get",
		"completion/complete", "resources/read"} {
		if !methods[want] {
			t.Errorf("no %s was sent upstream; sent %v", want, methods)
		}
	}
	t.Logf("%d messages sent upstream, %d to clients", ups, downs)
	for _, b := range tsValidate(t, msgs) {
		t.Error(b)
	}
}
