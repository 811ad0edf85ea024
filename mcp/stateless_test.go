package mcp

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func wantServerInfo(name, version string) func(t *testing.T, d rpc) {
	return func(t *testing.T, d rpc) {
		t.Helper()
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(d.result["_meta"], &meta); err != nil {
			t.Fatalf("_meta: %v", err)
		}
		want := `{"name":"` + name + `","version":"` + version + `"}`
		if got := string(meta[MetaServerInfo]); got != want {
			t.Fatalf("_meta serverInfo = %s, want %s", got, want)
		}
	}
}

func wantComplete(t *testing.T, d rpc) {
	t.Helper()
	if got := string(d.result["resultType"]); got != `"complete"` {
		t.Fatalf("resultType = %s, want \"complete\"", got)
	}
}

func wantCache(ttl, scope string) func(t *testing.T, d rpc) {
	return func(t *testing.T, d rpc) {
		t.Helper()
		if got := string(d.result["ttlMs"]); got != ttl {
			t.Fatalf("ttlMs = %s, want %s", got, ttl)
		}
		if got := string(d.result["cacheScope"]); got != scope {
			t.Fatalf("cacheScope = %s, want %s", got, scope)
		}
	}
}

func wantDiscover(t *testing.T, d rpc) {
	t.Helper()
	var versions []string
	if err := json.Unmarshal(d.result["supportedVersions"], &versions); err != nil {
		t.Fatal(err)
	}
	if want := []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}; !slices.Equal(versions, want) {
		t.Fatalf("supportedVersions = %v, want %v", versions, want)
	}
	if got := string(d.result["capabilities"]); got != `{"tools":{}}` {
		t.Fatalf("capabilities = %s", got)
	}
}

func TestStatelessEra(t *testing.T) {
	s := NewServer(Config{ServerName: "gw", ServerVersion: "1.2.3", Instructions: "Use the tools.", ListTTL: 90 * time.Second})
	discover := modernBody(`"d-1"`, "server/discover", "")
	list := modernBody("3", "tools/list", "")
	call := func(params string) string { return modernBody("4", "tools/call", params) }
	statelessCall := func(tool, args string) *Call {
		return &Call{ID: json.RawMessage("4"), Era: EraStateless, Version: Version20260728, Tool: tool, Arguments: json.RawMessage(args)}
	}
	info := wantServerInfo("gw", "1.2.3")
	discoverResult := all(wantKeys("resultType", "supportedVersions", "capabilities", "instructions", "ttlMs", "cacheScope", "_meta"),
		wantComplete, wantDiscover, wantCache("90000", `"public"`), info)
	without := func(r *HTTPRequest, f func(*HTTPRequest)) *HTTPRequest { f(r); return r }
	method := func(m string) handleCase {
		return handleCase{name: m + " is 404", req: modernReq(m, ""), body: modernBody("5", m, ""), status: 404, code: CodeMethodNotFound, id: "5"}
	}

	runHandleCases(t, s, testCatalog(t), []handleCase{
		{name: "server/discover", req: modernReq("server/discover", ""), body: discover, status: 200, id: `"d-1"`, check: discoverResult},
		{name: "server/discover without _meta", req: modernReq("server/discover", ""), body: `{"jsonrpc":"2.0","id":"d-1","method":"server/discover"}`, status: 400, code: CodeInvalidParams, id: `"d-1"`},
		{name: "server/discover without clientInfo", req: modernReq("server/discover", ""), body: `{"jsonrpc":"2.0","id":"d-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, status: 200, id: `"d-1"`, check: discoverResult},
		{name: "_meta without clientCapabilities", req: modernReq("server/discover", ""), body: `{"jsonrpc":"2.0","id":104,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, status: 400, code: CodeInvalidParams, id: "104"},
		{name: "Mcp-Method with surrounding whitespace", req: modernReq(" tools/list\t", ""), body: list, status: 200, id: "3", check: wantComplete},
		{name: "Mcp-Method value is case-sensitive", req: modernReq("TOOLS/LIST", ""), body: list, status: 400, code: CodeHeaderMismatch, id: "3"},
		{name: "server/discover legacy header", req: withVersion(legacyReq(), "2025-11-25"), body: `{"jsonrpc":"2.0","id":"d-1","method":"server/discover"}`, status: 200, id: `"d-1"`, check: discoverResult},
		{name: "server/discover no header", req: legacyReq(), body: `{"jsonrpc":"2.0","id":"d-1","method":"server/discover","params":{}}`, status: 200, id: `"d-1"`, check: discoverResult},
		{name: "server/discover no header, 2026 _meta", req: legacyReq(), body: discover, status: 200, id: `"d-1"`, check: discoverResult},
		{name: "server/discover Mcp-Method mismatch", req: modernReq("tools/list", ""), body: discover, status: 400, code: CodeHeaderMismatch, id: `"d-1"`},

		{name: "tools/list", req: modernReq("tools/list", ""), body: list, status: 200, id: "3",
			check: all(wantKeys("resultType", "tools", "ttlMs", "cacheScope", "_meta"), wantComplete, wantNames("echo", "weather"), wantCache("90000", `"public"`), info)},
		{name: "tools/list bad cursor", req: modernReq("tools/list", ""), body: modernBody("3", "tools/list", `"cursor":"x"`), status: 200, code: CodeInvalidParams, id: "3"},
		{name: "tools/list cursor object", req: modernReq("tools/list", ""), body: modernBody("3", "tools/list", `"cursor":{}`), status: 200, code: CodeInvalidParams, id: "3"},

		{name: "tools/call", req: modernReq("tools/call", "echo"), body: call(`"name":"echo","arguments":{"q":"hi"}`), call: statelessCall("echo", `{"q":"hi"}`)},
		{name: "tools/call no arguments", req: modernReq("tools/call", "echo"), body: call(`"name":"echo"`), call: statelessCall("echo", `{}`)},
		{name: "tools/call base64 Mcp-Name", req: modernReq("tools/call", "=?base64?ZWNobw==?="), body: call(`"name":"echo"`), call: statelessCall("echo", `{}`)},
		{name: "tools/call base64 non-ASCII name", req: modernReq("tools/call", "=?base64?d8OpYXRoZXI=?="), body: call(`"name":"wéather"`), status: 200, code: CodeInvalidParams, id: "4", check: wantMessage("unknown tool: wéather")},
		{name: "tools/call header mismatch non-ASCII", req: modernReq("tools/call", "=?base64?d2VhdGhlcg==?="), body: call(`"name":"wéather"`), status: 400, code: CodeHeaderMismatch, id: "4"},
		{name: "tools/call Mcp-Name mismatch", req: modernReq("tools/call", "weather"), body: call(`"name":"echo"`), status: 400, code: CodeHeaderMismatch, id: "4", check: wantMessage("Mcp-Name")},
		{name: "tools/call Mcp-Name case differs", req: modernReq("tools/call", "Echo"), body: call(`"name":"echo"`), status: 400, code: CodeHeaderMismatch, id: "4"},
		{name: "tools/call Mcp-Name missing", req: modernReq("tools/call", ""), body: call(`"name":"echo"`), status: 400, code: CodeHeaderMismatch, id: "4"},
		{name: "tools/call Mcp-Name malformed", req: modernReq("tools/call", "=?base64?@@@?="), body: call(`"name":"echo"`), status: 400, code: CodeHeaderMismatch, id: "4"},
		{name: "tools/call Mcp-Name unencoded non-ASCII", req: modernReq("tools/call", "w\xc3\xa9ather"), body: call(`"name":"wéather"`), status: 400, code: CodeHeaderMismatch, id: "4"},
		{name: "tools/call name not a string", req: modernReq("tools/call", "echo"), body: call(`"name":["echo"]`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call arguments not an object", req: modernReq("tools/call", "echo"), body: call(`"name":"echo","arguments":1`), status: 200, code: CodeInvalidParams, id: "4"},
		{name: "tools/call unknown", req: modernReq("tools/call", "nope"), body: call(`"name":"nope"`), status: 200, code: CodeInvalidParams, id: "4", check: wantMessage("unknown tool: nope")},
		{name: "tools/call ambiguous", req: modernReq("tools/call", "dup"), body: call(`"name":"dup"`), status: 200, code: CodeInvalidParams, id: "4", check: wantMessage("ambiguous tool: dup")},

		{name: "Mcp-Method missing", req: without(modernReq("tools/list", ""), func(r *HTTPRequest) { r.HasMcpMethod = false }), body: list, status: 400, code: CodeHeaderMismatch, id: "3"},
		{name: "Mcp-Method mismatch", req: modernReq("tools/call", "echo"), body: list, status: 400, code: CodeHeaderMismatch, id: "3", check: wantMessage("Mcp-Method")},
		{name: "Mcp-Method case differs", req: modernReq("Tools/List", ""), body: list, status: 400, code: CodeHeaderMismatch, id: "3"},
		{name: "_meta version differs from header", req: modernReq("tools/list", ""), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, status: 400, code: CodeHeaderMismatch, id: "3"},
		{name: "_meta version not a string", req: modernReq("tools/list", ""), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}}`, status: 400, code: CodeHeaderMismatch, id: "3"},
		{name: "_meta version absent", req: modernReq("tools/list", ""), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`, status: 400, code: CodeInvalidParams, id: "3"},
		{name: "_meta not an object", req: modernReq("tools/list", ""), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":1}}`, status: 400, code: CodeInvalidParams, id: "3"},
		{name: "version header missing, _meta 2026", req: legacyReq(), body: list, status: 400, code: CodeHeaderMismatch, id: "3", check: wantMessage("MCP-Protocol-Version")},
		{name: "_meta version unsupported without header", req: legacyReq(), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}}`, status: 400, code: CodeUnsupportedProtocolVersion, id: "3"},
		{name: "_meta version number without header", req: legacyReq(), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":1}}}`, status: 400, code: CodeUnsupportedProtocolVersion, id: "3"},
		{name: "duplicate _meta version", req: modernReq("tools/list", ""), body: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, status: 200, code: CodeInvalidParams, id: "3"},
		{name: "unsupported header", req: withVersion(modernReq("tools/list", ""), "2099-01-01"), body: list, status: 400, code: CodeUnsupportedProtocolVersion, id: "3"},

		method("initialize"),
		method("ping"),
		method("resources/list"),
		method("resources/read"),
		method("prompts/list"),
		method("prompts/get"),
		method("logging/setLevel"),
		method("completion/complete"),
		method("subscriptions/listen"),
		method("tasks/get"),
		method("x"),
		{name: "notification", req: modernReq("notifications/cancelled", ""), body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, status: 202, code: -1},
	})
}

func TestUnsupportedVersionDataFromMeta(t *testing.T) {
	s := NewServer(Config{})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}}`
	out := s.Handle(legacyReq(), []byte(body), testCatalog(t))
	d := checkReply(t, out.Reply, 400, CodeUnsupportedProtocolVersion, "1")
	var data struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	if err := json.Unmarshal(d.err.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.Requested != "1900-01-01" || len(data.Supported) != 4 {
		t.Fatalf("data = %+v", data)
	}
}

func TestCacheScopeAndTTL(t *testing.T) {
	tests := []struct {
		cfg   Config
		ttl   string
		scope string
	}{
		{Config{}, "0", `"public"`},
		{Config{ListTTL: -time.Second}, "0", `"public"`},
		{Config{ListTTL: 1500 * time.Millisecond, CacheScope: "private"}, "1500", `"private"`},
		{Config{CacheScope: "shared"}, "0", `"public"`},
	}
	for _, tt := range tests {
		s := NewServer(tt.cfg)
		for _, m := range []string{"server/discover", "tools/list"} {
			out := s.Handle(modernReq(m, ""), []byte(modernBody("1", m, "")), testCatalog(t))
			d := checkReply(t, out.Reply, 200, 0, "1")
			wantCache(tt.ttl, tt.scope)(t, d)
			if _, ok := d.result["instructions"]; ok {
				t.Fatalf("instructions present though not configured")
			}
			wantServerInfo(DefaultServerName, DefaultServerVersion)(t, d)
		}
	}
}
