package argsjson

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// checkDecodeArgs fails when decodeArgs accepts b but the library would
// not, or decodes it differently.
func checkDecodeArgs(t *testing.T, b []byte) (fast bool) {
	t.Helper()
	got, ok := decodeArgs(b)
	if !ok {
		return false
	}
	want, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decodeArgs accepted %q, the library says %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeArgs(%q) = %#v, the library %#v", b, got, want)
	}
	return true
}

var argsDocs = []struct {
	doc  string
	fast bool // decoded without the library
}{
	{`{}`, true},
	{` { "a" : 1 , "b":[ ] ,"c":{}} `, true},
	{`{"n":-0.5e+10,"m":0,"k":12.25E-3,"big":123456789012345678901234567890}`, true},
	{`{"s":"plain","u":"héllo ☃ 😀","t":true,"f":false,"z":null}`, true},
	{`{"a":1,"a":2}`, true}, // the last one counts, as in encoding/json
	{`{"list":[1,"x",[null,{"d":[]}]]}`, true},
	{`[1,2]`, true},
	{`"str"`, true},
	{`{"esc":"line\nbreak \"q\" \u00e9 \ud83d\ude00 \ud800 \/"}`, true},
	{`{"bad utf8":"a` + "\xff" + `b"}`, true},
	{`{"k\u0041":1}`, true},
	// Left to the library, valid or not.
	{``, false},
	{`{`, false},
	{`{"a":1}x`, false},
	{`{"a":1} {}`, false},
	{`{"a":01}`, false},
	{`{"a":1.}`, false},
	{`{"a":-}`, false},
	{`{"a":tru}`, false},
	{`{"a":"x` + "\x01" + `"}`, false},
	{`{"a":"\x"}`, false},
	{`{"a":"\u12"}`, false},
	{`{"a":1,}`, false},
	{`[1,]`, false},
	{`{a:1}`, false},
	{"\ufeff{}", false},
	{strings.Repeat("[", maxArgsDepth+1) + strings.Repeat("]", maxArgsDepth+1), false},
}

func TestDecodeArgs(t *testing.T) {
	for _, tc := range argsDocs {
		if fast := checkDecodeArgs(t, []byte(tc.doc)); fast != tc.fast {
			t.Errorf("decodeArgs(%q) decoded: %v, want %v", tc.doc, fast, tc.fast)
		}
	}
	// Nesting up to the limit is decoded here.
	deep := strings.Repeat("[", maxArgsDepth) + strings.Repeat("]", maxArgsDepth)
	if !checkDecodeArgs(t, []byte(deep)) {
		t.Errorf("nesting %d: left to the library", maxArgsDepth)
	}
}

// TestDecodeArgsAllocations: decodeArgs costs fewer allocations than the
// library's decoder for a call's arguments.
func TestDecodeArgsAllocations(t *testing.T) {
	args := []byte(`{"city":"Paris","days":3,"units":"metric","tags":["a","b"]}`)
	fast := testing.AllocsPerRun(50, func() { _, _ = decodeArgs(args) })
	lib := testing.AllocsPerRun(50, func() { _, _ = jsonschema.UnmarshalJSON(bytes.NewReader(args)) })
	t.Logf("decodeArgs %v allocations, jsonschema.UnmarshalJSON %v", fast, lib)
	if fast >= lib {
		t.Errorf("decodeArgs %v allocations, jsonschema.UnmarshalJSON %v", fast, lib)
	}
}

func FuzzDecodeArgs(f *testing.F) {
	for _, tc := range argsDocs {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeArgs(t, b) })
}
