package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolmesh/toolmesh/mcp"
)

// The snapshot side of federated MCP servers: a server's listing becomes a
// Manifest (its tools as manifest entries under their upstream names, the
// rest in Manifest.MCP), so versioning, persistence and failure isolation
// are the native ones. See docs/decisions/0006-federated-mcp-servers.md.

// MCPManifest is what a federated MCP server's listing said besides its
// tools. Items are kept as the server wrote them (compacted), for the call
// path to pass through.
type MCPManifest struct {
	ProtocolVersion   string            `json:"protocolVersion"`
	ServerName        string            `json:"serverName,omitempty"`
	ServerVersion     string            `json:"serverVersion,omitempty"`
	Instructions      string            `json:"instructions,omitempty"`
	Resources         []json.RawMessage `json:"resources,omitempty"`
	ResourceTemplates []json.RawMessage `json:"resourceTemplates,omitempty"`
	Prompts           []json.RawMessage `json:"prompts,omitempty"`
	// Completions is true when the server declared the completions
	// capability (completion/complete is routed to it).
	Completions bool `json:"completions,omitempty"`
	// Logging and Subscribe are true when the server declared logging or
	// resources.subscribe: state a legacy client keeps on its own upstream
	// session (docs/decisions/0022-legacy-client-sessions.md).
	Logging   bool `json:"logging,omitempty"`
	Subscribe bool `json:"subscribe,omitempty"`
}

// PerClientState reports whether a legacy client needs its own session on
// this server: the server keeps a log level per session, which decides
// what it sends in that client's call streams.
func (m *MCPManifest) PerClientState() bool {
	return m.Era() == mcp.EraLegacy && m.Logging
}

// Era is the protocol era the server was listed in.
func (m *MCPManifest) Era() mcp.Era { return mcp.EraOf(m.ProtocolVersion) }

// canonical returns a copy of m with every item compacted; an item that is
// not valid JSON (possible only for a manifest built in code) is dropped, so
// the copy always encodes. nil stays nil.
func (m *MCPManifest) canonical() *MCPManifest {
	if m == nil {
		return nil
	}
	c := *m
	c.Resources = compactAll(m.Resources)
	c.ResourceTemplates = compactAll(m.ResourceTemplates)
	c.Prompts = compactAll(m.Prompts)
	return &c
}

func compactAll(items []json.RawMessage) []json.RawMessage {
	if items == nil {
		return nil
	}
	out := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		var buf bytes.Buffer
		if json.Compact(&buf, it) == nil {
			out = append(out, buf.Bytes())
		}
	}
	return out
}

// Federated reports whether the tool is served by a federated MCP server.
// Such a tool has no Path: it is called with tools/call on the server's
// MCP endpoint, under UpstreamName.
func (t *Tool) Federated() bool { return t.Protocol == ProtocolMCP }

// FederatedItem is one resource, resource template or prompt of a
// federated MCP server.
type FederatedItem struct {
	Service string // the Tool Service (MCP server) that offers it
	// Key is what a client names it by: a resource's uri, a template's
	// uriTemplate, a prompt's name with the service's toolPrefix.
	Key string
	// UpstreamName is a prompt's name on its server ("" for resources).
	UpstreamName string
	Raw          json.RawMessage // the item as the server wrote it

	rank int // the service's precedence in the route (0 first)

	tmpl *uriTemplate // a resource template's matcher, compiled on first use
	once sync.Once
}

// itemKind describes one kind of federated item: where it is in the
// manifest, which member keys it, and whether toolPrefix renames it.
type itemKind struct {
	label   string
	items   func(*MCPManifest) []json.RawMessage
	key     string
	renamed bool
	dest    func(*Snapshot) *[]*FederatedItem
}

var itemKinds = []itemKind{
	{"resource", func(m *MCPManifest) []json.RawMessage { return m.Resources }, "uri", false,
		func(s *Snapshot) *[]*FederatedItem { return &s.Resources }},
	{"resource template", func(m *MCPManifest) []json.RawMessage { return m.ResourceTemplates }, "uriTemplate", false,
		func(s *Snapshot) *[]*FederatedItem { return &s.ResourceTemplates }},
	{"prompt", func(m *MCPManifest) []json.RawMessage { return m.Prompts }, "name", true,
		func(s *Snapshot) *[]*FederatedItem { return &s.Prompts }},
}

// federate collects the resources, resource templates and prompts of the
// route's MCP servers. A key several services claim goes to the first in
// rank (priority, then Portal order); the others are shadowed. A key the
// winning service itself offers twice is ambiguous: left out and listed. A
// lower-ranked template whose text a kept template of a service ranked
// before it matches, and a resource whose uri one matches, are shadowed
// too: that template would claim every URI they stand for. An item
// without its key is rejected.
func (s *Snapshot) federate(in *inputs) {
	s.Resources, s.ResourceTemplates, s.Prompts = []*FederatedItem{}, []*FederatedItem{}, []*FederatedItem{}
	s.AmbiguousItems = []string{}
	for _, kind := range itemKinds {
		claims := map[string][]*FederatedItem{}
		for _, svc := range in.route.ToolServices {
			m := in.manifests[svc.Name].MCP
			if !svc.IsMCP() || m == nil {
				continue
			}
			for i, raw := range kind.items(m) {
				var probe map[string]json.RawMessage
				var key string
				if json.Unmarshal(raw, &probe) != nil || json.Unmarshal(probe[kind.key], &key) != nil || key == "" {
					s.Rejected = append(s.Rejected, RejectedTool{Service: svc.Name, Name: entryName(raw),
						Reason: fmt.Sprintf("%s %d: %q is required", kind.label, i, kind.key)})
					continue
				}
				it := &FederatedItem{Service: svc.Name, Key: key, Raw: raw, rank: in.rank[svc.Name]}
				if kind.renamed {
					it.UpstreamName, it.Key = key, svc.ToolPrefix+key
				}
				claims[it.Key] = append(claims[it.Key], it)
			}
		}
		dest := kind.dest(s)
		for key, its := range claims {
			top := its[0]
			for _, it := range its {
				if it.rank < top.rank {
					top = it
				}
			}
			n := 0
			for _, it := range its {
				if it.Service == top.Service {
					n++
				} else {
					s.shadow(kind.label, key, it.Service, top.Service)
				}
			}
			if n > 1 {
				s.AmbiguousItems = append(s.AmbiguousItems, kind.label+" "+key)
				continue
			}
			*dest = append(*dest, top)
		}
		slices.SortFunc(*dest, func(a, b *FederatedItem) int { return strings.Compare(a.Key, b.Key) })
	}
	s.ResourceTemplates = s.shadowCovered("resource template", s.ResourceTemplates, s.ResourceTemplates, sampleURI)
	s.Resources = s.shadowCovered("resource", s.Resources, s.ResourceTemplates, func(uri string) string { return uri })
	slices.Sort(s.AmbiguousItems)
}

// shadowCovered returns items without those whose URI (uri of the key)
// a template in templates of a service ranked before theirs matches
// (recorded as shadowed). Items are weighed in rank order, so a template
// that is itself shadowed covers nothing.
func (s *Snapshot) shadowCovered(label string, items, templates []*FederatedItem, uri func(string) string) []*FederatedItem {
	byRank := slices.Clone(templates)
	slices.SortStableFunc(byRank, func(a, b *FederatedItem) int { return a.rank - b.rank })
	ordered := slices.Clone(items)
	slices.SortStableFunc(ordered, func(a, b *FederatedItem) int { return a.rank - b.rank })
	out := items[:0:0]
	lost := map[*FederatedItem]bool{}
	for _, it := range ordered {
		for _, t := range byRank {
			if t.rank >= it.rank {
				break
			}
			if !lost[t] && t.matcher().match(uri(it.Key)) {
				lost[it] = true
				s.shadow(label, it.Key, it.Service, t.Service)
				break
			}
		}
	}
	for _, it := range items {
		if !lost[it] {
			out = append(out, it)
		}
	}
	return out
}

// sampleURI expands template tmpl with a sample value per expression that
// uses what its operator allows (a slash for {+x}, a fragment for {#x},
// ...), so that a template matching the sample covers the template, as
// {+x} covers x://a/{id}, and x://a/{id} does not cover x://a/{+rest}.
func sampleURI(tmpl string) string {
	var b strings.Builder
	for tmpl != "" {
		open := strings.IndexByte(tmpl, '{')
		closing := strings.IndexByte(tmpl, '}')
		if open < 0 || closing < open {
			b.WriteString(tmpl)
			break
		}
		b.WriteString(tmpl[:open])
		expr := tmpl[open+1 : closing]
		tmpl = tmpl[closing+1:]
		op := byte(0)
		if expr != "" {
			op = expr[0]
		}
		switch op {
		case '+':
			b.WriteString("a/b")
		case '#':
			b.WriteString("#a/b")
		case '.':
			b.WriteString(".a")
		case '/':
			b.WriteString("/a/b")
		case ';':
			b.WriteString(";a=a")
		case '?':
			b.WriteString("?a=a")
		case '&':
			b.WriteString("&a=a")
		default:
			b.WriteString("a")
		}
	}
	return b.String()
}

// Bounds of the instructions a route passes on (initialize and
// server/discover): each server's and the route's own at most
// MaxServerInstructions bytes, all of them together at most
// MaxRouteInstructions. A server's longer text, or the whole, is cut on a
// rune boundary and ends with instructionsCut.
const (
	MaxServerInstructions = 8 << 10
	MaxRouteInstructions  = 32 << 10
)

const instructionsCut = "\n[cut by toolmesh]"

// routeInstructions combines the route's own instructions and, in rank
// order, each MCP server's, under a heading naming the service (and its
// toolPrefix, which the server's text does not know of).
func routeInstructions(in *inputs) string {
	var b strings.Builder
	b.WriteString(in.route.Instructions)
	svcs := slices.Clone(in.route.ToolServices)
	slices.SortStableFunc(svcs, func(x, y ToolService) int { return in.rank[x.Name] - in.rank[y.Name] })
	for _, svc := range svcs {
		m := in.manifests[svc.Name].MCP
		if !svc.IsMCP() || m == nil || strings.TrimSpace(m.Instructions) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "## MCP server %q", svc.Name)
		if svc.ToolPrefix != "" {
			fmt.Fprintf(&b, " (its tools and prompts are named with the prefix %q here)", svc.ToolPrefix)
		}
		b.WriteString("\n")
		b.WriteString(cutInstructions(m.Instructions, MaxServerInstructions))
	}
	return cutInstructions(b.String(), MaxRouteInstructions)
}

// cutInstructions returns s if it has at most limit bytes, else its
// longest prefix that ends on a rune boundary and, with instructionsCut
// appended, has at most limit bytes.
func cutInstructions(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	n := limit - len(instructionsCut)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + instructionsCut
}
