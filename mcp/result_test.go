package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

type textItem struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func contentOf(t *testing.T, d rpc) []textItem {
	t.Helper()
	var items []textItem
	if err := json.Unmarshal(d.result["content"], &items); err != nil {
		t.Fatalf("content: %v: %s", err, d.result["content"])
	}
	return items
}

func TestCallResult(t *testing.T) {
	s := NewServer(Config{ServerName: "gw", ServerVersion: "9"})
	legacy := &Call{ID: json.RawMessage(`"c1"`), Era: EraLegacy, Version: Version20251125, Tool: "echo"}
	modern := &Call{ID: json.RawMessage(`7.0`), Era: EraStateless, Version: Version20260728, Tool: "echo"}
	longBody := strings.Repeat("é", 2000)

	type want struct {
		keys       []string // exact result members
		isError    bool
		texts      []string // exact text items (nil: not checked)
		contains   string   // a substring of the first text item
		structured string   // exact structuredContent ("" absent)
		raw        string   // exact result bytes ("" not checked)
	}
	tests := []struct {
		name string
		call *Call
		up   Upstream
		want want
	}{
		{"legacy CallToolResult verbatim", legacy,
			Upstream{Status: 200, ContentType: "application/json", Body: []byte(` {"content":[{"type":"image","data":"AA==","mimeType":"image/png"}], "isError":false,"x":1} `)},
			want{keys: []string{"content", "isError", "x"}, raw: `{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}], "isError":false,"x":1}`}},
		{"legacy CallToolResult keeps its own resultType", legacy,
			Upstream{Status: 200, Body: []byte(`{"content":[],"resultType":"complete"}`)},
			want{raw: `{"content":[],"resultType":"complete"}`}},
		{"stateless CallToolResult gains resultType and _meta", modern,
			Upstream{Status: 200, ContentType: "application/json", Body: []byte(`{"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1}}`)},
			want{raw: `{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"gw","version":"9"}},"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1}}`}},
		{"stateless CallToolResult with resultType and _meta verbatim", modern,
			Upstream{Status: 200, Body: []byte(`{"_meta":{"k":1},"resultType":"complete","content":[]}`)},
			want{raw: `{"_meta":{"k":1},"resultType":"complete","content":[]}`}},
		{"stateless CallToolResult isError passes through", modern,
			Upstream{Status: 200, Body: []byte(`{"content":[{"type":"text","text":"bad"}],"isError":true,"resultType":"complete","_meta":{}}`)},
			want{raw: `{"content":[{"type":"text","text":"bad"}],"isError":true,"resultType":"complete","_meta":{}}`}},
		{"content that is not an array is structured", legacy,
			Upstream{Status: 200, ContentType: "application/json", Body: []byte(`{"content":"x"}`)},
			want{keys: []string{"content", "structuredContent"}, texts: []string{`{"content":"x"}`}, structured: `{"content":"x"}`}},
		{"legacy JSON object is structured", legacy,
			Upstream{Status: 201, ContentType: "application/json; charset=utf-8", Body: []byte(`{"temp":21.5}`)},
			want{keys: []string{"content", "structuredContent"}, texts: []string{`{"temp":21.5}`}, structured: `{"temp":21.5}`}},
		{"legacy JSON array is text only", legacy,
			Upstream{Status: 200, ContentType: "application/json", Body: []byte(`[1,2]`)},
			want{keys: []string{"content"}, texts: []string{`[1,2]`}}},
		{"legacy JSON number is text only", legacy,
			Upstream{Status: 200, ContentType: "application/json", Body: []byte(`42`)},
			want{keys: []string{"content"}, texts: []string{`42`}}},
		{"stateless JSON array is structured", modern,
			Upstream{Status: 200, ContentType: "application/json", Body: []byte(`[{"id":"1"}]`)},
			want{keys: []string{"resultType", "content", "structuredContent", "_meta"}, texts: []string{`[{"id":"1"}]`}, structured: `[{"id":"1"}]`}},
		{"stateless JSON string is structured", modern,
			Upstream{Status: 200, ContentType: "application/problem+json", Body: []byte(`"ok"`)},
			want{keys: []string{"resultType", "content", "structuredContent", "_meta"}, texts: []string{`"ok"`}, structured: `"ok"`}},
		{"stateless JSON null is structured", modern,
			Upstream{Status: 200, Body: []byte(`null`)},
			want{keys: []string{"resultType", "content", "structuredContent", "_meta"}, texts: []string{`null`}, structured: `null`}},
		{"text", legacy,
			Upstream{Status: 200, ContentType: "text/plain", Body: []byte("sunny, 21°C\n")},
			want{keys: []string{"content"}, texts: []string{"sunny, 21°C\n"}}},
		{"text that looks like JSON stays text", legacy,
			Upstream{Status: 200, ContentType: "text/plain", Body: []byte(`{"a":1}`)},
			want{keys: []string{"content"}, texts: []string{`{"a":1}`}}},
		{"invalid JSON declared as JSON is text", modern,
			Upstream{Status: 200, ContentType: "application/json", Body: []byte(`{"a":`)},
			want{keys: []string{"resultType", "content", "_meta"}, texts: []string{`{"a":`}}},
		{"empty body", legacy,
			Upstream{Status: 204},
			want{keys: []string{"content"}, texts: []string{""}}},
		{"invalid UTF-8 text is repaired", legacy,
			Upstream{Status: 200, ContentType: "text/plain", Body: []byte("a\xffb")},
			want{keys: []string{"content"}, texts: []string{"a\ufffdb"}}},
		{"401", legacy, Upstream{Status: 401, Body: []byte("token expired")},
			want{keys: []string{"content", "isError"}, isError: true, contains: "permission denied"}},
		{"403", modern, Upstream{Status: 403},
			want{keys: []string{"resultType", "content", "isError", "_meta"}, isError: true, contains: "permission denied: the Tool Service answered HTTP 403"}},
		{"404", legacy, Upstream{Status: 404, Body: []byte("no such path")},
			want{isError: true, contains: "HTTP 404 Not Found: no such path"}},
		{"500 with JSON body", legacy, Upstream{Status: 500, ContentType: "application/json", Body: []byte(`{"content":[{"type":"text","text":"x"}]}`)},
			want{keys: []string{"content", "isError"}, isError: true, contains: "HTTP 500"}},
		{"502 long body is bounded", modern, Upstream{Status: 502, Body: []byte(longBody)},
			want{isError: true, contains: "HTTP 502"}},
		{"3xx is a failure", legacy, Upstream{Status: 302},
			want{isError: true, contains: "HTTP 302"}},
		{"no status", legacy, Upstream{},
			want{isError: true, contains: "no status"}},
		{"timeout", legacy, Upstream{Status: 504, Failure: FailureTimeout},
			want{keys: []string{"content", "isError"}, isError: true, contains: "tool echo failed: timeout"}},
		{"unavailable", modern, Upstream{Status: 503, Failure: FailureUnavailable},
			want{keys: []string{"resultType", "content", "isError", "_meta"}, isError: true, contains: "tool echo failed: unavailable"}},
		{"reset", legacy, Upstream{Failure: FailureReset},
			want{isError: true, contains: "unavailable: the Tool Service closed the connection"}},
		{"too large", legacy, Upstream{Status: 200, Body: []byte(`{"content":[]}`), Failure: FailureTooLarge},
			want{isError: true, contains: "response too large"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := s.CallResult(tt.call, tt.up)
			d := decodeRPC(t, body)
			if d.err != nil {
				t.Fatalf("CallResult gave a JSON-RPC error: %s", body)
			}
			if got := string(d.top["id"]); got != string(tt.call.ID) {
				t.Fatalf("id = %s, want %s", got, tt.call.ID)
			}
			if tt.want.raw != "" {
				if got := string(d.top["result"]); got != tt.want.raw {
					t.Fatalf("result =\n%s\nwant\n%s", got, tt.want.raw)
				}
				return
			}
			if tt.want.keys != nil {
				wantKeys(tt.want.keys...)(t, d)
			}
			if tt.call.Era == EraStateless {
				wantComplete(t, d)
				wantServerInfo("gw", "9")(t, d)
			}
			if got := string(d.result["isError"]) == "true"; got != tt.want.isError {
				t.Fatalf("isError = %s, want %v", d.result["isError"], tt.want.isError)
			}
			items := contentOf(t, d)
			for _, it := range items {
				if it.Type != "text" {
					t.Fatalf("content item type %q", it.Type)
				}
			}
			if tt.want.texts != nil {
				var got []string
				for _, it := range items {
					got = append(got, it.Text)
				}
				if strings.Join(got, "\x00") != strings.Join(tt.want.texts, "\x00") || len(got) != len(tt.want.texts) {
					t.Fatalf("texts = %q, want %q", got, tt.want.texts)
				}
			}
			if tt.want.contains != "" && (len(items) != 1 || !strings.Contains(items[0].Text, tt.want.contains)) {
				t.Fatalf("texts = %+v, want one containing %q", items, tt.want.contains)
			}
			// One wording for every failure: "tool NAME failed: KIND...".
			if want := "tool " + tt.call.Tool + " failed: "; tt.want.isError && !strings.HasPrefix(items[0].Text, want) {
				t.Fatalf("error text %q does not start with %q", items[0].Text, want)
			}
			if tt.want.isError && len(items[0].Text) > 700 {
				t.Fatalf("error text is %d bytes, want a bounded excerpt", len(items[0].Text))
			}
			if got := string(d.result["structuredContent"]); got != tt.want.structured {
				t.Fatalf("structuredContent = %s, want %s", got, tt.want.structured)
			}
		})
	}
}

func TestToolError(t *testing.T) {
	s := NewServer(Config{})
	for _, c := range []*Call{
		{ID: json.RawMessage(`1`), Era: EraLegacy},
		{ID: json.RawMessage(`"x"`), Era: EraStateless},
	} {
		body := s.ToolError(c, `/q: expected string, got number`, "second <message>")
		d := decodeRPC(t, body)
		if string(d.top["id"]) != string(c.ID) || string(d.result["isError"]) != "true" {
			t.Fatalf("ToolError = %s", body)
		}
		items := contentOf(t, d)
		if len(items) != 2 || items[0].Text != `/q: expected string, got number` || items[1].Text != "second <message>" {
			t.Fatalf("content = %+v", items)
		}
		_, hasType := d.result["resultType"]
		_, hasMeta := d.result["_meta"]
		if stateless := c.Era == EraStateless; hasType != stateless || hasMeta != stateless {
			t.Fatalf("era %v: resultType %v _meta %v: %s", c.Era, hasType, hasMeta, body)
		}
	}
	d := decodeRPC(t, s.ToolError(nil))
	if string(d.top["id"]) != "null" || len(contentOf(t, d)) != 1 {
		t.Fatalf("ToolError(nil) = %+v", d.top)
	}
}

func TestErrorReply(t *testing.T) {
	tests := []struct {
		name string
		id   json.RawMessage
		data any
		want string
	}{
		{"null id", nil, nil, `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no \"route\""}}`},
		{"id verbatim", json.RawMessage(`1.0`), nil, `{"jsonrpc":"2.0","id":1.0,"error":{"code":-32601,"message":"no \"route\""}}`},
		{"data value", json.RawMessage(`"a"`), map[string]string{"route": "x"}, `{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"no \"route\"","data":{"route":"x"}}}`},
		{"raw data", nil, json.RawMessage(`[1]`), `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no \"route\"","data":[1]}}`},
		{"unmarshalable data dropped", nil, func() {}, `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no \"route\""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ErrorReply(404, tt.id, CodeMethodNotFound, `no "route"`, tt.data)
			if r.Status != 404 || string(r.Body) != tt.want {
				t.Fatalf("ErrorReply = %d %s, want 404 %s", r.Status, r.Body, tt.want)
			}
			if ct, _ := header(r, "content-type"); ct != "application/json" {
				t.Fatalf("content-type = %q", ct)
			}
			if !json.Valid(r.Body) {
				t.Fatal("invalid JSON")
			}
		})
	}
}

func TestExcerpt(t *testing.T) {
	if got := excerpt([]byte("  a \n\t b  ")); got != "a b" {
		t.Fatalf("excerpt = %q", got)
	}
	long := excerpt(bytes.Repeat([]byte("é"), 1000))
	if len(long) > maxExcerpt+len("…") || !strings.HasSuffix(long, "…") || !json.Valid(appendString(nil, long)) {
		t.Fatalf("excerpt of a long body = %d bytes %q", len(long), long[len(long)-8:])
	}
	if strings.ContainsRune(strings.TrimSuffix(long, "…"), '\ufffd') {
		t.Fatal("excerpt split a rune")
	}
}

func TestResultOfAndWithResult(t *testing.T) {
	s := NewServer(Config{})
	for _, c := range []*Call{
		{ID: []byte(`"x"`), Era: EraLegacy},
		{ID: []byte(`7`), Era: EraStateless},
	} {
		body := s.CallResult(c, Upstream{Status: 200, ContentType: "text/plain", Body: []byte("hi")})
		res := ResultOf(c, body)
		if res == nil || !json.Valid(res) || !bytes.Contains(res, []byte(`"text":"hi"`)) {
			t.Fatalf("ResultOf(%s) = %s", body, res)
		}
		if got := s.WithResult(c, res); !bytes.Equal(got, body) {
			t.Errorf("WithResult(ResultOf(b)) = %s, want %s", got, body)
		}
		other := &Call{ID: []byte(`8`), Era: c.Era}
		if ResultOf(other, body) != nil {
			t.Errorf("ResultOf with another id must not match")
		}
	}
}
