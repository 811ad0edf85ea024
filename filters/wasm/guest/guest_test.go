package guest

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeEnvelope(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Request
		headers map[string]string
		wantErr string
	}{
		{
			name: "request, payload last",
			in:   `{"v":1,"stage":"request","filter":"f","route":"core","era":"stateless","version":"2026-07-28","method":"tools/call","tool":"t","toolVersion":"1.0","headers":{"x-a":"1","x-b":"two"},"arguments":{"a":{"b":[1,"}"]}}}`,
			want: Request{Stage: StageRequest, Filter: "f", Route: "core", Era: "stateless", Version: "2026-07-28",
				Method: "tools/call", Tool: "t", ToolVersion: "1.0", Arguments: []byte(`{"a":{"b":[1,"}"]}}`)},
			headers: map[string]string{"x-a": "1", "x-b": "two"},
		},
		{
			name: "result stage with spaces",
			in:   " {\n\"v\" : 1 , \"stage\":\"result\", \"result\" : {\"content\":[]} \n} ",
			want: Request{Stage: StageResult, Result: []byte(`{"content":[]}`)},
		},
		{
			name: "payload not last is scanned",
			in:   `{"v":1,"arguments":{"x":"y"},"tool":"t"}`,
			want: Request{Tool: "t", Arguments: []byte(`{"x":"y"}`)},
		},
		{
			name: "escapes in keys and values",
			in:   `{"v":1,"to\u006fl":"a\"b\\c\u00e9\ud83d\ude00","route":"\/x"}`,
			want: Request{Tool: "a\"b\\cé😀", Route: "/x"},
		},
		{
			name: "unknown members are ignored",
			in:   `{"v":1,"future":{"x":[true,null,1.5e3]},"tool":"t","more":false}`,
			want: Request{Tool: "t"},
		},
		{name: "wrong version", in: `{"v":2,"tool":"t"}`, wantErr: "unsupported envelope version 2"},
		{name: "no version", in: `{"tool":"t"}`, wantErr: "unsupported envelope version -1"},
		{name: "not an object", in: `[1]`, wantErr: "malformed"},
		{name: "truncated", in: `{"v":1,"tool":"t`, wantErr: "malformed"},
		{name: "missing colon", in: `{"v" 1}`, wantErr: "malformed"},
		{name: "empty", in: ``, wantErr: "malformed"},
		{name: "empty object", in: `{}`, wantErr: "unsupported envelope version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeEnvelope([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if hs := got.Headers(); len(hs) != len(tt.headers) {
				t.Fatalf("headers = %v, want %v", hs, tt.headers)
			}
			for k, v := range tt.headers {
				if h, ok := got.Header(k); !ok || h != v {
					t.Fatalf("Header(%q) = %q, %v; want %q", k, h, ok, v)
				}
			}
			got.headers = nil
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(tt.want)
			if string(g) != string(w) {
				t.Fatalf("request = %s\nwant      %s", g, w)
			}
		})
	}
}

func TestDecodeEnvelopeOwnsItsCopy(t *testing.T) {
	in := []byte(`{"v":1,"tool":"keep","arguments":{"a":"b"}}`)
	r, err := decodeEnvelope(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'x' // the host reuses its buffer for the next call
	}
	if r.Tool != "keep" || string(r.Arguments) != `{"a":"b"}` {
		t.Fatalf("request changed with the input buffer: %q %s", r.Tool, r.Arguments)
	}
}

func TestAppendingToArgumentsIsSafe(t *testing.T) {
	r, err := decodeEnvelope([]byte(`{"v":1,"arguments":{"a":1},"tool":"tool"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = append(r.Arguments, `,"b":"XXXXXXXX"`...)
	if r.Tool != "tool" {
		t.Fatalf("appending to Arguments changed Tool to %q", r.Tool)
	}
}

func TestArguments(t *testing.T) {
	r := Request{Arguments: []byte(`{"s":"x\ty","n":3,"o":{"s":"inner"},"e":""}`)}
	tests := []struct {
		name    string
		want    string
		wantRaw string
		isStr   bool
	}{
		{"s", "x\ty", `"x\ty"`, true},
		{"n", "", `3`, false},
		{"o", "", `{"s":"inner"}`, false},
		{"e", "", `""`, true},
		{"missing", "", ``, false},
	}
	for _, tt := range tests {
		raw, _ := r.Argument(tt.name)
		if string(raw) != tt.wantRaw {
			t.Errorf("Argument(%q) = %s, want %s", tt.name, raw, tt.wantRaw)
		}
		s, ok := r.StringArgument(tt.name)
		if ok != tt.isStr || s != tt.want {
			t.Errorf("StringArgument(%q) = %q, %v; want %q, %v", tt.name, s, ok, tt.want, tt.isStr)
		}
	}
}

func TestProcess(t *testing.T) {
	defer Handle(nil)
	tests := []struct {
		name    string
		handler func(Request) Decision
		want    string
	}{
		{"pass", func(Request) Decision { return Pass() }, `{"action":"pass"}`},
		{"zero decision passes", func(Request) Decision { return Decision{} }, `{"action":"pass"}`},
		{"deny", func(r Request) Decision { return Deny("no " + r.Tool) }, `{"action":"deny","reason":"no t"}`},
		{"deny rpc", func(Request) Decision { return DenyRPC(-32001, "x") }, `{"action":"deny","reason":"x","as":"rpc_error","code":-32001}`},
		{"rewrite", func(r Request) Decision {
			return Rewrite().WithArguments([]byte(`{"a":2}`)).WithHeader("x-a", "\"q\"").WithHeader("x-b", "2")
		}, `{"action":"rewrite","arguments":{"a":2},"headers":{"x-a":"\"q\"","x-b":"2"}}`},
		{"result", func(Request) Decision { return Pass().WithResult([]byte(`{"content":[]}`)) }, `{"action":"rewrite","result":{"content":[]}}`},
		{"panic is recovered", func(Request) Decision { panic("boom") }, `{"action":"error","reason":"panic: boom"}`},
		{"no handler", nil, `{"action":"error","reason":"no filter registered: call guest.Handle from init"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			Handle(tt.handler)
			got := Process([]byte(`{"v":1,"tool":"t","arguments":{"a":1}}`))
			if string(got) != tt.want {
				t.Fatalf("Process = %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("bad envelope", func(t *testing.T) {
		Handle(func(Request) Decision { return Pass() })
		if got := string(Process([]byte(`{"v":7}`))); !strings.HasPrefix(got, `{"action":"error","reason":"unsupported envelope version 7`) {
			t.Fatalf("Process = %s", got)
		}
	})
}

func TestWithHeaderDoesNotAlias(t *testing.T) {
	base := Rewrite().WithHeader("a", "1")
	x := base.WithHeader("b", "2")
	y := base.WithHeader("c", "3")
	if len(x.Headers) != 2 || x.Headers[1].Name != "b" || y.Headers[1].Name != "c" {
		t.Fatalf("decisions share header storage: %v %v", x.Headers, y.Headers)
	}
}

func TestSetup(t *testing.T) {
	defer Configure(nil)
	var got string
	Configure(func(c []byte) error { got = string(c); return nil })
	if out := string(Setup([]byte(`{"k":1}`))); out != `{"action":"pass"}` || got != `{"k":1}` {
		t.Fatalf("Setup = %s, configure saw %s", out, got)
	}
	Configure(func([]byte) error { return errTest })
	if out := string(Setup(nil)); out != `{"action":"error","reason":"bad config"}` {
		t.Fatalf("Setup = %s", out)
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("bad config")

func TestStringAndQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "\n\r\t\x01\x1f", "é😀", "\u2028"} {
		q := Quote(s)
		var viaJSON string
		if err := json.Unmarshal(q, &viaJSON); err != nil || viaJSON != s {
			t.Fatalf("Quote(%q) = %s, decodes to %q, %v", s, q, viaJSON, err)
		}
		back, ok := String(q)
		if !ok || back != s {
			t.Fatalf("String(Quote(%q)) = %q, %v", s, back, ok)
		}
	}
	for _, bad := range []string{``, `"`, `x`, `"\x"`, `"\u12"`, `"a"b"`, `"\`} {
		if _, ok := String([]byte(bad)); ok {
			t.Errorf("String(%s) accepted", bad)
		}
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte(`{"v":1,"stage":"request","tool":"t","headers":{"a":"b"},"arguments":{"x":1}}`))
	f.Add([]byte(`{"v":1,"result":{"content":[{"type":"text","text":"}"}]}}`))
	f.Add([]byte(`{"v":1,"tool":"\ud800"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeEnvelope(b)
		if err != nil {
			return
		}
		_ = r.Headers()
		_, _ = r.StringArgument("x")
	})
}

func FuzzString(f *testing.F) {
	f.Add([]byte(`"a\u00e9\n"`))
	f.Add([]byte(`"\ud83d\ude00"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := String(b)
		if !ok {
			return
		}
		// encoding/json replaces invalid UTF-8; String passes it through.
		var want string
		if utf8.Valid(b) && json.Unmarshal(b, &want) == nil && want != s {
			t.Fatalf("String(%s) = %q, encoding/json says %q", b, s, want)
		}
	})
}
