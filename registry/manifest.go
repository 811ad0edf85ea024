package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// InvalidEntry is a manifest entry that could not even be decoded as a tool
// (not an object, or a field of the wrong type). It is kept so the snapshot
// can report it instead of failing the whole manifest (docs/contracts/toolservice.md).
type InvalidEntry struct {
	Index  int    `json:"index"`
	Name   string `json:"name,omitempty"` // best effort
	Reason string `json:"reason"`
}

// DecodeManifest decodes a Tool Service manifest: a JSON object whose "tools"
// member is an array. Fields it does not know are ignored, so Tool Services
// can add their own. An entry that cannot be decoded as a tool is recorded in
// Manifest.Invalid (and later reported as rejected) rather than failing the
// manifest; a manifest that is not such an object is an error.
func DecodeManifest(data []byte) (*Manifest, error) {
	var top struct {
		Tools *[]json.RawMessage `json:"tools"`
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("decode manifest: not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode manifest: trailing data after the manifest")
	}
	if top.Tools == nil {
		return nil, errors.New(`decode manifest: missing "tools" array`)
	}
	m := &Manifest{Tools: make([]ManifestTool, 0, len(*top.Tools))}
	for i, raw := range *top.Tools {
		var t ManifestTool
		if err := json.Unmarshal(raw, &t); err != nil {
			m.Invalid = append(m.Invalid, InvalidToolEntry(i, raw, err))
			continue
		}
		m.Tools = append(m.Tools, t)
	}
	return m, nil
}

// InvalidToolEntry reports the tool entry at index that did not decode
// (err), in a native manifest or an MCP server's listing.
func InvalidToolEntry(index int, raw json.RawMessage, err error) InvalidEntry {
	return InvalidEntry{Index: index, Name: entryName(raw), Reason: "not a valid tool entry: " + decodeReason(err)}
}

// entryName digs the name out of an entry that failed to decode, for the report.
func entryName(raw json.RawMessage) string {
	var probe struct {
		Name any `json:"name"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return ""
	}
	if s, ok := probe.Name.(string); ok {
		return s
	}
	return ""
}

// decodeReason phrases a json decoding error without Go type names.
func decodeReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "must be an object, got " + te.Value
		}
		return fmt.Sprintf("field %q: unexpected %s", te.Field, te.Value)
	}
	return err.Error()
}
