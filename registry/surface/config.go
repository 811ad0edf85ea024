package surface

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/toolmesh/toolmesh/mcp"
)

// Config is the toolmesh config file's surface block: pinning per route or
// per Tool Service, and each route's virtual tools.
//
//	surface:
//	  routes:
//	    core:
//	      pinning: {mode: enforce, quarantineNew: true}
//	      tools:
//	        records_delete: {name: delete_record, arguments: {tenant: {fix: "acme"}}}
//	  toolServices:
//	    github: {mode: warn}
//
// Load checks its structure (Validate); whether a named tool or argument
// exists is known only once the route's snapshot is built, so an override
// that does not fit its tool is reported then, per route, in /health and
// the log (docs/surface.md).
type Config struct {
	// Routes are the per-route settings, by route key.
	Routes map[string]RouteConfig `json:"routes,omitempty"`
	// ToolServices are pinning policies by Tool Service name; one replaces
	// the route's policy for that service's tools.
	ToolServices map[string]Policy `json:"toolServices,omitempty"`
}

// RouteConfig is one route's surface.
type RouteConfig struct {
	// Pinning is the policy of the route's tools (unset: off), unless
	// toolServices names their service.
	Pinning *Policy `json:"pinning,omitempty"`
	// Tools are the route's virtual tools: overrides by the tool's name on
	// the route (with a federated server's toolPrefix, before any rename).
	Tools map[string]Override `json:"tools,omitempty"`
}

// Validate checks what can be checked without the routes' tools; each
// error names the entry.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(c.Routes)) {
		rc := c.Routes[key]
		if rc.Pinning != nil {
			if err := rc.Pinning.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("surface.routes.%s.pinning.%w", key, err))
			}
		}
		renamed := map[string]string{}
		for _, tool := range slices.Sorted(maps.Keys(rc.Tools)) {
			o := rc.Tools[tool]
			if !mcp.ValidToolName(tool) {
				errs = append(errs, fmt.Errorf("surface.routes.%s.tools.%s: not a valid MCP tool name", key, tool))
			}
			if err := o.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("surface.routes.%s.tools.%s.%w", key, tool, err))
			}
			if o.Name != "" {
				if prev, dup := renamed[o.Name]; dup {
					errs = append(errs, fmt.Errorf("surface.routes.%s.tools.%s.name: %q is already the new name of %q", key, tool, o.Name, prev))
				}
				renamed[o.Name] = tool
			}
		}
	}
	for _, svc := range slices.Sorted(maps.Keys(c.ToolServices)) {
		p := c.ToolServices[svc]
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("surface.toolServices.%s.%w", svc, err))
		}
	}
	return errors.Join(errs...)
}

// PolicyFor returns the pinning policy of service's tools on route: the
// service's own, else the route's, else off.
func (c *Config) PolicyFor(route, service string) Policy {
	if c == nil {
		return Policy{Mode: ModeOff}
	}
	if p, ok := c.ToolServices[service]; ok {
		return p
	}
	if rc, ok := c.Routes[route]; ok && rc.Pinning != nil {
		return *rc.Pinning
	}
	return Policy{Mode: ModeOff}
}

// Overrides returns route's virtual tools (nil for none).
func (c *Config) Overrides(route string) map[string]Override {
	if c == nil {
		return nil
	}
	return c.Routes[route].Tools
}

// Validate checks the override on its own (without its tool): a valid new
// name, settings that go together, values that are JSON. Errors name the
// field.
func (o Override) Validate() error {
	var errs []error
	if o.Name != "" && !mcp.ValidToolName(o.Name) {
		errs = append(errs, fmt.Errorf("name: %q is not a valid MCP tool name (1-%d of A-Z a-z 0-9 _ - .)", o.Name, mcp.MaxToolNameLen))
	}
	for _, k := range slices.Sorted(maps.Keys(o.Annotations)) {
		if !json.Valid(o.Annotations[k]) {
			errs = append(errs, fmt.Errorf("annotations.%s: not JSON", k))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.Arguments)) {
		if err := o.Arguments[name].validate(); err != nil {
			errs = append(errs, fmt.Errorf("arguments.%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (a Argument) validate() error {
	narrows := a.Default != nil || a.Enum != nil || a.Minimum != nil || a.Maximum != nil || a.MaxLength != nil
	switch {
	case a.Hide && (a.Fix != nil || narrows):
		return errors.New("hide takes no other setting")
	case a.Fix != nil && narrows:
		return errors.New("fix takes no other setting")
	case !a.Hide && a.Fix == nil && !narrows:
		return errors.New("sets nothing: give hide, fix, default, enum, minimum, maximum or maxLength")
	case a.Fix != nil && !json.Valid(a.Fix):
		return errors.New("fix: not JSON")
	case a.Default != nil && !json.Valid(a.Default):
		return errors.New("default: not JSON")
	case a.Enum != nil && len(a.Enum) == 0:
		return errors.New("enum: must list at least one value")
	case a.MaxLength != nil && *a.MaxLength < 0:
		return errors.New("maxLength: must not be negative")
	case a.Minimum != nil && a.Maximum != nil && *a.Minimum > *a.Maximum:
		return fmt.Errorf("minimum %v is above maximum %v", *a.Minimum, *a.Maximum)
	}
	for i, e := range a.Enum {
		if !json.Valid(e) {
			return fmt.Errorf("enum[%d]: not JSON", i)
		}
	}
	return nil
}
