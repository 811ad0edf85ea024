package mcp

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

type handleCase struct {
	name   string
	req    *HTTPRequest
	body   string
	status int // 0: a Call is expected
	code   int // 0: a result; -1: an empty body; else the error code
	id     string
	check  func(t *testing.T, d rpc)
	call   *Call
}

func runHandleCases(t *testing.T, s *Server, cat Catalog, tests []handleCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := s.Handle(tt.req, []byte(tt.body), cat)
			if (out.Reply == nil) == (out.Call == nil) {
				t.Fatalf("Outcome = %+v, want exactly one of Reply and Call", out)
			}
			if tt.status == 0 {
				if out.Call == nil {
					t.Fatalf("reply %d %s, want a call", out.Reply.Status, out.Reply.Body)
				}
				got, want := *out.Call, *tt.call
				if string(got.ID) != string(want.ID) || got.Era != want.Era || got.Version != want.Version ||
					got.Tool != want.Tool || string(got.Arguments) != string(want.Arguments) {
					t.Fatalf("call = {ID:%s Era:%v Version:%s Tool:%q Arguments:%s}, want {ID:%s Era:%v Version:%s Tool:%q Arguments:%s}",
						got.ID, got.Era, got.Version, got.Tool, got.Arguments,
						want.ID, want.Era, want.Version, want.Tool, want.Arguments)
				}
				return
			}
			if out.Reply == nil {
				t.Fatalf("call %+v, want reply %d", out.Call, tt.status)
			}
			d := checkReply(t, out.Reply, tt.status, tt.code, tt.id)
			if tt.check != nil {
				tt.check(t, d)
			}
		})
	}
}

// TestJSONRPCRules runs the JSON-RPC table (docs/contracts/mcp.md) rows that do not depend
// on the era with legacy and stateless headers alike.
func TestJSONRPCRules(t *testing.T) {
	s := NewServer(Config{MaxDepth: 8, MaxBodyBytes: 4096})
	deep := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + strings.Repeat("[", 10) + strings.Repeat("]", 10) + `}}`
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 4096) + `"}}`
	for _, era := range []struct {
		name string
		req  func() *HTTPRequest
	}{
		{"legacy", legacyReq},
		{"stateless", func() *HTTPRequest { return modernReq("ping", "") }},
	} {
		t.Run(era.name, func(t *testing.T) {
			runHandleCases(t, s, testCatalog(t), []handleCase{
				{name: "not JSON", req: era.req(), body: `{"jsonrpc":"2.0",`, status: 400, code: CodeParseError, id: "null"},
				{name: "empty body", req: era.req(), body: ``, status: 400, code: CodeParseError, id: "null"},
				{name: "trailing garbage", req: era.req(), body: `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, status: 400, code: CodeParseError, id: "null"},
				{name: "two values", req: era.req(), body: `{} {}`, status: 400, code: CodeParseError, id: "null"},
				{name: "invalid UTF-8", req: era.req(), body: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffng\"}", status: 400, code: CodeParseError, id: "null"},
				{name: "batch", req: era.req(), body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "empty batch", req: era.req(), body: `[]`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "string", req: era.req(), body: `"ping"`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "null", req: era.req(), body: `null`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "too deep", req: era.req(), body: deep, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "too large", req: era.req(), body: big, status: 413, code: CodeInvalidRequest, id: "null"},
				{name: "no jsonrpc", req: era.req(), body: `{"id":1,"method":"ping"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "jsonrpc 1.0", req: era.req(), body: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "jsonrpc number", req: era.req(), body: `{"jsonrpc":2.0,"id":1,"method":"ping"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "id null", req: era.req(), body: `{"jsonrpc":"2.0","id":null,"method":"ping"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "id bool", req: era.req(), body: `{"jsonrpc":"2.0","id":true,"method":"ping"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "id object", req: era.req(), body: `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "id array", req: era.req(), body: `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "method number", req: era.req(), body: `{"jsonrpc":"2.0","id":"a","method":1}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "method missing", req: era.req(), body: `{"jsonrpc":"2.0","id":"a"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "params string", req: era.req(), body: `{"jsonrpc":"2.0","id":2,"method":"ping","params":"x"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "duplicate id", req: era.req(), body: `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "duplicate method escaped", req: era.req(), body: `{"jsonrpc":"2.0","id":1,"method":"ping","m\u0065thod":"x"}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "notification", req: era.req(), body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, status: 202, code: -1},
				{name: "notification unknown method", req: era.req(), body: `{"jsonrpc":"2.0","method":"x/y","params":{}}`, status: 202, code: -1},
				{name: "notification cancelled", req: era.req(), body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, status: 202, code: -1},
				{name: "invalid notification", req: era.req(), body: `{"jsonrpc":"2.0","method":5}`, status: 400, code: CodeInvalidRequest, id: "null"},
				{name: "client result", req: era.req(), body: `{"jsonrpc":"2.0","id":"s1","result":{}}`, status: 202, code: -1},
				{name: "client error", req: era.req(), body: `{"jsonrpc":"2.0","id":"s1","error":{"code":-1,"message":"no"}}`, status: 202, code: -1},
				{name: "whitespace around", req: era.req(), body: "\n\t {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"} \r\n", status: 202, code: -1},
			})
		})
	}
}

// TestIDEcho checks that ids come back byte for byte, in results and errors.
// (An Invalid Request answers with id null, as docs/contracts/mcp.md says; see handle_test.)
func TestIDEcho(t *testing.T) {
	s := NewServer(Config{})
	ids := []string{`1`, `"1"`, `1.0`, `-0`, `1e3`, `1E+3`, `0.5e-7`, `123456789012345678901234567890`,
		`""`, `"a\"b"`, `"\u00e9"`, `"é"`, `"\/x"`, `"\ud83d\ude00"`}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			for _, tc := range []struct {
				body string
				code int
			}{
				{`{"jsonrpc":"2.0","id" : ` + id + ` ,"method":"ping"}`, 0},
				{`{"jsonrpc":"2.0","method":"nope","id":` + id + `}`, CodeMethodNotFound},
				{`{"id":` + id + `,"jsonrpc":"2.0","method":"tools/call","params":{"name":"nope"}}`, CodeInvalidParams},
			} {
				out := s.Handle(legacyReq(), []byte(tc.body), testCatalog(t))
				status := 200
				if tc.code == CodeInvalidRequest {
					status = 400
				}
				checkReply(t, out.Reply, status, tc.code, id)
				if !bytes.Contains(out.Reply.Body, []byte(`"id":`+id+`,`)) {
					t.Fatalf("body %s does not carry id %s verbatim", out.Reply.Body, id)
				}
			}
			out := s.Handle(legacyReq(), []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo"}}`), testCatalog(t))
			if out.Call == nil || string(out.Call.ID) != id {
				t.Fatalf("call id = %+v, want %s", out.Call, id)
			}
		})
	}
}

// TestCallIDIsACopy: every outcome that outlives the body (a Call, a
// Forward, an Answer) keeps its own copy of the id, so the caller may reuse
// the body.
func TestCallIDIsACopy(t *testing.T) {
	s := NewServer(Config{})
	stateful := statefulCatalog{testCatalog(t), Offers{Resources: true, Logging: true, Subscribe: true}}
	for _, tc := range []struct {
		name string
		body string
		cat  Catalog
		id   func(Outcome) []byte
	}{
		{"call", `{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"echo"}}`, testCatalog(t),
			func(o Outcome) []byte { return o.Call.ID }},
		{"forward", `{"jsonrpc":"2.0","id":"abc","method":"resources/subscribe","params":{"uri":"test://x"}}`, stateful,
			func(o Outcome) []byte { return o.Forward.ID }},
		{"answer", `{"jsonrpc":"2.0","id":"abc","result":{}}`, testCatalog(t),
			func(o Outcome) []byte { return o.Answer.ID }},
	} {
		body := []byte(tc.body)
		out := s.Handle(legacyReq(), body, tc.cat)
		for i := range body {
			body[i] = 'x'
		}
		if id := tc.id(out); string(id) != `"abc"` {
			t.Errorf("%s: ID changed with the body: %s", tc.name, id)
		}
	}
}

func toolNames(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatalf("tools: %v: %s", err, raw)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, str(t, tl["name"]))
		if _, ok := tl["inputSchema"]; !ok {
			t.Fatalf("tool %s has no inputSchema", tl["name"])
		}
	}
	return names
}

func wantNames(want ...string) func(t *testing.T, d rpc) {
	return func(t *testing.T, d rpc) {
		t.Helper()
		if got := toolNames(t, d.result["tools"]); !slices.Equal(got, want) {
			t.Fatalf("tools = %v, want %v", got, want)
		}
	}
}

// wantKeys checks a result has exactly these members.
func wantKeys(keys ...string) func(t *testing.T, d rpc) {
	return func(t *testing.T, d rpc) {
		t.Helper()
		var got []string
		for k := range d.result {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			t.Fatalf("result members = %v, want %v", got, keys)
		}
	}
}

func all(checks ...func(t *testing.T, d rpc)) func(t *testing.T, d rpc) {
	return func(t *testing.T, d rpc) {
		t.Helper()
		for _, c := range checks {
			c(t, d)
		}
	}
}

func wantMessage(sub string) func(t *testing.T, d rpc) {
	return func(t *testing.T, d rpc) {
		t.Helper()
		if !strings.Contains(d.err.Message, sub) {
			t.Fatalf("message %q does not contain %q", d.err.Message, sub)
		}
	}
}

func withVersion(r *HTTPRequest, v string) *HTTPRequest {
	r.ProtocolVersion, r.HasProtocolVersion = v, true
	return r
}

func TestLegacyEra(t *testing.T) {
	s := NewServer(Config{ServerName: "gw", ServerVersion: "1.2.3", Instructions: "Use the tools.", ListTTL: time.Minute})
	initWith := func(v string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v +
			`","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	}
	wantInit := func(v string) func(t *testing.T, d rpc) {
		return all(wantKeys("protocolVersion", "capabilities", "serverInfo", "instructions"), func(t *testing.T, d rpc) {
			if got := str(t, d.result["protocolVersion"]); got != v {
				t.Fatalf("protocolVersion = %q, want %q", got, v)
			}
			if got := string(d.result["capabilities"]); got != `{"tools":{"listChanged":false}}` {
				t.Fatalf("capabilities = %s", got)
			}
			if got := string(d.result["serverInfo"]); got != `{"name":"gw","version":"1.2.3"}` {
				t.Fatalf("serverInfo = %s", got)
			}
			if got := str(t, d.result["instructions"]); got != "Use the tools." {
				t.Fatalf("instructions = %q", got)
			}
		})
	}
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":` + params + `}`
	}
	method := func(m string) string { return `{"jsonrpc":"2.0","id":5,"method":"` + m + `","params":{}}` }
	legacyCall := func(version, tool, args string) *Call {
		return &Call{ID: json.RawMessage("4"), Era: EraLegacy, Version: version, Tool: tool, Arguments: json.RawMessage(args)}
	}
	withToken := func(c *Call, token string) *Call { c.ProgressToken = json.RawMessage(token); return c }
	runHandleCases(t, s, testCatalog(t), []handleCase{
		{name: "initialize 2025-11-25", req: legacyReq(), body: initWith("2025-11-25"), status: 200, id: "1", check: wantInit("2025-11-25")},
		{name: "initialize 2025-06-18", req: legacyReq(), body: initWith("2025-06-18"), status: 200, id: "1", check: wantInit("2025-06-18")},
		{name: "initialize 2025-03-26", req: legacyReq(), body: initWith("2025-03-26"), status: 200, id: "1", check: wantInit("2025-03-26")},
		{name: "initialize 2026 gets latest legacy", req: legacyReq(), body: initWith("2026-07-28"), status: 200, id: "1", check: wantInit("2025-11-25")},
		{name: "initialize unknown gets latest legacy", req: legacyReq(), body: initWith("2024-11-05"), status: 200, id: "1", check: wantInit("2025-11-25")},
		{name: "initialize without params", req: legacyReq(), body: `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, status: 200, id: "1", check: wantInit("2025-11-25")},
		{name: "ping", req: legacyReq(), body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, status: 200, id: "2", check: wantKeys()},
		{name: "ping with header", req: withVersion(legacyReq(), "2025-11-25"), body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, status: 200, id: "2", check: wantKeys()},
		{name: "tools/list", req: legacyReq(), body: list, status: 200, id: "3", check: all(wantKeys("tools"), wantNames("echo", "weather"))},
		{name: "tools/list null cursor", req: legacyReq(), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":null}}`, status: 200, id: "3", check: wantNames("echo", "weather")},
		{name: "tools/list bad cursor", req: legacyReq(), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"zz"}}`, status: 200, code: CodeInvalidParams, id: "3"},
		{name: "tools/list cursor not string", req: legacyReq(), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":1}}`, status: 200, code: CodeInvalidParams, id: "3"},
		{name: "tools/list params array", req: legacyReq(), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[]}`, status: 200, code: CodeInvalidParams, id: "3"},
		{name: "tools/call", req: legacyReq(), body: call(`{"name":"echo","arguments":{"q":"hi"}}`), call: legacyCall("2025-03-26", "echo", `{"q":"hi"}`)},
		{name: "tools/call version header", req: withVersion(legacyReq(), "2025-06-18"), body: call(`{"name":"echo","arguments":{"q":"hi"}}`), call: legacyCall("2025-06-18", "echo", `{"q":"hi"}`)},
		{name: "tools/call string progressToken", req: legacyReq(), body: call(`{"name":"echo","_meta":{"progressToken":"p1"}}`),
			call: withToken(legacyCall("2025-03-26", "echo", `{}`), `"p1"`)},
		{name: "tools/call number progressToken", req: legacyReq(), body: call(`{"name":"echo","_meta":{"progressToken":42}}`),
			call: withToken(legacyCall("2025-03-26", "echo", `{}`), `42`)},
		{name: "tools/call object progressToken ignored", req: legacyReq(), body: call(`{"name":"echo","_meta":{"progressToken":{}}}`),
			call: legacyCall("2025-03-26", "echo", `{}`)},
		{name: "tools/call _meta version", req: legacyReq(), body: call(`{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`), call: legacyCall("2025-11-25", "echo", `{}`)},
		{name: "tools/call arguments verbatim", req: legacyReq(), body: call(`{"arguments": { "q" : "\u00e9" , "n":1.50 } ,"name":"echo"}`), call: legacyCall("2025-03-26", "echo", `{ "q" : "\u00e9" , "n":1.50 }`)},
		{name: "tools/call no arguments", req: legacyReq(), body: call(`{"name":"echo"}`), call: legacyCall("2025-03-26", "echo", `{}`)},
		{name: "tools/call null arguments", req: legacyReq(), body: call(`{"name":"echo","arguments":null}`), call: legacyCall("2025-03-26", "echo", `{}`)},
		{name: "tools/call ignores task and progress", req: legacyReq(), body: call(`{"name":"echo","task":{"ttl":1},"_meta":{"progressToken":"p"}}`), call: legacyCall("2025-03-26", "echo", `{}`)},
		{name: "tools/call escaped name", req: legacyReq(), body: call(`{"name":"\u0065cho"}`), call: legacyCall("2025-03-26", "echo", `{}`)},
		{name: "tools/call arguments array", req: legacyReq(), body: call(`{"name":"echo","arguments":[1]}`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call arguments string", req: legacyReq(), body: call(`{"name":"echo","arguments":"{}"}`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call name missing", req: legacyReq(), body: call(`{"arguments":{}}`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call name number", req: legacyReq(), body: call(`{"name":7}`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call no params", req: legacyReq(), body: `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`, status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call params array", req: legacyReq(), body: call(`["echo"]`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call duplicate name", req: legacyReq(), body: call(`{"name":"echo","name":"weather"}`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call duplicate argument", req: legacyReq(), body: call(`{"name":"echo","arguments":{"path":"/tmp/ok","path":"/etc/passwd"}}`), status: 200, code: CodeInvalidParams, id: "4", check: wantMessage(`Invalid params: arguments: duplicate member "path"`)},
		{name: "tools/call duplicate escaped nested argument", req: legacyReq(), body: call(`{"name":"echo","arguments":{"a":[{"p":1,"\u0070":2}]}}`), status: 200, code: CodeInvalidParams, id: "4", check: wantMessage(`Invalid params: arguments: duplicate member "p"`)},
		{name: "tools/call lone surrogate argument", req: legacyReq(), body: call(`{"name":"echo","arguments":{"id":"\ud800"}}`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call lone surrogate argument name", req: legacyReq(), body: call(`{"name":"echo","arguments":{"\udbffx":1}}`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call surrogate pair argument", req: legacyReq(), body: call(`{"name":"echo","arguments":{"id":"\ud83d\ude00"}}`), call: legacyCall("2025-03-26", "echo", `{"id":"\ud83d\ude00"}`)},
		{name: "tools/call invalid UTF-8 argument", req: legacyReq(), body: call("{\"name\":\"echo\",\"arguments\":{\"id\":\"\xff\"}}"), status: 400, code: CodeParseError, id: "null"},
		{name: "tools/call unknown", req: legacyReq(), body: call(`{"name":"nope"}`), status: 200, code: CodeInvalidParams, id: "4", check: wantMessage("unknown tool: nope")},
		{name: "tools/call ambiguous", req: legacyReq(), body: call(`{"name":"dup"}`), status: 200, code: CodeInvalidParams, id: "4", check: wantMessage("ambiguous tool: dup")},
		{name: "resources/list", req: legacyReq(), body: method("resources/list"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "resources/read", req: legacyReq(), body: method("resources/read"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "prompts/list", req: legacyReq(), body: method("prompts/list"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "prompts/get", req: legacyReq(), body: method("prompts/get"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "logging/setLevel", req: legacyReq(), body: method("logging/setLevel"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "completion/complete", req: legacyReq(), body: method("completion/complete"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "subscriptions/listen", req: legacyReq(), body: method("subscriptions/listen"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "unknown method", req: legacyReq(), body: method("x"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "method name is case-sensitive", req: legacyReq(), body: method("Ping"), status: 200, code: CodeMethodNotFound, id: "5"},
		{name: "Mcp headers are ignored", req: func() *HTTPRequest {
			r := legacyReq()
			r.McpMethod, r.HasMcpMethod, r.McpName, r.HasMcpName = "tools/list", true, "weather", true
			return r
		}(), body: call(`{"name":"echo"}`), call: legacyCall("2025-03-26", "echo", `{}`)},
		{name: "unsupported _meta version", req: legacyReq(), body: call(`{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2024-11-05"}}`), status: 400, code: CodeUnsupportedProtocolVersion, id: "4"},
		{name: "header and _meta disagree", req: withVersion(legacyReq(), "2025-11-25"), body: call(`{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), status: 400, code: CodeHeaderMismatch, id: "4"},
		{name: "unsupported header", req: withVersion(legacyReq(), "2024-11-05"), body: list, status: 400, code: CodeUnsupportedProtocolVersion, id: "3"},
	})
}

func TestLegacyResultsHaveNoStatelessFields(t *testing.T) {
	s := NewServer(Config{})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
	} {
		out := s.Handle(legacyReq(), []byte(body), testCatalog(t))
		d := checkReply(t, out.Reply, 200, 0, "1")
		for _, k := range []string{"resultType", "_meta", "ttlMs", "cacheScope"} {
			if _, ok := d.result[k]; ok {
				t.Errorf("%s: legacy result has %q: %s", body, k, out.Reply.Body)
			}
		}
		if bytes.Contains(out.Reply.Body, []byte("Mcp-Session-Id")) {
			t.Errorf("session id in %s", out.Reply.Body)
		}
		for _, h := range out.Reply.Headers {
			if strings.EqualFold(h.Key, "mcp-session-id") {
				t.Errorf("%s: reply issues a session id", body)
			}
		}
	}
}

func TestToolsListPagination(t *testing.T) {
	s := NewServer(Config{})
	cat := newFakeCatalog(t, 2, testTool("a"), testTool("b"), testTool("c"), testTool("d"), testTool("e"))
	for _, era := range []struct {
		name string
		req  func() *HTTPRequest
		body func(cursor string) string
	}{
		{"legacy", legacyReq, func(cursor string) string {
			if cursor == "" {
				return `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
			}
			return `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"` + cursor + `"}}`
		}},
		{"stateless", func() *HTTPRequest { return modernReq("tools/list", "") }, func(cursor string) string {
			if cursor == "" {
				return modernBody("1", "tools/list", "")
			}
			return modernBody("1", "tools/list", `"cursor":"`+cursor+`"`)
		}},
	} {
		t.Run(era.name, func(t *testing.T) {
			var names []string
			cursor := ""
			for range 10 {
				out := s.Handle(era.req(), []byte(era.body(cursor)), cat)
				d := checkReply(t, out.Reply, 200, 0, "1")
				names = append(names, toolNames(t, d.result["tools"])...)
				raw, ok := d.result["nextCursor"]
				if !ok {
					break
				}
				cursor = str(t, raw)
			}
			if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(names, want) {
				t.Fatalf("pages gave %v, want %v", names, want)
			}
			out := s.Handle(era.req(), []byte(era.body("p9")), cat)
			checkReply(t, out.Reply, 200, CodeInvalidParams, "1")
		})
	}
}

func TestNilCatalog(t *testing.T) {
	s := NewServer(Config{})
	out := s.Handle(legacyReq(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), nil)
	d := checkReply(t, out.Reply, 200, 0, "1")
	if string(d.result["tools"]) != "[]" {
		t.Fatalf("tools = %s, want []", d.result["tools"])
	}
	out = s.Handle(legacyReq(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`), nil)
	checkReply(t, out.Reply, 200, CodeInvalidParams, "1")
}
