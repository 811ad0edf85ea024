package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MaxToolNameLen is the longest tool name MCP recommends.
const MaxToolNameLen = 128

// ValidToolName reports whether name follows MCP's tool-name rule: 1–128
// characters of A–Z, a–z, 0–9, '_', '-' and '.'.
func ValidToolName(name string) bool {
	if len(name) == 0 || len(name) > MaxToolNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// emptyInputSchema stands in for a missing inputSchema, which MCP requires
// to be an object schema, never null.
var emptyInputSchema = json.RawMessage(`{"type":"object"}`)

// EncodeTools serializes tools, in the given order, as the JSON array of a
// tools/list result. Raw schema fields are kept as declared (whitespace
// aside); '<', '>' and '&' are not escaped. A tool without an inputSchema
// gets {"type":"object"}. Callers serialize once per snapshot and hand the
// bytes to Catalog.ToolsPage.
func EncodeTools(tools []Tool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('[')
	for i, t := range tools {
		if i > 0 {
			buf.WriteByte(',')
		}
		if s := bytes.TrimSpace(t.InputSchema); len(s) == 0 || string(s) == "null" {
			t.InputSchema = emptyInputSchema
		}
		if err := enc.Encode(&t); err != nil {
			return nil, fmt.Errorf("encode tool %q: %w", t.Name, err)
		}
		buf.Truncate(buf.Len() - 1) // Encode ends each value with a newline
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}
