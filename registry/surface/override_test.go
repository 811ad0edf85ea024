package surface

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/mcp"
)

const recordsSchema = `{
  "type": "object",
  "properties": {
    "id":     {"type": "string"},
    "tenant": {"type": "string"},
    "force":  {"type": "boolean"},
    "limit":  {"type": "integer", "minimum": 1, "maximum": 1000},
    "region": {"type": "string", "enum": ["eu", "us", "ap"]},
    "note":   {"type": "string", "maxLength": 200},
    "kind":   {"$ref": "#/$defs/kind"}
  },
  "required": ["id", "tenant", "force"],
  "$defs": {"kind": {"type": "string", "enum": ["soft", "hard"]}}
}`

func recordsTool() mcp.Tool {
	return mcp.Tool{
		Name: "records_delete", Title: "Delete records", Description: "Deletes records.",
		InputSchema: json.RawMessage(recordsSchema),
		Annotations: json.RawMessage(`{"destructiveHint":true,"openWorldHint":false}`),
	}
}

func ptr[T any](v T) *T { return &v }

func schemaOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	m, err := decodeObject(raw)
	if err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return m
}

func TestApply(t *testing.T) {
	v, err := Apply(recordsTool(), Override{
		Name:        "delete_record",
		Description: ptr("Deletes one record of the caller's tenant."),
		Annotations: map[string]json.RawMessage{"openWorldHint": json.RawMessage(`true`), "title": json.RawMessage(`"x"`)},
		Arguments: map[string]Argument{
			"force":  {Hide: true},
			"tenant": {Fix: json.RawMessage(`"acme"`)},
			"limit":  {Default: json.RawMessage(`10`), Maximum: ptr(100.0)},
			"region": {Enum: []json.RawMessage{json.RawMessage(`"eu"`)}},
			"note":   {MaxLength: ptr(50)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v.Tool.Name != "delete_record" || v.Upstream != "records_delete" {
		t.Errorf("name %q upstream %q", v.Tool.Name, v.Upstream)
	}
	if v.Tool.Title != "Delete records" || !strings.HasPrefix(v.Tool.Description, "Deletes one record") {
		t.Errorf("title %q description %q", v.Tool.Title, v.Tool.Description)
	}
	if got := string(v.Tool.Annotations); got != `{"destructiveHint":true,"openWorldHint":true,"title":"x"}` {
		t.Errorf("annotations %s", got)
	}
	s := schemaOf(t, v.Tool.InputSchema)
	props := s["properties"].(map[string]any)
	for _, gone := range []string{"force", "tenant"} {
		if _, ok := props[gone]; ok {
			t.Errorf("%s still in the schema", gone)
		}
	}
	limit := props["limit"].(map[string]any)
	if limit["maximum"] != json.Number("100") || limit["default"] != json.Number("10") || limit["minimum"] != json.Number("1") {
		t.Errorf("limit %v", limit)
	}
	if e := props["region"].(map[string]any)["enum"].([]any); len(e) != 1 || e[0] != "eu" {
		t.Errorf("region enum %v", e)
	}
	if props["note"].(map[string]any)["maxLength"] != json.Number("50") {
		t.Errorf("note %v", props["note"])
	}
	if req := s["required"].([]any); len(req) != 1 || req[0] != "id" {
		t.Errorf("required %v", req)
	}
	if _, err := compile(v.Tool.InputSchema); err != nil {
		t.Errorf("rewritten schema does not compile: %v", err)
	}
	if got := v.Args.Hidden(); strings.Join(got, ",") != "force,tenant" {
		t.Errorf("hidden %v", got)
	}
}

func TestApplyRefusesWhatDoesNotFit(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Override
		want string
	}{
		{"missing argument", Override{Arguments: map[string]Argument{"nope": {Hide: true}}}, "arguments.nope: the tool has no such argument"},
		{"fix refused by schema", Override{Arguments: map[string]Argument{"force": {Fix: json.RawMessage(`"yes"`)}}}, "arguments.force: fix:"},
		{"default outside the narrowed enum", Override{Arguments: map[string]Argument{"region": {Enum: []json.RawMessage{json.RawMessage(`"eu"`)}, Default: json.RawMessage(`"us"`)}}}, "arguments.region: default:"},
		{"enum value not the tool's", Override{Arguments: map[string]Argument{"region": {Enum: []json.RawMessage{json.RawMessage(`"mars"`)}}}}, "arguments.region: enum[0]"},
		{"enum through $ref", Override{Arguments: map[string]Argument{"kind": {Fix: json.RawMessage(`"medium"`)}}}, "arguments.kind: fix:"},
		{"widen maximum", Override{Arguments: map[string]Argument{"limit": {Maximum: ptr(5000.0)}}}, "would widen"},
		{"widen minimum", Override{Arguments: map[string]Argument{"limit": {Minimum: ptr(0.0)}}}, "would widen"},
		{"maximum on a string", Override{Arguments: map[string]Argument{"id": {Maximum: ptr(3.0)}}}, "need an argument of \"type\" number"},
		{"maxLength widened", Override{Arguments: map[string]Argument{"note": {MaxLength: ptr(500)}}}, "would widen"},
		{"hide and fix", Override{Arguments: map[string]Argument{"force": {Hide: true, Fix: json.RawMessage(`true`)}}}, "hide takes no other setting"},
		{"fix and default", Override{Arguments: map[string]Argument{"limit": {Fix: json.RawMessage(`1`), Default: json.RawMessage(`2`)}}}, "fix takes no other setting"},
		{"bad name", Override{Name: "has space"}, "not a valid MCP tool name"},
		{"empty enum", Override{Arguments: map[string]Argument{"region": {Enum: []json.RawMessage{}}}}, "at least one value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Apply(recordsTool(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// $ref'd enums accept their own values.
	if _, err := Apply(recordsTool(), Override{Arguments: map[string]Argument{"kind": {Fix: json.RawMessage(`"soft"`)}}}); err != nil {
		t.Errorf("fix through $ref: %v", err)
	}
}

func TestRewrite(t *testing.T) {
	v, err := Apply(recordsTool(), Override{Arguments: map[string]Argument{
		"force":  {Hide: true},
		"tenant": {Fix: json.RawMessage(`"acme"`)},
		"limit":  {Default: json.RawMessage(` 10 `)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in, want, errName string
	}{
		{in: `{"id":"r1"}`, want: `{"id":"r1","tenant":"acme","limit":10}`},
		{in: ` { "id" : "r1", "limit": 3 } `, want: `{"id":"r1","limit":3,"tenant":"acme"}`},
		{in: ``, want: `{"tenant":"acme","limit":10}`},
		{in: `null`, want: `{"tenant":"acme","limit":10}`},
		{in: `{"id":"r1","tenant":"evil"}`, errName: "tenant"},
		{in: `{"force":true}`, errName: "force"},
		{in: `{"id":"a","id":"b"}`, errName: "id"},
		{in: `[1]`, errName: ""},
		{in: `{"id":}`, errName: "id"},
		{in: `{"id":"a"} {}`, errName: ""},
	} {
		got, err := v.Args.Rewrite(json.RawMessage(tc.in))
		if tc.want != "" {
			if err != nil || string(got) != tc.want {
				t.Errorf("Rewrite(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
			}
			continue
		}
		var ae *ArgumentError
		if !errors.As(err, &ae) || ae.Name != tc.errName {
			t.Errorf("Rewrite(%s) = %s, %v; want an ArgumentError naming %q", tc.in, got, err, tc.errName)
		}
	}
	var none *Arguments
	if got, err := none.Rewrite(json.RawMessage(`{"a":1}`)); err != nil || string(got) != `{"a":1}` {
		t.Errorf("nil Arguments: %s, %v", got, err)
	}
}

// FuzzRewrite: whatever a client sends, the rewritten arguments are one
// JSON object holding the fixed value, and no hidden argument of the
// client's.
func FuzzRewrite(f *testing.F) {
	v, err := Apply(recordsTool(), Override{Arguments: map[string]Argument{
		"force":  {Hide: true},
		"tenant": {Fix: json.RawMessage(`"acme"`)},
		"limit":  {Default: json.RawMessage(`10`)},
	}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"id":"x"}`, `{}`, `{"force":1}`, `{"a":{"force":true}}`, `{"\u0074enant":"x"}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := v.Args.Rewrite(in)
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("Rewrite(%q) = %q: not an object: %v", in, out, err)
		}
		if string(m["tenant"]) != `"acme"` {
			t.Fatalf("Rewrite(%q) = %q: tenant not fixed", in, out)
		}
		if _, ok := m["force"]; ok {
			t.Fatalf("Rewrite(%q) = %q: hidden argument passed", in, out)
		}
	})
}
