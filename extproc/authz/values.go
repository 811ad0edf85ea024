package authz

import (
	"encoding/json"
	"fmt"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/toolmesh/toolmesh/extproc/identity"
)

// The CEL values of a request are built once (a caller per request, a tool
// per snapshot) as ref.Vals, so evaluation only walks prepared values: the
// object types below are declared to the type checker with field getters
// that are plain Go switches, and JSON data (claims, annotations, arguments)
// is converted to CEL lists and maps up front, with no reflection when a
// policy reads it.

// Object type names, as type errors name them.
const (
	callerType   = "toolmesh.Caller"
	toolType     = "toolmesh.Tool"
	resourceType = "toolmesh.Resource"
	promptType   = "toolmesh.Prompt"
)

// Caller is the CEL value of a request's caller.
type Caller struct {
	authenticated bool
	iss, sub      string
	aud, scopes   ref.Val
	claims        ref.Val
	meshID        string
}

// NewCaller prepares c (nil: anonymous) for evaluation. The token is never
// part of it.
func NewCaller(c *identity.Caller) *Caller {
	v := &Caller{}
	if c == nil {
		v.aud, v.scopes, v.claims = emptyList, emptyList, emptyMap
		return v
	}
	v.authenticated, v.iss, v.sub, v.meshID = c.Authenticated, c.Issuer, c.Subject, c.MeshID
	v.aud = types.NewStringList(types.DefaultTypeAdapter, clipStrings(c.Audience))
	v.scopes = types.NewStringList(types.DefaultTypeAdapter, clipStrings(c.Scopes))
	v.claims = jsonValue(anyMap(c.Claims))
	return v
}

func clipStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func anyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// Tool is the CEL value of a tool. Annotations carry the four MCP hints
// with their effective values (see NewTool).
type Tool struct {
	name, service, title string
	annotations          ref.Val
}

// NewTool prepares a tool for evaluation. annotations is the tool's
// annotations object as declared (nil or empty: none). The four hints of the
// MCP specification (schema.ts, ToolAnnotations) are always present with
// their effective value: as declared, else the specification's default
// (readOnlyHint false, destructiveHint true, idempotentHint false,
// openWorldHint true), except that a read-only tool is not destructive. So
// `tool.annotations.destructiveHint` is always a bool, and a tool that does
// not say it is harmless is treated as the specification says to.
func NewTool(name, service, title string, annotations json.RawMessage) *Tool {
	m := map[string]any{}
	if len(annotations) > 0 {
		_ = json.Unmarshal(annotations, &m) // the registry checked it is an object
		if m == nil {
			m = map[string]any{}
		}
	}
	hint := func(k string, def bool) {
		if _, ok := m[k].(bool); !ok {
			m[k] = def
		}
	}
	hint("readOnlyHint", false)
	hint("destructiveHint", !m["readOnlyHint"].(bool))
	hint("idempotentHint", false)
	hint("openWorldHint", true)
	return &Tool{name: name, service: service, title: title, annotations: jsonValue(m)}
}

// Name is the tool's name.
func (t *Tool) Name() string { return t.name }

// Resource is the CEL value of a resource (or resource template: its uri is
// then the uriTemplate).
type Resource struct{ uri string }

// NewResource prepares a resource for evaluation.
func NewResource(uri string) *Resource { return &Resource{uri: uri} }

// Prompt is the CEL value of a prompt.
type Prompt struct{ name string }

// NewPrompt prepares a prompt for evaluation.
func NewPrompt(name string) *Prompt { return &Prompt{name: name} }

// Args converts a call's arguments (a JSON object) for evaluation.
func Args(raw json.RawMessage) (ref.Val, error) {
	if len(raw) == 0 {
		return emptyMap, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return jsonValue(anyMap(m)), nil
}

var (
	emptyList = types.NewRefValList(types.DefaultTypeAdapter, []ref.Val{})
	emptyMap  = types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{})
)

// jsonValue converts decoded JSON to CEL values. JSON numbers become
// doubles, as in CEL's JSON mapping (google.protobuf.Value); CEL compares
// doubles and ints numerically, so `args.count > 5` works.
func jsonValue(v any) ref.Val {
	switch v := v.(type) {
	case nil:
		return types.NullValue
	case bool:
		return types.Bool(v)
	case string:
		return types.String(v)
	case float64:
		return types.Double(v)
	case json.Number:
		f, _ := v.Float64()
		return types.Double(f)
	case []any:
		l := make([]ref.Val, len(v))
		for i, e := range v {
			l[i] = jsonValue(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, l)
	case []string:
		return types.NewStringList(types.DefaultTypeAdapter, v)
	case map[string]any:
		m := make(map[ref.Val]ref.Val, len(v))
		for k, e := range v {
			m[types.String(k)] = jsonValue(e)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	default:
		return types.DefaultTypeAdapter.NativeToValue(v)
	}
}

// field is one field of an object type: its CEL type and its getter.
type field struct {
	typ *types.Type
	get func(any) any
}

var (
	stringList = types.NewListType(types.StringType)
	dynMap     = types.NewMapType(types.StringType, types.DynType)
)

// objectFields are the fields of the object types of the policy language.
var objectFields = map[string]map[string]field{
	callerType: {
		"authenticated": {types.BoolType, func(o any) any { return types.Bool(o.(*Caller).authenticated) }},
		"iss":           {types.StringType, func(o any) any { return types.String(o.(*Caller).iss) }},
		"sub":           {types.StringType, func(o any) any { return types.String(o.(*Caller).sub) }},
		"aud":           {stringList, func(o any) any { return o.(*Caller).aud }},
		"scopes":        {stringList, func(o any) any { return o.(*Caller).scopes }},
		"claims":        {dynMap, func(o any) any { return o.(*Caller).claims }},
		"mesh_id":       {types.StringType, func(o any) any { return types.String(o.(*Caller).meshID) }},
	},
	toolType: {
		"name":        {types.StringType, func(o any) any { return types.String(o.(*Tool).name) }},
		"service":     {types.StringType, func(o any) any { return types.String(o.(*Tool).service) }},
		"title":       {types.StringType, func(o any) any { return types.String(o.(*Tool).title) }},
		"annotations": {dynMap, func(o any) any { return o.(*Tool).annotations }},
	},
	resourceType: {
		"uri": {types.StringType, func(o any) any { return types.String(o.(*Resource).uri) }},
	},
	promptType: {
		"name": {types.StringType, func(o any) any { return types.String(o.(*Prompt).name) }},
	},
}

// provider declares the object types to the checker and gives the
// interpreter their field getters; everything else is CEL's own registry.
type provider struct{ *types.Registry }

func (p provider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := objectFields[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

func (p provider) FindStructFieldNames(name string) ([]string, bool) {
	fs, ok := objectFields[name]
	if !ok {
		return p.Registry.FindStructFieldNames(name)
	}
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	return names, true
}

func (p provider) FindStructFieldType(name, fieldName string) (*types.FieldType, bool) {
	fs, ok := objectFields[name]
	if !ok {
		return p.Registry.FindStructFieldType(name, fieldName)
	}
	f, ok := fs[fieldName]
	if !ok {
		return nil, false
	}
	get := f.get
	return &types.FieldType{
		Type:    f.typ,
		IsSet:   func(any) bool { return true }, // every field is always set
		GetFrom: func(o any) (any, error) { return get(o), nil },
	}, true
}

// NewValue: policies cannot construct these objects.
func (p provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := objectFields[name]; ok {
		return types.NewErr("%s cannot be constructed", name)
	}
	return p.Registry.NewValue(name, fields)
}
