package filters

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Config is the filters section of the toolmesh config file.
//
// The order of Definitions is the execution order of every chain: it is the
// one place where filter order is declared. Defaults and Routes only choose
// which of the defined filters run on a route.
//
//	filters:
//	  definitions:                 # execution order
//	    - name: schema
//	      type: input_schema
//	    - name: acl
//	      type: tool_acl
//	      config: {deny: ["*_admin"]}
//	    - name: policy
//	      type: wasm
//	      failOpen: false
//	      config: {path: /etc/toolmesh/policy.wasm, callTimeout: 50ms}
//	  defaults: [schema, acl]      # every route
//	  routes:
//	    core: [policy]             # core runs schema, acl, policy
//	    lab: [-acl]                # lab runs schema only
//	  schemaValidationOff: [raw]   # raw runs acl only (a warning at start)
//
// Input-schema validation is on for every route whatever its list says: a
// route whose chain has no input_schema filter runs the first input_schema
// definition anyway, at its place in the order, or, when none is defined,
// a built-in one named input_schema before every other filter. Removing an
// input_schema filter in a route list is an error. The only way to turn
// validation off is to name the route in SchemaValidationOff, which the
// gateway logs as a warning, per route, whenever it loads the filters.
type Config struct {
	// Definitions names and configures every filter, in execution order.
	Definitions []Definition `json:"definitions,omitempty"`
	// Defaults lists the filters every route runs.
	Defaults []string `json:"defaults,omitempty"`
	// Routes adjusts the defaults per route key: a name adds a filter, a
	// name prefixed with "-" removes a default one.
	Routes map[string][]string `json:"routes,omitempty"`
	// SchemaValidationOff lists the route keys whose tool arguments are not
	// validated against the tools' inputSchema: no input_schema filter runs
	// on them. Every other route validates.
	SchemaValidationOff []string `json:"schemaValidationOff,omitempty"`
	// WasmCacheDir keeps compiled WebAssembly modules on disk across
	// restarts (empty: in memory only).
	WasmCacheDir string `json:"wasmCacheDir,omitempty"`
}

// Definition is one configured filter.
type Definition struct {
	// Name identifies the filter in route lists, logs and metrics.
	Name string `json:"name"`
	// Type is a built-in filter type (see Types) or "wasm".
	Type string `json:"type"`
	// FailOpen lets calls through when the filter fails to decide (an error,
	// a trapped or timed-out WebAssembly guest). The default, fail-closed,
	// denies them.
	FailOpen bool `json:"failOpen,omitempty"`
	// Config is the type's own configuration.
	Config json.RawMessage `json:"config,omitempty"`
}

// DefaultConfig runs input-schema validation on every route, which is what
// the gateway does when its config file has no filters section.
func DefaultConfig() Config {
	return Config{
		Definitions: []Definition{{Name: "schema", Type: TypeInputSchema}},
		Defaults:    []string{"schema"},
	}
}

// ImplicitSchemaFilter is the name of the input_schema filter every route
// runs when the configuration defines none. A definition of another type
// may not take the name.
const ImplicitSchemaFilter = "input_schema"

// definitions returns the definitions in execution order, led by the
// implicit input_schema filter when none is defined.
func (c Config) definitions() []Definition {
	if slices.ContainsFunc(c.Definitions, isSchemaDef) {
		return c.Definitions
	}
	return append([]Definition{{Name: ImplicitSchemaFilter, Type: TypeInputSchema}}, c.Definitions...)
}

func isSchemaDef(d Definition) bool { return d.Type == TypeInputSchema }

// schemaOff reports whether the configuration turns input-schema
// validation off for route.
func (c Config) schemaOff(route string) bool {
	return route != "" && slices.Contains(c.SchemaValidationOff, route)
}

// ParseConfig reads a filters section in YAML or JSON. Unknown fields are
// errors, so a typo does not silently disable a policy.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Config{}, fmt.Errorf("parse filters config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

var (
	nameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	routeRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

// Validate checks the whole configuration without loading anything: names,
// types, each type's configuration (globs, regular expressions, JSON
// pointers, limits) and the route lists. It reports every problem it finds.
func (c Config) Validate() error {
	var errs []error
	seen := make(map[string]bool, len(c.Definitions))
	for i, d := range c.Definitions {
		switch {
		case !nameRE.MatchString(d.Name):
			errs = append(errs, fmt.Errorf("filter definition %d: invalid name %q (want %s)", i, d.Name, nameRE))
		case seen[d.Name]:
			errs = append(errs, fmt.Errorf("filter %q is defined twice", d.Name))
		}
		seen[d.Name] = true
		if d.Name == ImplicitSchemaFilter && d.Type != TypeInputSchema {
			errs = append(errs, fmt.Errorf("filter %q: the name is reserved for type %s", d.Name, TypeInputSchema))
		}
		t, ok := types[d.Type]
		if !ok {
			errs = append(errs, fmt.Errorf("filter %q: unknown type %q (known: %s)", d.Name, d.Type, strings.Join(Types(), ", ")))
			continue
		}
		if err := t.validate(d.Config); err != nil {
			errs = append(errs, fmt.Errorf("filter %q (%s): %w", d.Name, d.Type, err))
		}
	}
	if err := checkList("defaults", c.Defaults, seen, nil); err != nil {
		errs = append(errs, err)
	}
	defaults := make(map[string]bool, len(c.Defaults))
	for _, n := range c.Defaults {
		defaults[n] = true
	}
	schema := map[string]bool{}
	for _, d := range c.Definitions {
		schema[d.Name] = isSchemaDef(d)
	}
	for _, route := range sortedKeys(c.Routes) {
		if !routeRE.MatchString(route) {
			errs = append(errs, fmt.Errorf("routes: invalid route key %q (want %s)", route, routeRE))
		}
		if err := checkList("route "+route, c.Routes[route], seen, defaults); err != nil {
			errs = append(errs, err)
		}
		for _, item := range c.Routes[route] {
			name, remove := strings.CutPrefix(item, "-")
			switch {
			case remove && schema[name]:
				errs = append(errs, fmt.Errorf("route %s: %q would turn input-schema validation off, which only schemaValidationOff does", route, item))
			case !remove && schema[name] && c.schemaOff(route):
				errs = append(errs, fmt.Errorf("route %s: adds input_schema filter %q but is listed in schemaValidationOff", route, name))
			}
		}
	}
	listed := map[string]bool{}
	for _, route := range c.SchemaValidationOff {
		switch {
		case !routeRE.MatchString(route):
			errs = append(errs, fmt.Errorf("schemaValidationOff: invalid route key %q (want %s)", route, routeRE))
		case listed[route]:
			errs = append(errs, fmt.Errorf("schemaValidationOff: %q is listed twice", route))
		}
		listed[route] = true
	}
	return errors.Join(errs...)
}

// checkList checks a defaults or route list. defaults is nil for the
// defaults list itself, where removals make no sense.
func checkList(what string, list []string, defined, defaults map[string]bool) error {
	var errs []error
	listed := make(map[string]bool, len(list))
	for _, item := range list {
		name, remove := strings.CutPrefix(item, "-")
		switch {
		case !defined[name]:
			errs = append(errs, fmt.Errorf("%s: unknown filter %q", what, name))
		case remove && defaults == nil:
			errs = append(errs, fmt.Errorf("%s: %q: removals are only allowed in route lists", what, item))
		case remove && !defaults[name]:
			errs = append(errs, fmt.Errorf("%s: %q removes a filter that is not a default", what, item))
		case !remove && defaults[name]:
			errs = append(errs, fmt.Errorf("%s: %q is already a default", what, name))
		case listed[name]:
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", what, name))
		}
		listed[name] = true
	}
	return errors.Join(errs...)
}

// chainFor returns the filter names of a route in execution order, for a
// validated config. route "" means the defaults. Unless the route is in
// SchemaValidationOff, the chain has an input_schema filter even when the
// lists leave it out (see Config).
func (c Config) chainFor(route string) []string {
	defs := c.definitions()
	on := make(map[string]bool, len(c.Defaults))
	for _, n := range c.Defaults {
		on[n] = true
	}
	for _, item := range c.Routes[route] {
		name, remove := strings.CutPrefix(item, "-")
		on[name] = !remove
	}
	off := c.schemaOff(route)
	needSchema := !off && !slices.ContainsFunc(defs, func(d Definition) bool { return on[d.Name] && isSchemaDef(d) })
	var names []string
	for _, d := range defs {
		switch {
		case isSchemaDef(d) && off:
			continue
		case on[d.Name]:
		case isSchemaDef(d) && needSchema:
			needSchema = false
		default:
			continue
		}
		names = append(names, d.Name)
	}
	return names
}

// decodeStrict decodes a type's configuration, refusing unknown fields. An
// absent configuration decodes as {}.
func decodeStrict(raw json.RawMessage, v any) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if dec.More() {
		return errors.New("config: trailing data")
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
