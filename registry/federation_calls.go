package registry

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/toolmesh/toolmesh/mcp"
)

// The call side of federated MCP servers: what the extproc server needs to
// answer the list methods from the snapshot and to route resources/read,
// prompts/get and completion/complete to the owning server. See
// docs/decisions/0006-federated-mcp-servers.md.

// MCPService returns the definition of the route's Tool Service name when
// it is a federated MCP server, and what its listing said.
func (s *Snapshot) MCPService(name string) (ToolService, *MCPManifest, bool) {
	for _, svc := range s.def.ToolServices {
		if svc.Name == name && svc.IsMCP() {
			m := s.manifests[name]
			if m == nil || m.MCP == nil {
				return svc, nil, false
			}
			return svc, m.MCP, true
		}
	}
	return ToolService{}, nil, false
}

// Offers implements [mcp.Catalog].
func (s *Snapshot) Offers() mcp.Offers {
	o := mcp.Offers{Resources: len(s.Resources)+len(s.ResourceTemplates) > 0, Prompts: len(s.Prompts) > 0, Instructions: s.instructions}
	for _, svc := range s.def.ToolServices {
		m := s.manifests[svc.Name]
		if !svc.IsMCP() || m == nil || m.MCP == nil {
			continue
		}
		o.Completions = o.Completions || m.MCP.Completions
		if m.MCP.Era() == mcp.EraLegacy {
			// Subscriptions ride on the client's own session, which a
			// server gets for its log level (PerClientState).
			o.Logging = o.Logging || m.MCP.Logging
			o.Subscribe = o.Subscribe || m.MCP.Subscribe && m.MCP.Logging && len(s.Resources)+len(s.ResourceTemplates) > 0
		}
	}
	return o
}

// Items are the snapshot's federated items of kind, in key order.
func (s *Snapshot) Items(kind mcp.ItemKind) []*FederatedItem {
	switch kind {
	case mcp.ItemResources:
		return s.Resources
	case mcp.ItemResourceTemplates:
		return s.ResourceTemplates
	}
	return s.Prompts
}

// ItemsPage implements [mcp.Catalog]. Items are in key order; a
// cursor is the last key of the previous page (base64url), so a walk that
// spans a refresh continues after the last item the client saw, as
// tools/list cursors do. Prompts carry the name clients see (with the
// service's toolPrefix).
func (s *Snapshot) ItemsPage(kind mcp.ItemKind, cursor string) ([]byte, string, bool) {
	return PageItems(s.Items(kind), kind, cursor, s.PageSize())
}

// PageItems serves one page of items (in key order) after cursor, with at
// most pageSize items (0: all), and the cursor of the next page ("" on the
// last). ok is false for a cursor this did not issue. It is the paging of
// [Snapshot.ItemsPage], shared with views that page a subset of the items.
func PageItems(items []*FederatedItem, kind mcp.ItemKind, cursor string, pageSize int) (page []byte, next string, ok bool) {
	start := 0
	if cursor != "" {
		last, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(cursor) > maxCursorLen || len(last) == 0 {
			return nil, "", false
		}
		start = sort.Search(len(items), func(i int) bool { return items[i].Key > string(last) })
	}
	end := len(items)
	if pageSize > 0 && start+pageSize < end {
		end = start + pageSize
	}
	b := []byte{'['}
	for i, it := range items[start:end] {
		if i > 0 {
			b = append(b, ',')
		}
		raw := []byte(it.Raw)
		if kind == mcp.ItemPrompts && it.Key != it.UpstreamName {
			name, _ := json.Marshal(it.Key)
			raw = mcp.SetMember(raw, "name", name)
		}
		b = append(b, raw...)
	}
	b = append(b, ']')
	if end < len(items) {
		next = base64.RawURLEncoding.EncodeToString([]byte(items[end-1].Key))
	}
	return b, next, true
}

func findItem(items []*FederatedItem, key string) *FederatedItem {
	i := sort.Search(len(items), func(i int) bool { return items[i].Key >= key })
	if i < len(items) && items[i].Key == key {
		return items[i]
	}
	return nil
}

// Prompt returns the prompt clients name name.
func (s *Snapshot) Prompt(name string) *FederatedItem { return findItem(s.Prompts, name) }

// ResourceOwner returns the item that owns uri: among the resource of
// that URI, the resource template whose uriTemplate is the URI itself (as
// completion/complete names it) and the templates that match it, the one
// of the service first in rank (priority, then Portal order), and within
// one service in that order. So a template such as {+x} of a server ranked
// after another never takes that server's URIs. ambiguous is always false
// under this rule; it stays for callers that report it.
func (s *Snapshot) ResourceOwner(uri string) (it *FederatedItem, ambiguous bool) {
	var best *FederatedItem
	consider := func(c *FederatedItem) {
		if c != nil && (best == nil || c.rank < best.rank) {
			best = c
		}
	}
	consider(findItem(s.Resources, uri))
	consider(findItem(s.ResourceTemplates, uri))
	for _, t := range s.ResourceTemplates {
		if (best == nil || t.rank < best.rank) && t.matcher().match(uri) {
			best = t
		}
	}
	return best, false
}

func (it *FederatedItem) matcher() *uriTemplate {
	it.once.Do(func() { it.tmpl = compileTemplate(it.Key) })
	return it.tmpl
}

// uriTemplate matches URIs against an RFC 6570 template: literals must be
// equal, each expression matches what its operator can expand to.
type uriTemplate struct{ re *regexp.Regexp }

func (t *uriTemplate) match(uri string) bool { return t.re != nil && t.re.MatchString(uri) }

func compileTemplate(tmpl string) *uriTemplate {
	var b strings.Builder
	b.WriteString("^")
	for tmpl != "" {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(tmpl))
			break
		}
		b.WriteString(regexp.QuoteMeta(tmpl[:open]))
		closing := strings.IndexByte(tmpl[open:], '}')
		if closing < 0 {
			return &uriTemplate{} // not a template: matches nothing
		}
		expr := tmpl[open+1 : open+closing]
		tmpl = tmpl[open+closing+1:]
		op := byte(0)
		if expr != "" && strings.IndexByte("+#./;?&", expr[0]) >= 0 {
			op = expr[0]
		}
		switch op {
		case '+':
			b.WriteString(`.*`)
		case '#':
			b.WriteString(`(#.*)?`)
		case '.':
			b.WriteString(`(\.[^/?#]*)*`)
		case '/':
			b.WriteString(`(/[^/?#]*)*`)
		case ';':
			b.WriteString(`(;[^/?#]*)*`)
		case '?', '&':
			b.WriteString(`([?&][^#]*)?`)
		default:
			b.WriteString(`[^/?#]*`)
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return &uriTemplate{}
	}
	return &uriTemplate{re: re}
}
