package security

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/filters/wasm/guest"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/argsjson"
)

// FuzzArgumentReaders is the differential test of every part of the
// gateway that reads a call's arguments: whatever the gateway accepts
// (mcp.ArgumentsProblem finds nothing), input-schema validation
// (argsjson.Value), policies (authz.Args, CEL's view), the
// approval canonicalisation (approval.Canonical) and a WASM filter reading
// through the guest SDK (guest.Field, guest.String) all read as
// encoding/json does. A repeated member or a lone surrogate escape made
// them disagree (issue 26); the gateway refuses those.
func FuzzArgumentReaders(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"path":"/tmp/ok"}`,
		`{"path":"/tmp/ok","path":"/etc/passwd"}`,
		`{"p\u0061th":"x","path":"y"}`,
		`{"id":"\ud800"}`,
		`{"id":"\ud83d\ude00","n":-1.5e3,"b":[true,false,null,{"x":{"y":"\"\\\/\b\f\n\r\t"}}]}`,
		`{"a":{"b":1,"b":2}}`,
		`{"k":"\u00e9\u2028"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !utf8.Valid(raw) || !json.Valid(raw) || bytes.Count(raw, []byte{'['})+bytes.Count(raw, []byte{'{'}) > 64 {
			return // the envelope check refuses these before any reader
		}
		if mcp.ArgumentsProblem(raw) != "" {
			return // refused: -32602
		}
		want := decode(t, raw)
		if _, ok := want.(map[string]any); !ok {
			return // arguments must be an object; Handle refuses the rest
		}

		got, err := argsjson.Value(raw)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("schema validation reads %s as %#v (%v), encoding/json as %#v", raw, got, err, want)
		}

		c, err := approval.Canonical(raw)
		if err != nil {
			t.Fatalf("approval refuses accepted arguments %s: %v", raw, err)
		}
		if got := decode(t, c); !reflect.DeepEqual(got, want) {
			t.Fatalf("approval canonicalises %s as %s", raw, c)
		}

		cv, err := authz.Args(raw)
		if err != nil {
			t.Fatalf("policies refuse accepted arguments %s: %v", raw, err)
		}
		if eq := cv.Equal(types.DefaultTypeAdapter.NativeToValue(doubles(want))); eq != types.True {
			t.Fatalf("policies read %s as %v, want %v", raw, cv, want)
		}

		guestReads(t, raw, want)
	})
}

// decode is the reference reading: encoding/json keeping numbers as text.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// doubles maps numbers to float64, as CEL's JSON mapping does.
func doubles(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, _ := v.Float64()
		return f
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = doubles(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = doubles(e)
		}
		return out
	}
	return v
}

// guestReads checks that the guest SDK finds every member of every object
// with the reference's value, and decodes every string as it does.
func guestReads(t *testing.T, raw []byte, want any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		for k, e := range w {
			v, ok := guest.Field(raw, k)
			if !ok {
				t.Fatalf("guest SDK finds no member %q in %s", k, raw)
			}
			guestReads(t, v, e)
		}
	case string:
		if s, ok := guest.String(raw); !ok || s != w {
			t.Fatalf("guest SDK reads string %s as %q (%v), want %q", raw, s, ok, w)
		}
	default:
		if got := decode(t, raw); !reflect.DeepEqual(got, want) {
			t.Fatalf("guest SDK value %s reads as %#v, want %#v", raw, got, want)
		}
	}
}

// TestArgumentReadersDisagreeOnRefusedInput shows what the refusal
// prevents: on a repeated member the guest SDK and encoding/json read
// different values, and lone surrogates collapse in the approval's
// canonical form.
func TestArgumentReadersDisagreeOnRefusedInput(t *testing.T) {
	dup := []byte(`{"path":"/tmp/ok","path":"/etc/passwd"}`)
	if mcp.ArgumentsProblem(dup) == "" {
		t.Fatal("a repeated member is accepted")
	}
	first, _ := guest.Field(dup, "path")
	if s, _ := guest.String(first); s != "/tmp/ok" {
		t.Fatalf("guest SDK reads %q; the test's premise changed", s)
	}
	if v := decode(t, dup).(map[string]any)["path"]; v != "/etc/passwd" {
		t.Fatalf("encoding/json reads %q; the test's premise changed", v)
	}

	a, b := []byte(`{"id":"\ud800"}`), []byte(`{"id":"\udbff"}`)
	for _, x := range [][]byte{a, b} {
		if mcp.ArgumentsProblem(x) == "" {
			t.Fatalf("%s is accepted", x)
		}
	}
	ha, _ := approval.ArgsHash(a)
	hb, _ := approval.ArgsHash(b)
	if ha != hb {
		t.Fatal("lone surrogates no longer collapse in the canonical form; the refusal is still right, update this test")
	}
}
