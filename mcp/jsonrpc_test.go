package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var jsonSeeds = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, `[1,2,3]`, `"x"`, `1`, `-0.5e+10`, `true`, `false`, `null`,
	`{"a":{"b":[1,{"c":null}]}}`, ` { "a" : [ ] , "b" : { } } `, `{"a":"\u00e9\n\"\\\/\b\f\r\t"}`,
	`{`, `}`, `[`, `]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`,
	`01`, `-`, `1.`, `.1`, `1e`, `1e+`, `+1`, `0x1`, `tru`, `nul`, `truex`, `"\x"`, `"\u12"`, `"\u12G4"`,
	"\"a\tb\"", "\"\x01\"", `"abc`, `{"a":1}}`, `[1]]`, `1 2`, `{"a":[}`, `{"a":{]}`, "\"\xff\"",
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
}

func TestValidateMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		got := validate([]byte(s), 0) == nil
		if want := json.Valid([]byte(s)); got != want {
			t.Errorf("validate(%q) = %v, json.Valid = %v", s, got, want)
		}
		got = validJSON([]byte(s), 0) == nil
		if want := json.Valid([]byte(s)) && utf8.ValidString(s); got != want {
			t.Errorf("validJSON(%q) = %v, json.Valid and utf8.Valid = %v", s, got, want)
		}
	}
}

func TestValidateDepth(t *testing.T) {
	tests := []struct {
		in    string
		depth int
		want  error
	}{
		{`1`, 1, nil},
		{`{}`, 1, nil},
		{`{"a":{}}`, 1, errDepth},
		{`{"a":{}}`, 2, nil},
		{`[[[]]]`, 2, errDepth},
		{`[[[]]]`, 3, nil},
		{`[[],[],[]]`, 2, nil},
		{`{"a":[1],"b":{"c":[]}}`, 3, nil},
		{`{"a":[1],"b":{"c":[{}]}}`, 3, errDepth},
		{strings.Repeat("[", 100000) + strings.Repeat("]", 100000), 0, nil},
		{strings.Repeat("[", 100000), 64, errDepth},
	}
	for _, tt := range tests {
		if got := validate([]byte(tt.in), tt.depth); got != tt.want {
			t.Errorf("validate(%.20q…, %d) = %v, want %v", tt.in, tt.depth, got, tt.want)
		}
		if got := validJSON([]byte(tt.in), tt.depth); got != tt.want {
			t.Errorf("validJSON(%.20q…, %d) = %v, want %v", tt.in, tt.depth, got, tt.want)
		}
	}
}

func TestMembers(t *testing.T) {
	obj := []byte(`{ "a" : 1 , "b\u0022":{"x":[1,"]}"]} ,"c":"s\"}","d":[{"e":{}}],"f":-1.5e3,"g":true,"h":null}`)
	var keys, vals []string
	members(obj, func(k, v []byte) bool {
		keys = append(keys, keyName(k))
		vals = append(vals, string(v))
		return true
	})
	wantKeys := []string{"a", `b"`, "c", "d", "f", "g", "h"}
	wantVals := []string{"1", `{"x":[1,"]}"]}`, `"s\"}"`, `[{"e":{}}]`, "-1.5e3", "true", "null"}
	if strings.Join(keys, "|") != strings.Join(wantKeys, "|") || strings.Join(vals, "|") != strings.Join(wantVals, "|") {
		t.Fatalf("members = %q %q, want %q %q", keys, vals, wantKeys, wantVals)
	}
	n := 0
	members([]byte(`{"a":1,"b":2}`), func(k, v []byte) bool { n++; return false })
	if n != 1 {
		t.Fatalf("members did not stop: %d calls", n)
	}
	members([]byte(`{}`), func(k, v []byte) bool { t.Fatal("member in {}"); return true })
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{"q\"b\\", `"q\"b\\"`},
		{"\n\r\t\x00\x1f", `"\n\r\t\u0000\u001f"`},
		{"<&>", `"<&>"`},
		{"é世", `"é世"`},
		{"a\xffb", `"a\ufffdb"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
	}
	for _, tt := range tests {
		if got := string(appendString(nil, tt.in)); got != tt.want {
			t.Errorf("appendString(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if got := string(appendString(nil, []byte(tt.in))); got != tt.want {
			t.Errorf("appendString([]byte %q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzParse checks the scanner against encoding/json: the same verdict on
// every input, and for objects the same members.
func FuzzParse(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := validate(data, 0)
		if (err == nil) != json.Valid(data) {
			t.Fatalf("validate(%q) = %v, json.Valid disagrees", data, err)
		}
		if err != nil {
			if validJSON(data, 0) == nil {
				t.Fatalf("validJSON(%q) accepts what validate refuses", data)
			}
			return
		}
		if vj := validJSON(data, 0); (vj == nil) != utf8.Valid(data) {
			t.Fatalf("validJSON(%q) = %v with utf8.Valid %v", data, vj, utf8.Valid(data))
		}
		if d := validate(data, 3); d != nil && d != errDepth {
			t.Fatalf("validate with a depth limit = %v on valid JSON", d)
		}
		v := trimSpace(data)
		if end := endOfValue(v, 0); end != len(v) {
			t.Fatalf("endOfValue(%q) = %d, want %d", v, end, len(v))
		}
		if !isObject(v) || !utf8.Valid(v) { // Handle rejects invalid UTF-8 first
			return
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		got := map[string]json.RawMessage{}
		members(v, func(k, val []byte) bool {
			if !json.Valid(val) {
				t.Fatalf("member value %q is not JSON", val)
			}
			got[keyName(k)] = json.RawMessage(val)
			return true
		})
		if len(got) != len(want) {
			t.Fatalf("members gave %d keys, encoding/json %d", len(got), len(want))
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || string(g) != string(w) {
				t.Fatalf("member %q = %s, encoding/json %s", k, g, w)
			}
		}
	})
}

// FuzzAppendString checks that every string encodes to JSON that decodes
// back to it (invalid UTF-8 repaired as encoding/json does).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\x1f\x7f", "é", "\xff", "\u2028", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		if err := validJSON(b, 0); err != nil {
			t.Fatalf("appendString(%q) = %s: %v", s, b, err)
		}
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); utf8.ValidString(s) && got != want {
			t.Fatalf("round trip of %q = %q", s, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("decoded %q is not UTF-8", got)
		}
	})
}

// TestNewClientRequestOmitsNullParams: params that encode as null (a nil
// map, as a first page without cursor once was) are left out, never sent
// as null, which JSON-RPC 2.0 does not allow.
func TestNewClientRequestOmitsNullParams(t *testing.T) {
	for _, tc := range []struct {
		params any
		want   string
	}{
		{nil, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`},
		{map[string]any(nil), `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`},
		{map[string]any{"cursor": "c"}, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"c"}}`},
	} {
		b, err := json.Marshal(NewClientRequest(3, "tools/list", tc.params))
		if err != nil || string(b) != tc.want {
			t.Errorf("params %#v: %s %v, want %s", tc.params, b, err, tc.want)
		}
	}
}

// TestUpstreamBodyDropsNullParams: a client's params null (taken as
// absent) does not reach the server as null.
func TestUpstreamBodyDropsNullParams(t *testing.T) {
	got := UpstreamBody([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}`), UpstreamRequest{ClientEra: EraLegacy, UpstreamEra: EraLegacy})
	if want := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
