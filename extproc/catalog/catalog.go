// Package catalog is the catalog one request sees, the only [mcp.Catalog]
// extproc gives the protocol: the route's snapshot, without the tools its
// filter chain refuses by name (Visible) and those the caller's policies
// hide (View), with a span around search_tools when the request is traced.
// Every feature is a field of Catalog rather than a wrapper, so none can
// drop a method another feature needs: tracing changes what SearchTools
// records, never which methods the route answers (ADR 0018). The filtered
// listings are computed once per snapshot and kept per route (VisibleCache,
// Views), so a list stays a copy of pre-encoded pages.
package catalog

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolmesh/toolmesh/internal/tracing"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// SpanSearch is the name of the span around search_tools.
const SpanSearch = "search_tools"

// Audit is what a request's catalog decided by the caller's policies, for
// the request's audit event: a hidden tool it resolved (a call of it is
// answered as unknown), or the lists it served and what they hid.
type Audit struct {
	Hidden     string // the hidden tool a call named
	HiddenMark Mark   // why it is hidden
	Listed     bool   // a list was served
	Searched   bool   // the list was a search_tools shortlist
	ListHidden int    // what the list left out
}

// Catalog is the catalog one request sees.
type Catalog struct {
	snap  *registry.Snapshot
	vis   *Visible        // nil: the chain refuses no tool
	pol   *View           // nil: no policy governs the route's tools or items
	audit *Audit          // what the request's lists hid
	span  context.Context // non-nil: the request is traced
}

var _ mcp.Catalog = (*Catalog)(nil)

// Make is the catalog of snap seen through vis (nil: the chain refuses no
// tool) and pol (nil: no policy governs the route), recording what the
// policies hid in audit. traced, when not nil, is the context of the
// request's span: SearchTools runs in a child span. A value, so the
// request that uses it keeps it among its own state rather than
// allocating it.
func Make(snap *registry.Snapshot, vis *Visible, pol *View, audit *Audit, traced context.Context) Catalog {
	return Catalog{snap: snap, vis: vis, pol: pol, audit: audit, span: traced}
}

// ToolsPageShared implements [mcp.Catalog]: the policy view's pages, else
// the chain's, else the snapshot's. Search mode lists the meta-tools,
// which no policy hides.
func (c *Catalog) ToolsPageShared(cursor string) ([]byte, *mcp.SharedItems, string, bool) {
	if c.pol != nil && c.pol.pages != nil && !c.snap.SearchMode() {
		c.audit.Listed, c.audit.ListHidden = true, len(c.pol.hidden)
		return c.pol.toolsPage(cursor)
	}
	if c.vis != nil {
		return c.vis.toolsPage(cursor)
	}
	return c.snap.ToolsPageShared(cursor)
}

// Resolve implements [mcp.Catalog]: a hidden or refused tool is unknown.
func (c *Catalog) Resolve(name string) mcp.Resolution {
	if c.pol != nil {
		if m, hidden := c.pol.hidden[name]; hidden {
			c.audit.Hidden, c.audit.HiddenMark = name, m
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
func (c *Catalog) ParamHeaders(name string) []mcp.ParamHeader {
	if c.pol != nil {
		if _, hidden := c.pol.hidden[name]; hidden {
			return nil
		}
	}
	return c.snap.ParamHeaders(name)
}

// SearchMode implements [mcp.Catalog].
func (c *Catalog) SearchMode() bool { return c.snap.SearchMode() }

// Shortlist implements [mcp.Catalog].
func (c *Catalog) Shortlist() int { return c.snap.Shortlist() }

// SearchTools implements [mcp.Catalog]: the shortlist without the refused
// and the hidden tools, in a span when the request is traced (the query is
// an argument value and stays out of it). It is ranked over the route's
// tools first, so it may be shorter than the limit.
func (c *Catalog) SearchTools(query string, limit int) []byte {
	if c.span != nil {
		_, span := tracing.Start(c.span, SpanSearch, trace.WithAttributes(tracing.GenAIToolName.String(mcp.MetaToolSearch)))
		defer span.End()
	}
	list := c.snap.SearchTools(query, limit)
	if c.vis != nil {
		list = c.vis.filter(list)
	}
	if c.pol != nil {
		var hid int
		list, hid = c.pol.withoutHidden(list)
		c.audit.Listed, c.audit.Searched = true, true
		c.audit.ListHidden += hid
	}
	return list
}

// Offers implements [mcp.Catalog]: filters name tools only, so federated
// resources and prompts are offered as the snapshot offers them.
func (c *Catalog) Offers() mcp.Offers { return c.snap.Offers() }

// ItemsPage implements [mcp.Catalog]: the items the caller may see, paged
// and with cursors as the snapshot's (registry.Snapshot.ItemsPage).
func (c *Catalog) ItemsPage(kind mcp.ItemKind, cursor string) ([]byte, string, bool) {
	if c.pol == nil || !c.pol.items[kind].governed {
		return c.snap.ItemsPage(kind, cursor)
	}
	vi := &c.pol.items[kind]
	c.audit.Listed, c.audit.ListHidden = true, vi.hidden
	return registry.PageItems(vi.list, kind, cursor, c.snap.PageSize())
}
