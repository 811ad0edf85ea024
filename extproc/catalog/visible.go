package catalog

import (
	"encoding/json"
	"sync"

	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// A route whose filter chain refuses tools by name (tool_acl) must not list
// them either. Visible is a snapshot's tools seen through such a
// chain: its pages are the snapshot's pages with the refused tools left
// out, computed once per (snapshot, chain) pair and kept per route, so
// tools/list stays a copy of pre-serialized bytes. Cursors are the
// snapshot's own, so a page may be shorter than the page size, never
// longer. A request reads it through its Catalog.
type Visible struct {
	snap  *registry.Snapshot
	chain *filters.Chain
	pages map[string]visiblePage // snapshot cursor → filtered page
}

type visiblePage struct {
	tools *mcp.SharedItems
	next  string
}

// VisibleCache keeps the latest Visible of each route; the zero value is
// empty and ready.
type VisibleCache struct{ byRoute sync.Map } // route key → *Visible

// Tools returns the route's tools as chain lets them be seen; nil when
// chain hides no tool.
func (v *VisibleCache) Tools(route string, snap *registry.Snapshot, chain *filters.Chain) *Visible {
	if snap == nil || !chain.HidesTools() {
		return nil
	}
	if c, ok := v.byRoute.Load(route); ok {
		if vc := c.(*Visible); vc.snap == snap && vc.chain == chain {
			return vc
		}
	}
	vc := newVisible(snap, chain)
	v.byRoute.Store(route, vc) // a racing builder stores an equal value
	return vc
}

func newVisible(snap *registry.Snapshot, chain *filters.Chain) *Visible {
	vc := &Visible{snap: snap, chain: chain, pages: map[string]visiblePage{}}
	for cursor, seen := "", map[string]bool{}; !seen[cursor]; {
		seen[cursor] = true
		tools, shared, next, ok := snap.ToolsPageShared(cursor)
		if !ok {
			break
		}
		// A page the chain hides nothing of stays the snapshot's, with
		// its compressed form.
		if kept := vc.filter(tools); shared == nil || len(kept) != len(tools) {
			shared = mcp.NewSharedItems(kept)
		}
		vc.pages[cursor] = visiblePage{tools: shared, next: next}
		if next == "" {
			break
		}
		cursor = next
	}
	return vc
}

// filter removes the refused tools from a JSON array of tool objects.
func (c *Visible) filter(tools []byte) []byte {
	var all []json.RawMessage
	if json.Unmarshal(tools, &all) != nil {
		return tools
	}
	kept := make([]json.RawMessage, 0, len(all))
	for _, t := range all {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &named) == nil && c.chain.ToolAllowed(named.Name) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(all) {
		return tools
	}
	out, err := json.Marshal(kept)
	if err != nil {
		return tools
	}
	return out
}

// toolsPage is the snapshot's page without the refused tools: the pages
// of the snapshot's own cursors are shared.
func (c *Visible) toolsPage(cursor string) ([]byte, *mcp.SharedItems, string, bool) {
	if p, ok := c.pages[cursor]; ok {
		return p.tools.JSON, p.tools, p.next, true
	}
	// A cursor of an older snapshot: the snapshot decides, then filter.
	tools, next, ok := c.snap.ToolsPage(cursor)
	if !ok {
		return nil, nil, "", false
	}
	return c.filter(tools), nil, next, true
}

// refused says whether the chain refuses name; the meta-tools are never
// refused.
func (c *Visible) refused(name string) bool {
	return !c.chain.ToolAllowed(name) && !mcp.IsMetaToolName(name)
}
