package extproc

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolmesh/toolmesh/internal/tracing"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// requestCatalog is the catalog one request sees, and the only
// [mcp.Catalog] extproc gives the protocol: the route's snapshot, without
// the tools its filter chain refuses by name (visible.go) and those the
// caller's policies hide (policy.go), with a span around search_tools when
// the request is traced. Every feature is a field here rather than a
// wrapper, so none can drop a method another feature needs: tracing changes
// what SearchTools records, never which methods the route answers.
type requestCatalog struct {
	snap *registry.Snapshot
	vis  *visibleTools   // nil: the chain refuses no tool
	pol  *policyView     // nil: no policy governs the route's tools or items
	st   *policyState    // what the request's lists hid, for the audit
	span context.Context // non-nil: the request is traced
}

var _ mcp.Catalog = (*requestCatalog)(nil)

// catalog returns the request's catalog, preparing its caller's policy
// view: authentication has set x.caller by then (request-headers phase).
func (x *request) catalog() *requestCatalog {
	c := &requestCatalog{snap: x.snap, st: &x.pol}
	if x.rt.Filters != nil {
		// One chain for the whole request; tools it refuses by name are
		// neither listed nor resolvable.
		x.chain = x.rt.Filters.Chain(x.routeKey)
		c.vis = x.s.visible.tools(x.routeKey, x.snap, x.chain)
	}
	x.startPolicies()
	if x.pol.route != nil {
		c.pol = x.view(x.chain)
	}
	if x.tr.span != nil {
		c.span = x.ctx
	}
	return c
}

// ToolsPageShared implements [mcp.Catalog]: the policy view's pages, else
// the chain's, else the snapshot's. Search mode lists the meta-tools,
// which no policy hides.
func (c *requestCatalog) ToolsPageShared(cursor string) ([]byte, *mcp.SharedItems, string, bool) {
	if c.pol != nil && c.pol.pages != nil && !c.snap.SearchMode() {
		c.st.listed, c.st.listHidden = true, len(c.pol.hidden)
		return c.pol.toolsPage(cursor)
	}
	if c.vis != nil {
		return c.vis.toolsPage(cursor)
	}
	return c.snap.ToolsPageShared(cursor)
}

// Resolve implements [mcp.Catalog]: a hidden or refused tool is unknown.
func (c *requestCatalog) Resolve(name string) mcp.Resolution {
	if c.pol != nil {
		if m, hidden := c.pol.hidden[name]; hidden {
			c.st.hidden, c.st.hiddenDec = name, m
			return mcp.ToolUnknown
		}
	}
	if c.vis != nil && c.vis.refused(name) {
		return mcp.ToolUnknown
	}
	return c.snap.Resolve(name)
}

// ParamHeaders implements [mcp.Catalog]: none for a hidden tool, as for an
// unknown one.
func (c *requestCatalog) ParamHeaders(name string) []mcp.ParamHeader {
	if c.pol != nil {
		if _, hidden := c.pol.hidden[name]; hidden {
			return nil
		}
	}
	return c.snap.ParamHeaders(name)
}

// SearchMode implements [mcp.Catalog].
func (c *requestCatalog) SearchMode() bool { return c.snap.SearchMode() }

// Shortlist implements [mcp.Catalog].
func (c *requestCatalog) Shortlist() int { return c.snap.Shortlist() }

// SearchTools implements [mcp.Catalog]: the shortlist without the refused
// and the hidden tools, in a span when the request is traced (the query is
// an argument value and stays out of it). It is ranked over the route's
// tools first, so it may be shorter than the limit.
func (c *requestCatalog) SearchTools(query string, limit int) []byte {
	if c.span != nil {
		_, span := tracing.Start(c.span, spanSearch, trace.WithAttributes(tracing.GenAIToolName.String(mcp.MetaToolSearch)))
		defer span.End()
	}
	list := c.snap.SearchTools(query, limit)
	if c.vis != nil {
		list = c.vis.filter(list)
	}
	if c.pol != nil {
		var hid int
		list, hid = c.pol.withoutHidden(list)
		c.st.listed, c.st.searched = true, true
		c.st.listHidden += hid
	}
	return list
}

// Offers implements [mcp.Catalog]: filters name tools only, so federated
// resources and prompts are offered as the snapshot offers them.
func (c *requestCatalog) Offers() mcp.Offers { return c.snap.Offers() }

// ItemsPage implements [mcp.Catalog]: the items the caller may see, paged
// and with cursors as the snapshot's (registry.Snapshot.ItemsPage).
func (c *requestCatalog) ItemsPage(kind mcp.ItemKind, cursor string) ([]byte, string, bool) {
	if c.pol == nil || !c.pol.items[kind].governed {
		return c.snap.ItemsPage(kind, cursor)
	}
	vi := &c.pol.items[kind]
	c.st.listed, c.st.listHidden = true, vi.hidden
	return registry.PageItems(vi.list, kind, cursor, c.snap.PageSize())
}
