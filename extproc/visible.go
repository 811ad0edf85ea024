package extproc

import (
	"encoding/json"
	"sync"

	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// A route whose filter chain refuses tools by name (tool_acl) must not list
// them either. visibleCatalog is a snapshot seen through such a chain: its
// pages are the snapshot's pages with the refused tools left out, computed
// once per (snapshot, chain) pair and kept per route, so tools/list stays a
// copy of pre-serialized bytes. Cursors are the snapshot's own, so a page may
// be shorter than the page size, never longer.
type visibleCatalog struct {
	snap  *registry.Snapshot
	chain *filters.Chain
	pages map[string]visiblePage // snapshot cursor → filtered page
}

type visiblePage struct {
	tools *mcp.SharedItems
	next  string
}

var (
	_ mcp.SharedPageCatalog = (*visibleCatalog)(nil)
	_ mcp.ParamHeaderSource = (*visibleCatalog)(nil)
	_ mcp.MetaToolCatalog   = (*visibleCatalog)(nil)
	_ mcp.FederatedCatalog  = (*visibleCatalog)(nil)
)

// visibleCatalogs caches the latest visibleCatalog of each route.
type visibleCatalogs struct{ byRoute sync.Map } // route key → *visibleCatalog

// catalog returns what a request of route should see: the snapshot itself,
// or the snapshot through chain when chain hides tools.
func (v *visibleCatalogs) catalog(route string, snap *registry.Snapshot, chain *filters.Chain) mcp.Catalog {
	if snap == nil || !chain.HidesTools() {
		return snap
	}
	if c, ok := v.byRoute.Load(route); ok {
		if vc := c.(*visibleCatalog); vc.snap == snap && vc.chain == chain {
			return vc
		}
	}
	vc := newVisibleCatalog(snap, chain)
	v.byRoute.Store(route, vc) // a racing builder stores an equal value
	return vc
}

func newVisibleCatalog(snap *registry.Snapshot, chain *filters.Chain) *visibleCatalog {
	vc := &visibleCatalog{snap: snap, chain: chain, pages: map[string]visiblePage{}}
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
func (c *visibleCatalog) filter(tools []byte) []byte {
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

// ToolsPage implements [mcp.Catalog.ToolsPage].
func (c *visibleCatalog) ToolsPage(cursor string) ([]byte, string, bool) {
	tools, _, next, ok := c.ToolsPageShared(cursor)
	return tools, next, ok
}

// ToolsPageShared implements [mcp.SharedPageCatalog]: the pages of the
// snapshot's own cursors are shared.
func (c *visibleCatalog) ToolsPageShared(cursor string) ([]byte, *mcp.SharedItems, string, bool) {
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

// Resolve implements [mcp.Catalog.Resolve]: a refused tool is unknown.
func (c *visibleCatalog) Resolve(name string) mcp.Resolution {
	if !c.chain.ToolAllowed(name) && !mcp.IsMetaToolName(name) {
		return mcp.ToolUnknown
	}
	return c.snap.Resolve(name)
}

// ParamHeaders implements [mcp.ParamHeaderSource].
func (c *visibleCatalog) ParamHeaders(name string) []mcp.ParamHeader {
	return c.snap.ParamHeaders(name)
}

// SearchMode implements [mcp.MetaToolCatalog].
func (c *visibleCatalog) SearchMode() bool { return c.snap.SearchMode() }

// Shortlist implements [mcp.MetaToolCatalog].
func (c *visibleCatalog) Shortlist() int { return c.snap.Shortlist() }

// SearchTools implements [mcp.MetaToolCatalog]: refused tools are never
// offered.
func (c *visibleCatalog) SearchTools(query string, limit int) []byte {
	return c.filter(c.snap.SearchTools(query, limit))
}

// Offers implements [mcp.FederatedCatalog]: filters name tools only, so
// federated resources and prompts are the snapshot's.
func (c *visibleCatalog) Offers() mcp.Offers { return c.snap.Offers() }

// ItemsPage implements [mcp.FederatedCatalog].
func (c *visibleCatalog) ItemsPage(kind mcp.ItemKind, cursor string) ([]byte, string, bool) {
	return c.snap.ItemsPage(kind, cursor)
}
