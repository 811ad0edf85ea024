// Package surface is the operator's control of what a route exposes: the
// pinned definition of each tool (what a model reads, hashed when first
// accepted, so that a later change can be held back until an operator
// accepts it) and virtual tools (per-route overrides that rename a tool,
// replace its text, and hide, fix, default or narrow its arguments).
//
// The package is pure apart from its stores: it knows tools as mcp.Tool
// values and arguments as JSON, so registry (which builds snapshots) and
// extproc (which rewrites calls) can both use it without importing each
// other.
package surface

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/toolmesh/toolmesh/mcp"
)

// Definition is the part of a tool that a model reads and that a pin
// covers: name, title, description, input and output schemas, annotations.
// Icons are left out: they change no behaviour a model follows.
type Definition struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// DefinitionOf returns the pinned part of t, under name (the tool's name on
// its server: a pin covers the upstream's definition, never an override or
// a route's prefix).
func DefinitionOf(name string, t mcp.Tool) Definition {
	return Definition{
		Name: name, Title: t.Title, Description: t.Description,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations,
	}
}

// Canonical returns d as canonical JSON: every object's members sorted by
// key, no insignificant white space, strings escaped as encoding/json does
// without HTML escaping, and numbers as written. Two definitions that differ
// only in member order or spacing have the same canonical form.
func (d Definition) Canonical() ([]byte, error) {
	var v any
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode tool %q: %w", d.Name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their text: 1 and 1.0 are different definitions
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("tool %q: %w", d.Name, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return nil, fmt.Errorf("tool %q: %w", d.Name, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// Hash is "sha256:" and the hex SHA-256 of the canonical form.
func (d Definition) Hash() (string, error) {
	c, err := d.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
