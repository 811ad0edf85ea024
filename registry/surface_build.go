package registry

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/surface"
)

// The operator's control of what a route exposes (registry/surface,
// docs/surface.md) enters a build as Route.Surface: which tools pinning
// holds back, decided by the refresher against the pin store, and the
// route's virtual tools from the toolmesh config. Being part of the route
// definition, both are hashed into the snapshot's version and persisted
// with it, so a restore serves exactly what was built.

// RouteSurface is what the gateway changes in a route before building it.
type RouteSurface struct {
	// Held are the tools left out until an operator accepts their
	// definition, sorted by service and tool.
	Held []HeldTool `json:"held,omitempty"`
	// Overrides are the route's virtual tools, by the tool's name on the
	// route (with its service's toolPrefix, before any rename).
	Overrides map[string]surface.Override `json:"overrides,omitempty"`
}

// HeldTool is one tool pinning holds back.
type HeldTool struct {
	Service string `json:"service"`
	Tool    string `json:"tool"` // its name on the service
	Hash    string `json:"hash"` // the definition held back
	// Accepted is the hash last accepted ("" for a tool held back as new).
	Accepted string `json:"accepted,omitempty"`
}

// Empty reports whether s changes nothing.
func (s *RouteSurface) Empty() bool { return s == nil || len(s.Held) == 0 && len(s.Overrides) == 0 }

// QuarantinedTool is a tool of a route held back by pinning: left out of
// lists and search, and a call to it is refused with a -32602 error saying
// so (mcp.QuarantinedMessage). The last accepted definition is not served
// in its place.
type QuarantinedTool struct {
	Name     string `json:"name"` // on the route, before any override
	Service  string `json:"service"`
	Tool     string `json:"tool"` // on the service
	Hash     string `json:"hash"`
	Accepted string `json:"accepted,omitempty"`
}

// ServiceToolName is the name the Tool Service or MCP server knows the tool
// by: UpstreamName for a federated tool, else its name on the route before
// any override.
func (t *Tool) ServiceToolName() string {
	switch {
	case t.UpstreamName != "":
		return t.UpstreamName
	case t.Origin != "":
		return t.Origin
	}
	return t.Name
}

// heldSet indexes Held by service and tool.
func (s *RouteSurface) heldSet() map[[2]string]HeldTool {
	if s == nil || len(s.Held) == 0 {
		return nil
	}
	m := make(map[[2]string]HeldTool, len(s.Held))
	for _, h := range s.Held {
		m[[2]string{h.Service, h.Tool}] = h
	}
	return m
}

// quarantine records that name, won by t, is held back.
func (s *Snapshot) quarantine(name string, t *Tool, h HeldTool) {
	if s.quarantined == nil {
		s.quarantined = map[string]bool{}
	}
	s.quarantined[name] = true
	s.Quarantined = append(s.Quarantined, QuarantinedTool{Name: name, Service: t.Service, Tool: h.Tool, Hash: h.Hash, Accepted: h.Accepted})
}

// applyOverrides replaces the tools the route's overrides name with their
// virtual tools. An override that does not fit its tool (a missing
// argument, a value its schema refuses, a name another tool has) leaves
// the tool out, rejected with the reason: serving it unchanged would show
// what the operator meant to hide. An override naming no tool of the route
// is listed in SurfaceErrors.
func (s *Snapshot) applyOverrides(in *inputs, lazy bool) {
	if in.route.Surface == nil || len(in.route.Surface.Overrides) == 0 {
		return
	}
	ov := in.route.Surface.Overrides
	searchMode := in.route.Catalog != nil && in.route.Catalog.Mode == ModeSearch
	seen := map[string]bool{}
	out := make([]*Tool, 0, len(s.Tools))
	for _, t := range s.Tools {
		o, ok := ov[t.Name]
		if !ok {
			out = append(out, t)
			continue
		}
		seen[t.Name] = true
		vt, err := virtualTool(t, o, lazy)
		if err == nil && searchMode && mcp.IsMetaToolName(vt.Name) {
			err = fmt.Errorf("name: %s", reservedName)
		}
		if err != nil {
			s.Rejected = append(s.Rejected, RejectedTool{Service: t.Service, Name: t.Name, Reason: "override: " + err.Error()})
			continue
		}
		out = append(out, vt)
	}
	for _, name := range slices.Sorted(maps.Keys(ov)) {
		switch {
		case seen[name]:
		case s.quarantined[name]:
			// Held back: its virtual name is held back with it.
			if n := ov[name].Name; n != "" {
				s.quarantined[n] = true
			}
		default:
			s.SurfaceErrors = append(s.SurfaceErrors, fmt.Sprintf("override of tool %q: the route has no such tool", name))
		}
	}
	// A rename must not take a name another tool of the route keeps.
	count := map[string]int{}
	for _, t := range out {
		count[t.Name]++
	}
	kept := out[:0]
	for _, t := range out {
		if t.Origin != "" && t.Origin != t.Name && (count[t.Name] > 1 || s.ambiguous[t.Name] || s.quarantined[t.Name]) {
			s.Rejected = append(s.Rejected, RejectedTool{Service: t.Service, Name: t.Origin,
				Reason: fmt.Sprintf("override: name %q is the name of another tool of the route", t.Name)})
			continue
		}
		kept = append(kept, t)
	}
	s.Tools = kept
	s.byName = make(map[string]*Tool, len(kept))
	for _, t := range kept {
		s.byName[t.Name] = t
	}
}

// virtualTool is t as override o makes it: what lists, search, policies,
// approval, schema validation and filters see, while the call goes up
// under t's own name with Args' rewrite.
func virtualTool(t *Tool, o surface.Override, lazy bool) (*Tool, error) {
	v, err := surface.Apply(t.Tool, o)
	if err != nil {
		return nil, err
	}
	vt := *t
	vt.Tool, vt.Origin, vt.Args = v.Tool, t.Name, v.Args
	if !bytes.Equal(v.Tool.InputSchema, t.InputSchema) {
		vt.schema = schemas.entry(v.Tool.InputSchema)
		if !lazy {
			if err := vt.schema.check(); err != nil {
				return nil, fmt.Errorf("inputSchema after the override: %w", err)
			}
		}
		if vt.ParamHeaders, err = mcp.ParamHeadersOf(v.Tool.InputSchema); err != nil {
			return nil, fmt.Errorf("inputSchema after the override: %w", err)
		}
	}
	return &vt, nil
}

// Tools are the manifest's entries, for pinning to decide on (read only).
func (c *Canonical) Tools() []ManifestTool { return c.m.Tools }
