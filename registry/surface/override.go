package surface

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolmesh/toolmesh/mcp"
)

// Override is an operator's per-route change to one tool: the route
// serves a virtual tool in its place, and calls are mapped back to the real
// tool and arguments on the way up. The zero Override changes nothing.
type Override struct {
	// Name renames the tool; its old name is then unknown on the route.
	Name string `json:"name,omitempty"`
	// Title and Description replace the tool's own when set.
	Title       *string `json:"title,omitempty"`
	Description *string `json:"description,omitempty"`
	// Annotations are merged over the tool's own, member by member.
	Annotations map[string]json.RawMessage `json:"annotations,omitempty"`
	// Arguments changes the tool's arguments, by name.
	Arguments map[string]Argument `json:"arguments,omitempty"`
}

// Argument is what an override does to one argument. Hide and Fix remove it
// from the schema the client sees; Default, Enum, Minimum, Maximum and
// MaxLength change its schema in place and may be combined.
type Argument struct {
	// Hide removes the argument: a client that sends it is refused, and the
	// upstream never receives it.
	Hide bool `json:"hide,omitempty"`
	// Fix removes the argument and sends this value upstream on every call;
	// a client that sends the argument is refused.
	Fix json.RawMessage `json:"fix,omitempty"`
	// Default is shown in the schema and sent upstream when the client
	// leaves the argument out.
	Default json.RawMessage `json:"default,omitempty"`
	// Enum narrows the argument to these values (a subset of the tool's
	// own enum when it has one).
	Enum []json.RawMessage `json:"enum,omitempty"`
	// Minimum, Maximum and MaxLength narrow a number's range or a string's
	// length; they never widen what the tool declares.
	Minimum   *float64 `json:"minimum,omitempty"`
	Maximum   *float64 `json:"maximum,omitempty"`
	MaxLength *int     `json:"maxLength,omitempty"`
}

// Virtual is a tool as a route serves it after its override.
type Virtual struct {
	// Tool is what clients see: lists, search, policies, approval and
	// schema validation all use it.
	Tool mcp.Tool
	// Upstream is the tool's name before the override: calls to Tool.Name
	// go upstream under this name.
	Upstream string
	// Args rewrites a call's arguments on the way up; nil when the override
	// changes no argument.
	Args *Arguments
}

// Apply returns the virtual tool that o makes of t. An error names the
// part of the override that does not fit the tool (a missing argument, a
// value the argument's schema refuses, a schema that no longer compiles).
func Apply(t mcp.Tool, o Override) (Virtual, error) {
	v := Virtual{Tool: t, Upstream: t.Name}
	if o.Name != "" {
		if !mcp.ValidToolName(o.Name) {
			return v, fmt.Errorf("name: %q is not a valid MCP tool name (1-%d of A-Z a-z 0-9 _ - .)", o.Name, mcp.MaxToolNameLen)
		}
		v.Tool.Name = o.Name
	}
	if o.Title != nil {
		v.Tool.Title = *o.Title
	}
	if o.Description != nil {
		v.Tool.Description = *o.Description
	}
	if len(o.Annotations) > 0 {
		ann, err := mergeObject(t.Annotations, o.Annotations)
		if err != nil {
			return v, fmt.Errorf("annotations: %w", err)
		}
		v.Tool.Annotations = ann
	}
	if len(o.Arguments) > 0 {
		schema, args, err := rewriteArguments(t.InputSchema, o.Arguments)
		if err != nil {
			return v, err
		}
		v.Tool.InputSchema, v.Args = schema, args
	}
	return v, nil
}

// mergeObject returns the JSON object base with the members of over set.
func mergeObject(base json.RawMessage, over map[string]json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if b := bytes.TrimSpace(base); len(b) > 0 && string(b) != "null" {
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("the tool's own are not a JSON object: %w", err)
		}
	}
	for k, v := range over {
		if !json.Valid(v) {
			return nil, fmt.Errorf("%q: not JSON", k)
		}
		m[k] = v
	}
	return marshalCompact(m)
}

func marshalCompact(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// rewriteArguments returns the input schema as the client sees it and the
// call-time rewrite of the arguments.
func rewriteArguments(raw json.RawMessage, over map[string]Argument) (json.RawMessage, *Arguments, error) {
	root, err := decodeObject(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("inputSchema: %w", err)
	}
	props, _ := root["properties"].(map[string]any)
	var errs []error
	args := &Arguments{hidden: map[string]bool{}}
	for _, name := range slices.Sorted(maps.Keys(over)) {
		a := over[name]
		prop, ok := props[name].(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("arguments.%s: the tool has no such argument", name))
			continue
		}
		if err := rewriteArgument(root, props, name, prop, a, args); err != nil {
			errs = append(errs, fmt.Errorf("arguments.%s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	out, err := marshalCompact(root)
	if err != nil {
		return nil, nil, fmt.Errorf("inputSchema: %w", err)
	}
	if _, err := compile(out); err != nil {
		return nil, nil, fmt.Errorf("inputSchema after the override: %w", err)
	}
	return out, args, nil
}

func rewriteArgument(root, props map[string]any, name string, prop map[string]any, a Argument, args *Arguments) error {
	narrows := a.Default != nil || a.Enum != nil || a.Minimum != nil || a.Maximum != nil || a.MaxLength != nil
	switch {
	case a.Hide && (a.Fix != nil || narrows):
		return errors.New("hide takes no other setting")
	case a.Fix != nil && narrows:
		return errors.New("fix takes no other setting")
	case a.Hide:
		delete(props, name)
		dropRequired(root, name)
		args.hidden[name] = true
		return nil
	case a.Fix != nil:
		if err := validateValue(root, prop, a.Fix); err != nil {
			return fmt.Errorf("fix: %w", err)
		}
		delete(props, name)
		dropRequired(root, name)
		args.hidden[name] = true
		args.fixed = append(args.fixed, member{name, compactJSON(a.Fix)})
		return nil
	}
	orig := maps.Clone(prop)
	if err := narrow(root, orig, prop, a); err != nil {
		return err
	}
	if a.Default != nil {
		if err := validateValue(root, prop, a.Default); err != nil {
			return fmt.Errorf("default: %w", err)
		}
		prop["default"] = json.RawMessage(compactJSON(a.Default))
		dropRequired(root, name)
		args.defaults = append(args.defaults, member{name, compactJSON(a.Default)})
	}
	return nil
}

// narrow applies Enum, Minimum, Maximum and MaxLength to prop, refusing any
// that would let through a value the tool's own schema (orig) refuses.
func narrow(root, orig, prop map[string]any, a Argument) error {
	if a.Enum != nil {
		if len(a.Enum) == 0 {
			return errors.New("enum: must list at least one value")
		}
		own, hasOwn := orig["enum"].([]any)
		vals := make([]any, len(a.Enum))
		for i, e := range a.Enum {
			if err := validateValue(root, orig, e); err != nil {
				return fmt.Errorf("enum[%d]: %w", i, err)
			}
			v, _ := decodeAny(e)
			if hasOwn && !slices.ContainsFunc(own, func(o any) bool { return jsonEqual(o, v) }) {
				return fmt.Errorf("enum[%d]: %s is not one of the tool's own values", i, compactJSON(e))
			}
			vals[i] = v
		}
		prop["enum"] = vals
	}
	if a.Minimum != nil || a.Maximum != nil {
		if !hasType(orig, "number", "integer") {
			return errors.New(`minimum and maximum need an argument of "type" number or integer`)
		}
		if err := tighten(prop, "minimum", a.Minimum, func(own, v float64) bool { return v >= own }); err != nil {
			return err
		}
		if err := tighten(prop, "maximum", a.Maximum, func(own, v float64) bool { return v <= own }); err != nil {
			return err
		}
	}
	if a.MaxLength != nil {
		if !hasType(orig, "string") {
			return errors.New(`maxLength needs an argument of "type" string`)
		}
		if *a.MaxLength < 0 {
			return errors.New("maxLength: must not be negative")
		}
		v := float64(*a.MaxLength)
		if err := tighten(prop, "maxLength", &v, func(own, v float64) bool { return v <= own }); err != nil {
			return err
		}
	}
	return nil
}

// tighten sets prop[key] to *v when ok(own, *v) holds for the tool's own
// bound (or it has none).
func tighten(prop map[string]any, key string, v *float64, ok func(own, v float64) bool) error {
	if v == nil {
		return nil
	}
	if n, has := prop[key].(json.Number); has {
		own, err := n.Float64()
		if err == nil && !ok(own, *v) {
			return fmt.Errorf("%s: %v would widen the tool's own %s of %v", key, *v, key, own)
		}
	}
	prop[key] = json.Number(fmt.Sprint(*v))
	return nil
}

func hasType(prop map[string]any, types ...string) bool {
	switch t := prop["type"].(type) {
	case string:
		return slices.Contains(types, t)
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && slices.Contains(types, s) {
				return true
			}
		}
	}
	return false
}

func dropRequired(root map[string]any, name string) {
	req, ok := root["required"].([]any)
	if !ok {
		return
	}
	req = slices.DeleteFunc(slices.Clone(req), func(v any) bool { return v == name })
	if len(req) == 0 {
		delete(root, "required")
		return
	}
	root["required"] = req
}

// validateValue checks v against the argument schema prop, resolving the
// references it makes into the root schema's definitions.
func validateValue(root, prop map[string]any, v json.RawMessage) error {
	val, err := decodeAny(v)
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	doc := maps.Clone(prop)
	for _, k := range []string{"$defs", "definitions", "$schema"} {
		if d, ok := root[k]; ok {
			if _, own := doc[k]; !own {
				doc[k] = d
			}
		}
	}
	raw, err := marshalCompact(doc)
	if err != nil {
		return err
	}
	sch, err := compileAny(raw)
	if err != nil {
		return fmt.Errorf("the argument's schema does not compile: %w", err)
	}
	if err := sch.Validate(val); err != nil {
		return fmt.Errorf("%s is refused by the argument's schema: %s", compactJSON(v), firstLine(err.Error()))
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

// schemaLoc names the one document of a compiler; noRemote refuses every
// reference that leaves it, as the registry's own schema compiler does.
const schemaLoc = "toolmesh:///override-schema.json"

type noRemote struct{}

func (noRemote) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed", url)
}

// compile compiles an object input schema.
func compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	obj, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	if obj["type"] != "object" {
		return nil, errors.New(`must have "type": "object"`)
	}
	return compileAny(raw)
}

func compileAny(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noRemote{})
	if err := c.AddResource(schemaLoc, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaLoc)
}

func decodeObject(raw json.RawMessage) (map[string]any, error) {
	v, err := decodeAny(raw)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object")
	}
	return obj, nil
}

// decodeAny decodes with numbers kept as json.Number, so a schema's
// numbers survive a rewrite as written.
func decodeAny(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func jsonEqual(a, b any) bool {
	x, err1 := marshalCompact(sortedCopy(a))
	y, err2 := marshalCompact(sortedCopy(b))
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// sortedCopy normalizes json.Number text so that 1 and 1.0 compare equal,
// as JSON Schema's enum does.
func sortedCopy(v any) any {
	switch t := v.(type) {
	case json.Number:
		if f, err := t.Float64(); err == nil {
			return f
		}
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = sortedCopy(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = sortedCopy(e)
		}
		return out
	}
	return v
}

func compactJSON(raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// sortedNames is for stable error messages.
func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
