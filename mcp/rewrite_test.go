package mcp

import "testing"

func TestMemberEdits(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		fn             func([]byte) []byte
	}{
		{"set replaces in place", `{"a":1, "b" : [1,2] ,"c":3}`, `{"a":1, "b" : "x" ,"c":3}`,
			func(b []byte) []byte { return SetMember(b, "b", []byte(`"x"`)) }},
		{"set appends", `{"a":1}`, `{"a":1,"b":2}`, func(b []byte) []byte { return SetMember(b, "b", []byte(`2`)) }},
		{"set into empty", `{ }`, `{ "b":2}`, func(b []byte) []byte { return SetMember(b, "b", []byte(`2`)) }},
		{"delete first", `{"a":1, "b":2}`, `{"b":2}`, func(b []byte) []byte { return DeleteMember(b, "a") }},
		{"delete last", `{"a":1 , "b":{"c":[]}}`, `{"a":1 }`, func(b []byte) []byte { return DeleteMember(b, "b") }},
		{"delete only", `{"a":1}`, `{}`, func(b []byte) []byte { return DeleteMember(b, "a") }},
		{"delete absent", `{"a":1}`, `{"a":1}`, func(b []byte) []byte { return DeleteMember(b, "z") }},
		{"escaped key", `{"\u0061":1,"b":2}`, `{"\u0061":"y","b":2}`, func(b []byte) []byte { return SetMember(b, "a", []byte(`"y"`)) }},
		{"prepend", `{"a":1}`, `{"r":0,"a":1}`, func(b []byte) []byte { return prependMember(b, "r", []byte(`0`)) }},
	} {
		if got := string(tc.fn([]byte(tc.in))); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestUpstreamBody(t *testing.T) {
	info := Implementation{Name: "gw", Version: "1"}
	for _, tc := range []struct {
		name, in, want string
		u              UpstreamRequest
	}{
		{"rename only, same era", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p_x","arguments":{"n":1.50}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"n":1.50}}}`,
			UpstreamRequest{NamePath: []string{"name"}, Name: "x", ClientEra: EraLegacy, UpstreamEra: EraLegacy}},
		{"completion ref", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p_x"},"argument":{}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"x"},"argument":{}}}`,
			UpstreamRequest{NamePath: []string{"ref", "name"}, Name: "x", ClientEra: EraLegacy, UpstreamEra: EraLegacy}},
		{"2026 to legacy keeps other _meta", `{"id":1,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":3,"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			`{"id":1,"params":{"_meta":{"progressToken":3}}}`,
			UpstreamRequest{ClientEra: EraStateless, UpstreamEra: EraLegacy}},
		{"2026 to legacy drops an emptied _meta", `{"id":1,"params":{"uri":"u","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			`{"id":1,"params":{"uri":"u"}}`,
			UpstreamRequest{ClientEra: EraStateless, UpstreamEra: EraLegacy}},
		{"legacy to 2026 without params", `{"jsonrpc":"2.0","id":1,"method":"prompts/get"}`,
			`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"gw","version":"1"}}}}`,
			UpstreamRequest{ClientEra: EraLegacy, UpstreamEra: EraStateless, Client: info}},
		{"legacy to 2026 keeps progressToken", `{"id":1,"params":{"_meta":{"progressToken":"t"}}}`,
			`{"id":1,"params":{"_meta":{"progressToken":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"gw","version":"1"}}}}`,
			UpstreamRequest{ClientEra: EraLegacy, UpstreamEra: EraStateless, Client: info}},
		{"trace context replaces the client's, stale tracestate removed", `{"id":1,"params":{"name":"x","_meta":{"traceparent":"00-aa-bb-01","tracestate":"old=1","progressToken":2}}}`,
			`{"id":1,"params":{"name":"x","_meta":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01","progressToken":2}}}`,
			UpstreamRequest{ClientEra: EraLegacy, UpstreamEra: EraLegacy, TraceMeta: map[string]string{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"}}},
		{"trace context without params", `{"id":1,"method":"prompts/get"}`,
			`{"id":1,"method":"prompts/get","params":{"_meta":{"traceparent":"00-1-2-01","baggage":"k=v"}}}`,
			UpstreamRequest{ClientEra: EraLegacy, UpstreamEra: EraLegacy, TraceMeta: map[string]string{"traceparent": "00-1-2-01", "baggage": "k=v"}}},
	} {
		if got := string(UpstreamBody([]byte(tc.in), tc.u)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestClientMessage(t *testing.T) {
	s := NewServer(Config{})
	for _, tc := range []struct {
		name, in, want string
		client, up     Era
		method         string
	}{
		{"same era untouched", `{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":1,"result":{}}`, EraLegacy, EraLegacy, "tools/call"},
		{"resultType added for 2026", `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}`, EraStateless, EraLegacy, "tools/call"},
		{"notification untouched", `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, EraStateless, EraLegacy, "tools/call"},
		{"resultType dropped for legacy", `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","messages":[]}}`, `{"jsonrpc":"2.0","id":1,"result":{"messages":[]}}`, EraLegacy, EraStateless, "prompts/get"},
		{"input_required to legacy, not a tool", `{"jsonrpc":"2.0","id":"a","result":{"resultType":"input_required"}}`, `"code":-32603`, EraLegacy, EraStateless, "prompts/get"},
		{"error untouched", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"m"}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"m"}}`, EraLegacy, EraStateless, "tools/call"},
	} {
		got := string(s.ClientMessage([]byte(tc.in), tc.client, tc.up, tc.method))
		if tc.want[0] == '"' {
			if !containsStr(got, tc.want) || !containsStr(got, `"id":"a"`) {
				t.Errorf("%s: got %s, want it to contain %s", tc.name, got, tc.want)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
