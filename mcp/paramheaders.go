package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// ParamHeader is one `x-mcp-header` annotation of a tool's inputSchema
// (SEP-2243): a stateless-era client mirrors the argument at Path into the
// header Mcp-Param-{Name}, and the gateway checks that the two agree, so an
// intermediary that routes or rate-limits on the header sees what the Tool
// Service will execute.
type ParamHeader struct {
	Name string   // the x-mcp-header value; the header is Mcp-Param-{Name}
	Path []string // property names from the schema root to the parameter
	Type string   // "string", "integer" or "boolean"
}

// ParamHeadersOf reads the x-mcp-header annotations of an inputSchema and
// checks the constraints of SEP-2243: a non-empty HTTP token, unique without
// regard to case, only on string, integer or boolean properties, and only on
// properties reachable from the root through `properties` alone. A schema that
// breaks them makes the tool definition invalid.
func ParamHeadersOf(inputSchema []byte) ([]ParamHeader, error) {
	if !bytes.Contains(inputSchema, []byte(`x-mcp-header`)) {
		return nil, nil // the common case costs one scan
	}
	var root any
	if err := json.Unmarshal(inputSchema, &root); err != nil {
		return nil, fmt.Errorf("inputSchema: %w", err)
	}
	var out []ParamHeader
	seen := map[string]bool{}
	var walk func(node any, path []string, reachable bool) error
	walk = func(node any, path []string, reachable bool) error {
		obj, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		if v, ok := obj["x-mcp-header"]; ok {
			where := "/" + strings.Join(path, "/")
			name, isString := v.(string)
			switch {
			case !reachable || len(path) == 0:
				return fmt.Errorf("x-mcp-header at %s: only properties reachable through \"properties\" may carry it", where)
			case !isString || !isToken(name):
				return fmt.Errorf("x-mcp-header at %s: %v is not an HTTP token", where, v)
			case seen[strings.ToLower(name)]:
				return fmt.Errorf("x-mcp-header %q at %s: names must be unique regardless of case", name, where)
			}
			typ, _ := obj["type"].(string)
			if typ != "string" && typ != "integer" && typ != "boolean" {
				return fmt.Errorf("x-mcp-header %q at %s: the property type must be string, integer or boolean, not %v", name, where, obj["type"])
			}
			seen[strings.ToLower(name)] = true
			out = append(out, ParamHeader{Name: name, Path: append([]string(nil), path...), Type: typ})
		}
		for key, val := range obj {
			switch key {
			case "properties":
				props, _ := val.(map[string]any)
				for _, p := range sortedKeys(props) {
					if err := walk(props[p], append(path, p), reachable); err != nil {
						return err
					}
				}
			case "items", "additionalProperties", "not", "if", "then", "else", "contains",
				"propertyNames", "unevaluatedItems", "unevaluatedProperties":
				if err := walk(val, path, false); err != nil {
					return err
				}
			case "prefixItems", "allOf", "anyOf", "oneOf":
				list, _ := val.([]any)
				for _, v := range list {
					if err := walk(v, path, false); err != nil {
						return err
					}
				}
			case "$defs", "definitions", "patternProperties", "dependentSchemas":
				m, _ := val.(map[string]any)
				for _, k := range sortedKeys(m) {
					if err := walk(m[k], path, false); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(root, nil, true); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// checkParamHeaders compares the Mcp-Param-* headers of a stateless-era
// tools/call with the arguments they mirror. It returns a reason when they
// disagree, a required header is missing or a header is malformed.
func checkParamHeaders(specs []ParamHeader, have []Header, args []byte) string {
	headers := make(map[string]string, len(have))
	for _, h := range have {
		headers[strings.ToLower(h.Key)] = h.Value
	}
	var argv map[string]any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&argv); err != nil {
		return "arguments are not an object"
	}
	for _, spec := range specs {
		key := strings.ToLower(spec.Name)
		raw, present := headers[key]
		delete(headers, key)
		val, found := lookupPath(argv, spec.Path)
		if !found || val == nil {
			if present {
				return "Mcp-Param-" + spec.Name + " is set but arguments." + strings.Join(spec.Path, ".") + " is absent"
			}
			continue
		}
		if !present {
			return "missing required Mcp-Param-" + spec.Name + " header for arguments." + strings.Join(spec.Path, ".")
		}
		hv, ok := DecodeHeaderValue(raw)
		if !ok {
			return "malformed Mcp-Param-" + spec.Name + " header"
		}
		if !sameValue(val, hv) {
			return "Mcp-Param-" + spec.Name + " header value " + clip(hv) + " does not match the body value"
		}
	}
	return ""
}

func lookupPath(v map[string]any, path []string) (any, bool) {
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// sameValue compares a body value with its header form: strings as they are,
// numbers numerically (42 and 42.0 agree), booleans as "true"/"false".
func sameValue(body any, header string) bool {
	switch b := body.(type) {
	case string:
		return b == header
	case bool:
		return (b && header == "true") || (!b && header == "false")
	case json.Number:
		x, ok1 := new(big.Float).SetString(b.String())
		y, ok2 := new(big.Float).SetString(header)
		return ok1 && ok2 && x.Cmp(y) == 0
	}
	return false
}

// ParamHeaderValues are the Mcp-Param-* headers (Key without the prefix)
// that mirror args for a tool's x-mcp-header parameters, as a stateless-era
// client sends them: what the gateway sends a 2026-07-28 server for a
// client that did not (a legacy one), or whose arguments a filter changed.
func ParamHeaderValues(specs []ParamHeader, args []byte) []Header {
	if len(specs) == 0 {
		return nil
	}
	var argv map[string]any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if dec.Decode(&argv) != nil {
		return nil
	}
	var out []Header
	for _, spec := range specs {
		val, found := lookupPath(argv, spec.Path)
		var v string
		switch b := val.(type) {
		case string:
			v = EncodeHeaderValue(b)
		case bool:
			v = fmt.Sprint(b)
		case json.Number:
			v = b.String()
		default:
			found = false
		}
		if found {
			out = append(out, Header{Key: spec.Name, Value: v})
		}
	}
	return out
}
