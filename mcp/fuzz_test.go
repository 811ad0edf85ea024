package mcp

import (
	"encoding/json"
	"testing"
)

// FuzzHandle sends arbitrary bodies through Handle with legacy and
// stateless headers: it must never panic, and every reply must be empty
// (202, 405) or one valid JSON-RPC response object that echoes a valid id.
func FuzzHandle(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"p1"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"q":"x"}}}`,
		modernBody("4", "tools/call", `"name":"echo","arguments":{}`),
		modernBody(`"d"`, "server/discover", ""),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"dup","_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`,
		`{"a":` + "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]" + `}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
		`{`, ``, `null`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	s := NewServer(Config{MaxBodyBytes: 1 << 16})
	cat := newFakeCatalog(f, 1, testTool("echo"), testTool("weather"))
	cat.res["dup"] = ToolAmbiguous
	f.Fuzz(func(t *testing.T, body []byte, modern bool) {
		r := legacyReq()
		if modern {
			r = modernReq("tools/call", "echo")
		}
		out := s.Handle(r, body, cat)
		if (out.Reply == nil) == (out.Call == nil) {
			t.Fatalf("Outcome %+v: want exactly one of Reply and Call", out)
		}
		if c := out.Call; c != nil {
			if !json.Valid(c.ID) || !isObject(c.Arguments) || !json.Valid(c.Arguments) {
				t.Fatalf("call %+v", c)
			}
			if modern && c.Tool != "echo" {
				t.Fatalf("stateless call to %q despite Mcp-Name echo", c.Tool)
			}
			return
		}
		rep := out.Reply
		if len(rep.Body) == 0 {
			if rep.Status != 202 {
				t.Fatalf("empty body with status %d", rep.Status)
			}
			return
		}
		if !json.Valid(rep.Body) {
			t.Fatalf("reply is not JSON: %q", rep.Body)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(rep.Body, &top); err != nil {
			t.Fatalf("reply is not an object: %s", rep.Body)
		}
		id := top["id"]
		if string(top["jsonrpc"]) != `"2.0"` || id == nil || !(isNull(id) || isString(id) || isNumber(id)) {
			t.Fatalf("bad envelope: %s", rep.Body)
		}
	})
}
