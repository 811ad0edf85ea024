package mcp

import (
	"strings"
	"testing"
)

func TestNotFound(t *testing.T) {
	s := NewServer(Config{MaxDepth: 4, MaxBodyBytes: 256})
	ping := func(id string) string { return `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}` }
	tests := []struct {
		name, body, id string
	}{
		{"number id", ping("7"), "7"},
		{"string id kept byte for byte", ping(`"a\"b\u00e9"`), `"a\"b\u00e9"`},
		{"float id kept as written", ping("1.50"), "1.50"},
		{"exponent id", ping("-2e3"), "-2e3"},
		{"surrounding whitespace", " \n" + ping("3") + "\t", "3"},
		{"members in another order", `{"method":"tools/call","params":{"name":"x"},"id":"q","jsonrpc":"2.0"}`, `"q"`},
		{"no body", "", "null"},
		{"parse error", `{"jsonrpc":"2.0","id":1,`, "null"},
		{"batch", "[" + ping("1") + "]", "null"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "null"},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{}}`, "null"},
		{"null id", ping("null"), "null"},
		{"object id", ping(`{"a":1}`), "null"},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, "null"},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, "null"},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, "null"},
		{"too deep", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[[[[1]]]]}}`, "null"},
		{"too large", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 256) + `"}}`, "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.NotFound("/mcp/nope", []byte(tt.body))
			d := checkReply(t, r, 404, CodeInvalidRequest, tt.id)
			if d.err.Message != "no MCP route at /mcp/nope" {
				t.Errorf("message = %q", d.err.Message)
			}
			if !strings.Contains(string(r.Body), `"id":`+tt.id+`,`) {
				t.Errorf("body %s does not carry the id %s as written", r.Body, tt.id)
			}
		})
	}

	t.Run("path is clipped and escaped", func(t *testing.T) {
		long := "/mcp/" + strings.Repeat("é", 200) + "\"\x01"
		d := checkReply(t, s.NotFound(long, nil), 404, CodeInvalidRequest, "null")
		if !strings.HasPrefix(d.err.Message, "no MCP route at /mcp/éé") || !strings.HasSuffix(d.err.Message, "…") ||
			len(d.err.Message) > len("no MCP route at ")+maxEcho+len("…") {
			t.Errorf("message = %q, want the path clipped to %d bytes", d.err.Message, maxEcho)
		}
	})

	t.Run("the id outlives the body", func(t *testing.T) {
		body := []byte(ping("12345"))
		r := s.NotFound("/x", body)
		copy(body, strings.Repeat("9", len(body)))
		checkReply(t, r, 404, CodeInvalidRequest, "12345")
	})
}
