package eventstream

import (
	"encoding/json"
	"testing"

	"github.com/toolmesh/toolmesh/mcp"
)

// decodedResponse is what IsResponse must say: the full decode's answer.
func decodedResponse(data []byte, id json.RawMessage) bool {
	m, err := mcp.DecodeClientResponse(data)
	return err == nil && m.IsResponseTo(id)
}

// responseCases are messages a server may send and messages built to
// mislead a scan of the top-level members.
var responseCases = []struct {
	data string
	want bool
	// plain: answered without the decode.
	plain bool
}{
	{`{"jsonrpc":"2.0","id":"c","result":{"content":[{"type":"text","text":"hi"}]}}`, true, true},
	{` {"result":{"id":"x","method":"m"}, "id" : "c" ,"jsonrpc":"2.0"} `, true, true},
	{`{"jsonrpc":"2.0","id":"c","result":null}`, true, true},
	{`{"jsonrpc":"2.0","id":"c","result":{},"method":null}`, true, true},
	{`{"jsonrpc":"2.0","id":"c","result":{},"method":""}`, true, true},
	{`{"jsonrpc":"2.0","id":"c","result":1,"x":[1,{"a":"}"}],"y":"\"}"}`, true, true},
	{`{"jsonrpc":"2.0","id":"c","error":null}`, false, true},
	{`{"jsonrpc":"2.0","id":"c","result":{},"error":null}`, true, true},
	{`{"jsonrpc":"2.0","id":"d","result":{}}`, false, true},
	{`{"jsonrpc":"2.0","id":"c"}`, false, true},
	{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"c"}}`, false, true},
	{`{"jsonrpc":"2.0","id":"c","method":"sampling/createMessage","result":{}}`, false, true},
	{`{"jsonrpc":"1.0","id":"c","result":{}}`, false, true},
	{`{"id":"c","result":{}}`, false, true},
	{`{"jsonrpc":"2.0","id":"c","result":{}`, false, true},
	{`{"jsonrpc":"2.0","id":"c","result":{}} x`, false, true},
	{`null`, false, true},
	{`["c"]`, false, true},
	{`{}`, false, true},
	// Left to the decode: the members it would read, spelled otherwise,
	// twice, or an error object whose fields it checks.
	{`{"jsonrpc":"2.0","id":"c","error":{"code":-32603,"message":"x"}}`, true, false},
	{`{"jsonrpc":"2.0","id":"c","error":{"code":"x","message":"x"}}`, false, false},
	{`{"jsonrpc":"2.0","ID":"c","result":{}}`, true, false},
	{`{"jsonrpc":"2.0","id":"c","Result":{}}`, true, false},
	{`{"jsonrpc":"2.0","id":"c","re\u0073ult":{}}`, true, false},
	{`{"jsonrpc":"2.0","id":"c","reſult":{}}`, true, false},
	{`{"jsonrpc":"2\u002e0","id":"c","result":{}}`, true, false},
	{`{"jsonrpc":"2.0","id":"c","result":{},"method":"x","method":""}`, true, false},
	{`{"jsonrpc":"2.0","id":"c","result":{},"id":"d"}`, false, false},
	{`{"jsonrpc":2,"id":"c","result":{}}`, false, false},
	{`{"jsonrpc":"2.0","id":"c","result":{},"method":5}`, false, false},
}

func TestIsResponse(t *testing.T) {
	id := json.RawMessage(`"c"`)
	for _, c := range responseCases {
		if got := IsResponse([]byte(c.data), id); got != c.want || got != decodedResponse([]byte(c.data), id) {
			t.Errorf("IsResponse(%s) = %v, want %v (the decode: %v)", c.data, got, c.want, decodedResponse([]byte(c.data), id))
		}
		if _, sure := plainResponse([]byte(c.data), id); sure != c.plain {
			t.Errorf("plainResponse(%s): answered without the decode %v, want %v", c.data, sure, c.plain)
		}
	}
}

// FuzzIsResponse holds IsResponse to the full decode on any input.
func FuzzIsResponse(f *testing.F) {
	for _, c := range responseCases {
		f.Add(c.data, `"c"`)
	}
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{}}`, `7`)
	f.Add(`{"jsonrpc":"2.0","id":{"a": [1, 2]},"result":{}}`, `{"a": [1, 2]}`)
	f.Fuzz(func(t *testing.T, data, id string) {
		if got, want := IsResponse([]byte(data), json.RawMessage(id)), decodedResponse([]byte(data), json.RawMessage(id)); got != want {
			t.Fatalf("IsResponse(%q, %s) = %v, the decode says %v", data, id, got, want)
		}
	})
}

func TestData(t *testing.T) {
	for _, c := range []struct {
		ev   string
		want string
		ok   bool
	}{
		{"event: message\ndata: {\"a\":1}", `{"a":1}`, true},
		{"data:x\r\ndata:  y\r\ndata:\nid: 1\ndata: z", "x\n y\n\nz", true},
		{"event: message\n: comment", "", false},
		{"data", "", false},
	} {
		got, ok := Data([]byte(c.ev))
		if string(got) != c.want || ok != c.ok {
			t.Errorf("Data(%q) = %q, %v; want %q, %v", c.ev, got, ok, c.want, c.ok)
		}
		var viaEvent []byte
		called := false
		(&Translator{Fn: func(d []byte) []byte { viaEvent, called = append([]byte(nil), d...), true; return d }}).Event([]byte(c.ev))
		if called != ok || string(viaEvent) != string(got) {
			t.Errorf("Data(%q) = %q, %v; Translator.Event passes %q, %v", c.ev, got, ok, viaEvent, called)
		}
	}
}
