package filters

import (
	"reflect"
	"strings"
	"testing"
)

const exampleYAML = `
definitions:
  - name: schema
    type: input_schema
  - name: size
    type: argument_size
    config: {maxBytes: 1024}
  - name: acl
    type: tool_acl
    config:
      deny: ["*_admin"]
  - name: tenant
    type: header_propagation
    config: {headers: [X-Tenant]}
  - name: redact
    type: redact
    config:
      pointers: [/structuredContent/ssn]
      patterns: ['\b\d{3}-\d{2}-\d{4}\b']
defaults: [schema, acl, redact]
routes:
  core: [tenant, size]
  lab: [-acl]
  ops: []
`

func TestParseConfigAndChains(t *testing.T) {
	cfg, err := ParseConfig([]byte(exampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		route string
		want  []string
	}{
		{"", []string{"schema", "acl", "redact"}},
		{"unlisted", []string{"schema", "acl", "redact"}},
		{"core", []string{"schema", "size", "acl", "tenant", "redact"}}, // definition order, not list order
		{"lab", []string{"schema", "redact"}},
		{"ops", []string{"schema", "acl", "redact"}},
	}
	for _, tt := range tests {
		if got := cfg.chainFor(tt.route); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("chain %q = %v, want %v", tt.route, got, tt.want)
		}
	}
}

// TestSchemaValidationDefault: whatever the lists say, every route's chain
// validates arguments, unless schemaValidationOff names the route.
func TestSchemaValidationDefault(t *testing.T) {
	tests := []struct {
		name, yaml string
		chains     map[string][]string
	}{
		{"no schema definition", `
definitions: [{name: acl, type: tool_acl, config: {deny: [x]}}]
defaults: [acl]
routes: {core: [], bare: [-acl]}
schemaValidationOff: [raw]`, map[string][]string{
			"":      {"input_schema", "acl"},
			"other": {"input_schema", "acl"},
			"core":  {"input_schema", "acl"},
			"bare":  {"input_schema"},
			"raw":   {"acl"},
		}},
		{"schema defined but in no list", `
definitions:
  - {name: acl, type: tool_acl, config: {deny: [x]}}
  - {name: check, type: input_schema}
  - {name: size, type: argument_size, config: {maxBytes: 10}}
defaults: [acl, size]
schemaValidationOff: [raw]`, map[string][]string{
			"":    {"acl", "check", "size"}, // at its place in the definitions
			"raw": {"acl", "size"},
		}},
		{"schema in the defaults", `
definitions: [{name: schema, type: input_schema}, {name: acl, type: tool_acl, config: {deny: [x]}}]
defaults: [schema, acl]
routes: {raw: [-acl]}
schemaValidationOff: [raw]`, map[string][]string{
			"":    {"schema", "acl"},
			"raw": nil,
		}},
		{"empty section", ``, map[string][]string{"": {"input_schema"}, "core": {"input_schema"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			for route, want := range tt.chains {
				if got := cfg.chainFor(route); !reflect.DeepEqual(got, want) {
					t.Errorf("chain %q = %v, want %v", route, got, want)
				}
			}
		})
	}
}

func TestParseConfigJSON(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"definitions":[{"name":"s","type":"input_schema"}],"defaults":["s"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.chainFor("x"); !reflect.DeepEqual(got, []string{"s"}) {
		t.Fatalf("chain = %v", got)
	}
}

func TestConfigErrors(t *testing.T) {
	def := func(name, typ, config string) string {
		s := "\n  - name: " + name + "\n    type: " + typ
		if config != "" {
			s += "\n    config: " + config
		}
		return s
	}
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown top-level field", "definitons: []", []string{"unknown field"}},
		{"unknown definition field", "definitions:\n  - {name: a, type: input_schema, fail_open: true}", []string{"unknown field"}},
		{"duplicate names", "definitions:" + def("a", "input_schema", "") + def("a", "input_schema", ""), []string{`filter "a" is defined twice`}},
		{"bad name", "definitions:" + def("Bad", "input_schema", ""), []string{`invalid name "Bad"`}},
		{"unknown type", "definitions:" + def("a", "magic", ""), []string{`unknown type "magic"`, "tool_acl"}},
		{"unknown filter in defaults", "definitions:" + def("a", "input_schema", "") + "\ndefaults: [b]", []string{`defaults: unknown filter "b"`}},
		{"unknown filter in a route", "definitions:" + def("a", "input_schema", "") + "\nroutes: {core: [a, zz]}", []string{`route core: unknown filter "zz"`}},
		{"removal in defaults", "definitions:" + def("a", "input_schema", "") + "\ndefaults: [-a]", []string{"removals are only allowed in route lists"}},
		{"removal of a non-default", "definitions:" + def("a", "input_schema", "") + "\nroutes: {core: [-a]}", []string{"not a default"}},
		{"adding a default again", "definitions:" + def("a", "input_schema", "") + "\ndefaults: [a]\nroutes: {core: [a]}", []string{"already a default"}},
		{"listed twice", "definitions:" + def("a", "input_schema", "") + "\ndefaults: [a, a]", []string{"listed twice"}},
		{"bad route key", "definitions:" + def("a", "input_schema", "") + "\nroutes: {Core_1: [a]}", []string{`invalid route key "Core_1"`}},
		{"schema removed in a route list", "definitions:" + def("a", "input_schema", "") + "\ndefaults: [a]\nroutes: {lab: [-a]}",
			[]string{`route lab: "-a" would turn input-schema validation off, which only schemaValidationOff does`}},
		{"schema added to a route with validation off", "definitions:" + def("a", "input_schema", "") + "\nroutes: {lab: [a]}\nschemaValidationOff: [lab]",
			[]string{`route lab: adds input_schema filter "a" but is listed in schemaValidationOff`}},
		{"bad schemaValidationOff key", "schemaValidationOff: [Lab_1]", []string{`schemaValidationOff: invalid route key "Lab_1"`}},
		{"schemaValidationOff twice", "schemaValidationOff: [lab, lab]", []string{`schemaValidationOff: "lab" is listed twice`}},
		{"reserved name", "definitions:" + def("input_schema", "tool_acl", `{deny: [x]}`), []string{`filter "input_schema": the name is reserved for type input_schema`}},
		{"bad glob", "definitions:" + def("a", "tool_acl", `{allow: ["get_["]}`), []string{`bad glob "get_["`}},
		{"empty glob", "definitions:" + def("a", "tool_acl", `{deny: [""]}`), []string{`bad glob ""`}},
		{"acl without patterns", "definitions:" + def("a", "tool_acl", `{}`), []string{"at least one allow or deny"}},
		{"bad denyAs", "definitions:" + def("a", "tool_acl", `{deny: [x], denyAs: http}`), []string{`denyAs "http"`}},
		{"code without rpc_error", "definitions:" + def("a", "argument_size", `{maxBytes: 1, code: -32001}`), []string{"code is only used"}},
		{"bad regexp", "definitions:" + def("a", "redact", `{patterns: ["(unclosed"]}`), []string{`pattern "(unclosed"`}},
		{"regexp matching empty", "definitions:" + def("a", "redact", `{patterns: ["x*"]}`), []string{"matches the empty string"}},
		{"bad pointer", "definitions:" + def("a", "redact", `{pointers: ["structuredContent/ssn"]}`), []string{"does not start with /"}},
		{"bad pointer escape", "definitions:" + def("a", "redact", `{pointers: ["/a~2b"]}`), []string{"~ must be followed by 0 or 1"}},
		{"whole-document pointer", "definitions:" + def("a", "redact", `{pointers: [""]}`), []string{"whole document"}},
		{"redact without rules", "definitions:" + def("a", "redact", `{replacement: x}`), []string{"at least one pointer or pattern"}},
		{"unknown config field", "definitions:" + def("a", "argument_size", `{max_bytes: 1}`), []string{"unknown field"}},
		{"size without limit", "definitions:" + def("a", "argument_size", `{}`), []string{"maxBytes must be"}},
		{"bad propagated header", "definitions:" + def("a", "header_propagation", `{headers: ["x-toolmesh-cluster"]}`), []string{"reserved"}},
		{"no propagated headers", "definitions:" + def("a", "header_propagation", `{}`), []string{"at least one header"}},
		{"schema with config", "definitions:" + def("a", "input_schema", `{strict: true}`), []string{"unknown field"}},
		{"wasm without path", "definitions:" + def("a", "wasm", `{}`), []string{"path is required"}},
		{"wasm bad duration", "definitions:" + def("a", "wasm", `{path: x.wasm, callTimeout: 50}`), []string{"duration"}},
		{"wasm bad stage", "definitions:" + def("a", "wasm", `{path: x.wasm, stages: [response]}`), []string{`unknown stage "response"`}},
		{"wasm bad memory", "definitions:" + def("a", "wasm", `{path: x.wasm, memoryPages: 1}`), []string{"memoryPages 1 out of range"}},
		{
			"every problem is reported",
			"definitions:" + def("a", "magic", "") + def("b", "tool_acl", `{allow: ["["]}`) + "\ndefaults: [c]",
			[]string{`unknown type "magic"`, `bad glob "["`, `unknown filter "c"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml))
			if err == nil {
				t.Fatal("ParseConfig succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.chainFor("any"); !reflect.DeepEqual(got, []string{"schema"}) {
		t.Fatalf("default chain = %v", got)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(exampleYAML))
	f.Add([]byte(`{"definitions":[{"name":"a","type":"redact","config":{"pointers":["/a/~1b"]}}],"defaults":["a"]}`))
	f.Add([]byte("routes: {x: [-a]}"))
	f.Add([]byte("definitions: [{name: a, type: tool_acl, config: {deny: [x]}}]\ndefaults: [a]\nschemaValidationOff: [x]\nroutes: {x: [-a], y: []}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseConfig(b)
		if err != nil {
			return
		}
		// A valid config always yields chains made of defined filters (the
		// implicit input_schema one included) that validate arguments
		// unless schemaValidationOff names the route.
		defined, schema := map[string]bool{}, map[string]bool{}
		for _, d := range cfg.definitions() {
			defined[d.Name], schema[d.Name] = true, d.Type == TypeInputSchema
		}
		for _, route := range append(sortedKeys(cfg.Routes), "", "unlisted") {
			validates := false
			for _, n := range cfg.chainFor(route) {
				if !defined[n] {
					t.Fatalf("route %q runs undefined filter %q", route, n)
				}
				validates = validates || schema[n]
			}
			if validates == cfg.schemaOff(route) {
				t.Fatalf("route %q: input-schema validation %v, schemaValidationOff %v", route, validates, cfg.schemaOff(route))
			}
		}
	})
}
