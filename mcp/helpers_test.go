package mcp

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// fakeCatalog is a Catalog over pre-serialized pages; cursors are "p1", "p2"…
type fakeCatalog struct {
	pages [][]byte
	res   map[string]Resolution
}

func newFakeCatalog(t testing.TB, pageSize int, tools ...Tool) *fakeCatalog {
	t.Helper()
	c := &fakeCatalog{res: map[string]Resolution{}}
	for start := 0; start < len(tools) || start == 0; start += pageSize {
		end := min(start+pageSize, len(tools))
		b, err := EncodeTools(tools[start:end])
		if err != nil {
			t.Fatal(err)
		}
		c.pages = append(c.pages, b)
		if end == len(tools) {
			break
		}
	}
	for _, tl := range tools {
		c.res[tl.Name] = ToolFound
	}
	return c
}

func (c *fakeCatalog) ToolsPage(cursor string) ([]byte, string, bool) {
	i := 0
	if cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(cursor, "p"))
		if err != nil || !strings.HasPrefix(cursor, "p") || n <= 0 || n >= len(c.pages) {
			return nil, "", false
		}
		i = n
	}
	next := ""
	if i+1 < len(c.pages) {
		next = "p" + strconv.Itoa(i+1)
	}
	return c.pages[i], next, true
}

func (c *fakeCatalog) ToolsPageShared(cursor string) ([]byte, *SharedItems, string, bool) {
	tools, next, ok := c.ToolsPage(cursor)
	return tools, nil, next, ok
}

func (c *fakeCatalog) Resolve(name string) Resolution                    { return c.res[name] }
func (c *fakeCatalog) ParamHeaders(string) []ParamHeader                 { return nil }
func (c *fakeCatalog) SearchMode() bool                                  { return false }
func (c *fakeCatalog) Shortlist() int                                    { return 0 }
func (c *fakeCatalog) SearchTools(string, int) []byte                    { return []byte("[]") }
func (c *fakeCatalog) Offers() Offers                                    { return Offers{} }
func (c *fakeCatalog) ItemsPage(ItemKind, string) ([]byte, string, bool) { return nil, "", false }

func testTool(name string) Tool {
	return Tool{
		Name:        name,
		Description: "Tool " + name,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
	}
}

// testCatalog has tools "echo" and "weather" on one page and an ambiguous "dup".
func testCatalog(t testing.TB) *fakeCatalog {
	c := newFakeCatalog(t, 100, testTool("echo"), testTool("weather"))
	c.res["dup"] = ToolAmbiguous
	return c
}

// legacyReq is a legacy-era request without a protocol version header.
func legacyReq() *HTTPRequest {
	return &HTTPRequest{Method: "POST", Path: "/mcp/core", ContentType: "application/json",
		Accept: "application/json, text/event-stream", HasAccept: true, Host: "localhost:8080", ContentLength: -1}
}

// modernReq is a 2026-07-28 request with Mcp-Method (and Mcp-Name when name
// is not empty).
func modernReq(method, name string) *HTTPRequest {
	r := legacyReq()
	r.ProtocolVersion, r.HasProtocolVersion = Version20260728, true
	r.McpMethod, r.HasMcpMethod = method, true
	if name != "" {
		r.McpName, r.HasMcpName = name, true
	}
	return r
}

// modernBody is a 2026-07-28 request body; params is the inner members
// (may be empty) to which the _meta of the stateless era is added.
func modernBody(id, method, params string) string {
	meta := `"_meta":{"` + MetaProtocolVersion + `":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if params != "" {
		params += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":{%s%s}}`, id, method, params, meta)
}

// rpc is a decoded JSON-RPC reply.
type rpc struct {
	top    map[string]json.RawMessage
	result map[string]json.RawMessage
	err    *rpcError
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func decodeRPC(t testing.TB, body []byte) rpc {
	t.Helper()
	var r rpc
	if err := json.Unmarshal(body, &r.top); err != nil {
		t.Fatalf("reply is not a JSON object: %v\n%s", err, body)
	}
	if string(r.top["jsonrpc"]) != `"2.0"` {
		t.Fatalf("reply jsonrpc = %s, want \"2.0\"\n%s", r.top["jsonrpc"], body)
	}
	if _, ok := r.top["id"]; !ok {
		t.Fatalf("reply has no id member\n%s", body)
	}
	_, hasResult := r.top["result"]
	_, hasError := r.top["error"]
	if hasResult == hasError {
		t.Fatalf("reply must have exactly one of result and error\n%s", body)
	}
	if hasResult {
		if err := json.Unmarshal(r.top["result"], &r.result); err != nil {
			t.Fatalf("result is not an object: %v\n%s", err, body)
		}
	} else if err := json.Unmarshal(r.top["error"], &r.err); err != nil {
		t.Fatalf("error is not an object: %v\n%s", err, body)
	}
	return r
}

func header(r *Reply, key string) (string, bool) {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, key) {
			return h.Value, true
		}
	}
	return "", false
}

// checkReply checks an HTTP reply's status, content type and, for a
// JSON-RPC error, its code and id. code 0 expects a result; code -1 expects
// an empty body.
func checkReply(t testing.TB, r *Reply, status, code int, id string) rpc {
	t.Helper()
	if r == nil {
		t.Fatalf("reply is nil, want status %d", status)
	}
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	if code == -1 {
		if len(r.Body) != 0 {
			t.Fatalf("body = %s, want empty", r.Body)
		}
		if ct, ok := header(r, "content-type"); ok {
			t.Fatalf("content-type %q on an empty reply", ct)
		}
		return rpc{}
	}
	if ct, _ := header(r, "content-type"); ct != "application/json" {
		t.Fatalf("content-type = %q, want application/json", ct)
	}
	d := decodeRPC(t, r.Body)
	if got := string(d.top["id"]); got != id {
		t.Fatalf("id = %s, want %s; body %s", got, id, r.Body)
	}
	switch {
	case code == 0 && d.err != nil:
		t.Fatalf("error %d %q, want a result", d.err.Code, d.err.Message)
	case code != 0 && d.err == nil:
		t.Fatalf("result %s, want error %d", r.Body, code)
	case code != 0 && d.err.Code != code:
		t.Fatalf("error code = %d (%q), want %d", d.err.Code, d.err.Message, code)
	}
	return d
}

func str(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a string: %v", raw, err)
	}
	return s
}
