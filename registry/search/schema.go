package search

import (
	"encoding/json"
	"sort"
)

// Limits on how much of one input schema is read, so a hostile or enormous
// schema costs a bounded amount at index time.
const (
	maxSchemaDepth = 6
	maxSchemaNodes = 256
)

// schemaText is what the index reads from an input schema: the declared
// property names, and the declared descriptions, titles and string enum
// values of the schema and its properties. Nothing is inferred.
type schemaText struct {
	names []string // property names, in a stable order
	texts []string // descriptions, titles and enum values
}

// readSchema extracts schemaText from a JSON Schema. A schema that is not
// valid JSON contributes nothing: the Tool Service declared no readable
// fields, so there is nothing to index.
func readSchema(raw json.RawMessage) schemaText {
	var st schemaText
	if len(raw) == 0 {
		return st
	}
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return st
	}
	nodes := 0
	st.walk(root, 0, &nodes)
	return st
}

func (st *schemaText) walk(node any, depth int, nodes *int) {
	obj, ok := node.(map[string]any)
	if !ok || depth > maxSchemaDepth || *nodes >= maxSchemaNodes {
		return
	}
	*nodes++
	for _, k := range []string{"title", "description"} {
		if s, ok := obj[k].(string); ok {
			st.texts = append(st.texts, s)
		}
	}
	if enum, ok := obj["enum"].([]any); ok {
		for _, v := range enum {
			if s, ok := v.(string); ok {
				st.texts = append(st.texts, s)
			}
		}
	}
	if props, ok := obj["properties"].(map[string]any); ok {
		for _, name := range sortedKeys(props) {
			st.names = append(st.names, name)
			st.walk(props[name], depth+1, nodes)
		}
	}
	// Sub-schemas that describe the same arguments.
	for _, k := range []string{"items", "additionalProperties"} {
		st.walk(obj[k], depth+1, nodes)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "prefixItems"} {
		if list, ok := obj[k].([]any); ok {
			for _, sub := range list {
				st.walk(sub, depth+1, nodes)
			}
		}
	}
	for _, k := range []string{"$defs", "definitions"} {
		if defs, ok := obj[k].(map[string]any); ok {
			for _, name := range sortedKeys(defs) {
				st.walk(defs[name], depth+1, nodes)
			}
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
