package mcp

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestArgumentsProblem(t *testing.T) {
	many := make([]string, 40)
	for i := range many {
		many[i] = `"k` + strings.Repeat("x", i) + `":1`
	}
	tests := []struct {
		name, args, want string
	}{
		{"empty", `{}`, ""},
		{"plain", ` {"path":"/tmp/ok","n":[1,{"a":"b"}]} `, ""},
		{"top duplicate", `{"path":"/tmp/ok","path":"/etc/passwd"}`, `duplicate member "path"`},
		{"escaped duplicate", `{"path":1,"p\u0061th":2}`, `duplicate member "path"`},
		{"nested duplicate", `{"a":{"b":[{"c":1,"c":1}]}}`, `duplicate member "c"`},
		{"same name in siblings", `{"a":{"c":1},"b":{"c":1}}`, ""},
		{"large object", "{" + strings.Join(many, ",") + "}", ""},
		{"large object duplicate", "{" + strings.Join(many, ",") + `,"kxxx":2}`, `duplicate member "kxxx"`},
		{"lone high", `{"id":"\ud800"}`, "lone UTF-16 surrogate"},
		{"lone high at end", `{"id":"x\udbff"}`, "lone UTF-16 surrogate"},
		{"high then letter", `{"id":"\ud800\u0041"}`, "lone UTF-16 surrogate"},
		{"lone low", `{"id":"\udc00"}`, "lone UTF-16 surrogate"},
		{"lone in array", `{"a":["ok","\uDFFF"]}`, "lone UTF-16 surrogate"},
		{"lone in name", `{"\ud800":1}`, "member name holds a lone"},
		{"pair", `{"id":"\ud83d\ude00"}`, ""},
		{"escaped backslash then u", `{"id":"\\ud800"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if validJSON([]byte(tt.args), 64) != nil {
				t.Fatalf("test input is not valid JSON: %s", tt.args)
			}
			got := ArgumentsProblem([]byte(tt.args))
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Fatalf("ArgumentsProblem(%s) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

// FuzzArgumentsProblem holds the checker to encoding/json: an accepted
// document decodes without a replacement of a surrogate escape, and
// re-encoding what encoding/json read keeps every member (none was
// dropped as a repeat).
func FuzzArgumentsProblem(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `[{"x":[1,{"y":"\\u"}]}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if validJSON(b, 64) != nil {
			return
		}
		if ArgumentsProblem(b) != "" {
			return
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber() // 1E700 is valid JSON, not a float64
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("valid JSON that encoding/json refuses: %v", err)
		}
		if n, m := countMembers(b), countDecoded(v); n != m {
			t.Fatalf("accepted %s: %d members written, %d decoded (a repeat)", s, n, m)
		}
		if strings.ContainsRune(s, '\uFFFD') {
			return // a replacement character the client wrote itself
		}
		out, _ := json.Marshal(v)
		if strings.Contains(string(out), `\ufffd`) || strings.ContainsRune(string(out), '\uFFFD') {
			t.Fatalf("accepted %s, which encoding/json reads with a replacement character", s)
		}
	})
}

func countMembers(b []byte) int {
	b = trimSpace(b)
	n := 0
	switch {
	case isObject(b):
		members(b, func(_, val []byte) bool { n += 1 + countMembers(val); return true })
	case isArray(b):
		i := skipSpace(b, 1)
		for i < len(b) && b[i] != ']' {
			e := endOfValue(b, i)
			n += countMembers(b[i:e])
			i = skipSpace(b, e)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
	}
	return n
}

func countDecoded(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			n += 1 + countDecoded(e)
		}
	case []any:
		for _, e := range v {
			n += countDecoded(e)
		}
	}
	return n
}
