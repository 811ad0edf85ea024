package refresher

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/surface"
)

// Pinned definitions and virtual tools (docs/surface.md): before a route
// is built, each tool of a pinned service is decided against the pin store
// (Options.Pins), and the held ones and the route's overrides go into the
// route definition as Route.Surface, so they are part of the snapshot's
// version and a change of either rebuilds the route.

// SetSurface sets the surface block of the toolmesh config: pinning per
// route or Tool Service, and each route's virtual tools. It is checked as
// a whole (Config.Validate) and, when valid, replaces the one in force at
// once; it takes effect at the next refresh (before Start, at its first).
// A nil config turns pinning off and removes every virtual tool.
func (r *Registry) SetSurface(c *surface.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c == nil {
		c = &surface.Config{}
	}
	r.surface.Store(c)
	return nil
}

// Pins is the pin store decisions are recorded in.
func (r *Registry) Pins() surface.Store { return r.pins }

// RefreshRoutes runs a refresh of the named routes' manifests now, as a
// retry does: after an operator accepts or rejects a definition, the route
// is rebuilt at once instead of at the next cycle.
func (r *Registry) RefreshRoutes(ctx context.Context, keys ...string) error {
	r.cycle.Lock()
	defer r.cycle.Unlock()
	only := make(map[string]bool, len(keys))
	for _, k := range keys {
		only[k] = true
	}
	return r.refreshManifests(ctx, only)
}

// withSurface returns rt with the surface of this cycle: the route's
// overrides and the tools pinning holds back. A pin store that fails holds
// back every tool of an enforcing service it could not decide, and serves
// them otherwise (surface.Decide); the failure is logged.
func (r *Registry) withSurface(ctx context.Context, rt registry.Route, manifests map[string]*registry.Canonical, now time.Time) registry.Route {
	cfg := r.surface.Load()
	rs := &registry.RouteSurface{Overrides: cfg.Overrides(rt.Key)}
	for _, svc := range rt.ToolServices {
		pol := cfg.PolicyFor(rt.Key, svc.Name)
		if pol.Mode == "" || pol.Mode == surface.ModeOff || manifests[svc.Name] == nil {
			continue
		}
		if len(svc.AcceptedHashes) > 0 {
			acc := maps.Clone(pol.Accepted)
			if acc == nil {
				acc = map[string][]string{}
			}
			for tool, hs := range svc.AcceptedHashes {
				acc[tool] = append(slices.Clone(acc[tool]), hs...)
			}
			pol.Accepted = acc
		}
		for _, mt := range manifests[svc.Name].Tools() {
			if mt.Active != nil && !*mt.Active {
				continue
			}
			k := surface.Key{Route: rt.Key, Service: svc.Name, Tool: mt.Name}
			d := surface.DefinitionOf(mt.Name, mcp.Tool{Title: mt.Title, Description: mt.Description,
				InputSchema: mt.InputSchema, OutputSchema: mt.OutputSchema, Annotations: mt.Annotations})
			v, err := surface.Decide(ctx, r.pins, pol, k, d, now)
			if err != nil {
				r.log.Warn("pinning could not decide on a tool definition", "route", rt.Key, "service", svc.Name,
					"tool", mt.Name, "held", !v.Serve, "err", err)
			}
			if v.Changed && v.Serve {
				r.log.Debug("tool definition changed; served under pinning mode warn", "route", rt.Key,
					"service", svc.Name, "tool", mt.Name, "hash", v.Hash, "accepted", v.Accepted)
			}
			if !v.Serve {
				rs.Held = append(rs.Held, registry.HeldTool{Service: svc.Name, Tool: mt.Name, Hash: v.Hash, Accepted: v.Accepted})
			}
		}
	}
	if rs.Empty() {
		rt.Surface = nil
		return rt
	}
	rt.Surface = rs
	return rt
}

// logSurface logs what changed in a route's surface: tools newly held
// back, and the overrides that fit no tool.
func (r *Registry) logSurface(key string, prev, next *registry.Snapshot) {
	was := map[string]string{}
	if prev != nil {
		for _, q := range prev.Quarantined {
			was[q.Service+"/"+q.Tool] = q.Hash
		}
	}
	for _, q := range next.Quarantined {
		if was[q.Service+"/"+q.Tool] == q.Hash {
			continue
		}
		why := "its definition changed"
		if q.Accepted == "" {
			why = "it is new on a pinned service"
		}
		r.log.Warn("tool quarantined until an operator accepts it: "+why, slog.String("route", key),
			slog.String("service", q.Service), slog.String("tool", q.Tool), slog.String("hash", q.Hash),
			slog.String("accepted", q.Accepted))
	}
	for _, rej := range next.Rejected {
		if strings.HasPrefix(rej.Reason, "override: ") {
			r.log.Warn("tool left out: its surface override does not fit it", slog.String("route", key),
				slog.String("service", rej.Service), slog.String("tool", rej.Name), slog.String("reason", rej.Reason))
		}
	}
	for _, e := range next.SurfaceErrors {
		r.log.Warn("surface override does not apply", slog.String("route", key), slog.String("err", fmt.Sprint(e)))
	}
}
