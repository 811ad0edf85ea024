package mcp

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidToolName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"getUser", true},
		{"DATA_EXPORT_v2", true},
		{"admin.tools.list", true},
		{"a-b", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"", false},
		{"has space", false},
		{"a,b", false},
		{"a/b", false},
		{"é", false},
		{"a\x00", false},
	}
	for _, tt := range tests {
		if got := ValidToolName(tt.name); got != tt.ok {
			t.Errorf("ValidToolName(%q) = %v, want %v", tt.name, got, tt.ok)
		}
	}
}

func TestEncodeTools(t *testing.T) {
	tools := []Tool{
		{Name: "b", Title: "B <tool>", Description: "d & e", InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"x":{}},"additionalProperties":false}`),
			OutputSchema: json.RawMessage(`{"type":"object"}`), Annotations: json.RawMessage(`{"readOnlyHint":true}`), Icons: json.RawMessage(`[{"src":"https://x/i.png"}]`)},
		{Name: "a"},
		{Name: "c", InputSchema: json.RawMessage("null")},
	}
	got, err := EncodeTools(tools)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"b","title":"B <tool>","description":"d & e","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"x":{}},"additionalProperties":false},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"icons":[{"src":"https://x/i.png"}]},` +
		`{"name":"a","inputSchema":{"type":"object"}},{"name":"c","inputSchema":{"type":"object"}}]`
	if string(got) != want {
		t.Fatalf("EncodeTools =\n%s\nwant\n%s", got, want)
	}
	if tools[1].InputSchema != nil {
		t.Fatal("EncodeTools changed its input")
	}

	if got, err := EncodeTools(nil); err != nil || string(got) != "[]" {
		t.Fatalf("EncodeTools(nil) = %s, %v", got, err)
	}
	if _, err := EncodeTools([]Tool{{Name: "x", InputSchema: json.RawMessage(`{`)}}); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("EncodeTools with a broken schema: err = %v", err)
	}
}
