package registry

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/surface"
)

// ManifestTool is one entry of a Tool Service manifest (docs/contracts/toolservice.md), as declared.
type ManifestTool struct {
	Name         string          `json:"name"`
	Version      string          `json:"version,omitempty"`
	Active       *bool           `json:"active,omitempty"` // absent means active
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Icons        json.RawMessage `json:"icons,omitempty"`
	Path         string          `json:"path,omitempty"` // default /tools/{name}
}

// Manifest is a Tool Service's manifest.
type Manifest struct {
	Tools []ManifestTool `json:"tools"`
	// Invalid lists the entries that could not be decoded as tools; they are
	// reported as rejected, and the rest of the manifest is used.
	Invalid []InvalidEntry `json:"invalid,omitempty"`
	// MCP is set for a federated MCP server: what its listing said besides
	// the tools (which are in Tools, under their upstream names).
	MCP *MCPManifest `json:"mcp,omitempty"`
}

// Tool is one validated, active tool of a route snapshot, resolved to the Tool
// Service that serves it.
type Tool struct {
	mcp.Tool
	Version string
	Service string // Tool Service name
	Cluster string // wire.ClusterName(Service)
	Path    string // invoke path relative to the Tool Service URL, leading "/"
	// BasePath is the Tool Service URL's own path prefix ("" for none); the
	// upstream :path is BasePath+Path.
	BasePath string
	// ParamHeaders are the inputSchema's x-mcp-header parameters (SEP-2243).
	ParamHeaders []mcp.ParamHeader
	// Protocol is ProtocolMCP for a tool of a federated MCP server ("" for
	// a native one, whose Path and BasePath route the call); UpstreamName
	// is then its name on that server (Name without the service's toolPrefix).
	Protocol     string
	UpstreamName string
	// UntrustedAnnotations: the tool is a federated server's whose Portal
	// entry does not set trustAnnotations; the gateway does not act on its
	// annotations (they are still listed to clients as the server wrote them).
	UntrustedAnnotations bool
	// Origin is set on a virtual tool (a route's override, surface_build.go):
	// its name on the route before the override. Args then rewrites a
	// call's arguments into the real tool's (nil: unchanged).
	Origin string
	Args   *surface.Arguments

	// schema is the tool's input schema and, once compiled, its validator;
	// nil for a hand-made Tool, which then checks nothing.
	schema *schemaEntry
}

// ValidateArguments checks args (a JSON object) against the tool's input
// schema and returns the validation messages; none means valid. A snapshot
// restored from a Store compiles each schema on its first use; should that
// fail (the schema was valid when the snapshot was built, but this build of
// toolmesh disagrees), the call gets a message saying so rather than going
// through unchecked, until the next refresh rebuilds the route.
func (t *Tool) ValidateArguments(args json.RawMessage) []string {
	if t.schema == nil {
		return nil
	}
	sch, err := t.schema.compiled()
	if err != nil {
		return []string{"arguments cannot be checked: the tool's inputSchema does not compile: " + err.Error()}
	}
	return validateArguments(sch, args)
}

// RejectedTool is a manifest entry left out of a snapshot, with the reason.
type RejectedTool struct {
	Service string `json:"service"`
	Name    string `json:"name"`
	Reason  string `json:"reason"`
}

// Snapshot is one route's immutable, validated tool catalog. It is built
// all-or-nothing from the manifests of all the route's Tool Services and
// swapped in atomically; a request captures one Snapshot and uses it for all
// its phases.
type Snapshot struct {
	Route     string
	Version   string    // content hash of the inputs
	FetchedAt time.Time // when the manifests were fetched
	// Tools are the active, unambiguous tools, sorted by name.
	Tools []*Tool
	// Ambiguous are names left out because the service that wins them
	// (ToolService.Priority, then Portal order) has two active entries.
	Ambiguous []string
	// Shadowed are the entries left out because a service ranked before
	// theirs claims the same name (tools, prompts, resources, templates).
	Shadowed []Shadowed
	Rejected []RejectedTool
	// Quarantined are the tools held back by pinning until an operator
	// accepts their definition; SurfaceErrors the route's overrides that
	// name no tool of the route (surface_build.go).
	Quarantined   []QuarantinedTool
	SurfaceErrors []string
	quarantined   map[string]bool

	// What federated MCP servers offer besides tools, kept for the call
	// path: resources (by uri), resource templates (by uriTemplate) and
	// prompts (by prefixed name), each sorted by key. A key offered by
	// several services goes to the first in rank; one that its winning
	// service offers twice is left out and listed in AmbiguousItems.
	Resources         []*FederatedItem
	ResourceTemplates []*FederatedItem
	Prompts           []*FederatedItem
	AmbiguousItems    []string
	// instructions are the route's and its servers' instructions,
	// combined and bounded (routeInstructions).
	instructions string

	byName    map[string]*Tool
	ambiguous map[string]bool
	toolsJSON *mcp.SharedItems // the tools/list array, serialized once

	// Paging (ADR 0004): pageSize from the route's effective catalog (0: no
	// paging), pages cut on first use, tag naming this snapshot in cursors.
	pageSize int
	pages    pages
	tag      [cursorTagLen]byte
	// search is set when the route's catalog mode is "search": tools/list
	// then lists the meta-tools, and search_tools ranks Tools.
	search *searchMode

	// The inputs, kept so the snapshot can be persisted and rebuilt
	// (MarshalJSON, UnmarshalSnapshot): the normalized route definition and
	// the canonical manifest of each of its Tool Services.
	def       Route
	manifests map[string]*Manifest
	// inputs is the content hash the refresher compares: Version, except
	// for a snapshot restored from an older format, whose Version is the
	// stored one (hashed the old way) and stays so while it is served.
	inputs string
	// builds are the shared per-service builds Tools come from, held so
	// that routes rebuilt later find them (see serviceCache).
	builds []*serviceBuild
	// lazy: restored by UnmarshalSnapshot, schemas compiled on first use.
	lazy bool
	// schemaErrs are the entries rejected because their input schema did not
	// compile, by manifest index: persisted so that a restore, which
	// compiles nothing, rejects exactly the same entries.
	schemaErrs map[string][]schemaError
}

// Shadowed is an entry left out of a route because Winner, a Tool Service
// ranked before Service (ToolService.Priority, then the route's order),
// claims its name: a tool, prompt, resource (by uri, or matched by the
// winner's template) or resource template (by uriTemplate, or whose text
// the winner's template matches).
type Shadowed struct {
	Kind    string `json:"kind"` // tool, prompt, resource, resource template
	Name    string `json:"name"`
	Service string `json:"service"`
	Winner  string `json:"winner"`
}

// shadow records that service's kind entry name lost to winner.
func (s *Snapshot) shadow(kind, name, service, winner string) {
	s.Shadowed = append(s.Shadowed, Shadowed{Kind: kind, Name: name, Service: service, Winner: winner})
}

// sortShadowed sorts Shadowed and drops repeats (two versions of one
// losing tool are one line).
func (s *Snapshot) sortShadowed() {
	slices.SortFunc(s.Shadowed, func(a, b Shadowed) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name), strings.Compare(a.Service, b.Service))
	})
	s.Shadowed = slices.Compact(s.Shadowed)
}

// serviceRanks places each service of r in precedence order: higher
// Priority first, then the earlier in toolServices.
func serviceRanks(r Route) map[string]int {
	idx := make([]int, len(r.ToolServices))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(r.ToolServices[b].Priority, r.ToolServices[a].Priority) })
	rank := make(map[string]int, len(idx))
	for n, i := range idx {
		rank[r.ToolServices[i].Name] = n
	}
	return rank
}

// schemaError is one entry of a manifest rejected for its input schema.
type schemaError struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

var _ mcp.Catalog = (*Snapshot)(nil)

// Lookup returns the tool that name resolves to and how it resolved.
func (s *Snapshot) Lookup(name string) (*Tool, mcp.Resolution) {
	if t, ok := s.byName[name]; ok {
		return t, mcp.ToolFound
	}
	if s.ambiguous[name] {
		return nil, mcp.ToolAmbiguous
	}
	if s.quarantined[name] {
		return nil, mcp.ToolQuarantined
	}
	return nil, mcp.ToolUnknown
}

// Resolve implements [mcp.Catalog].
func (s *Snapshot) Resolve(name string) mcp.Resolution {
	_, r := s.Lookup(name)
	return r
}

// ParamHeaders implements [mcp.Catalog].
func (s *Snapshot) ParamHeaders(name string) []mcp.ParamHeader {
	if t, ok := s.byName[name]; ok {
		return t.ParamHeaders
	}
	return nil
}

// lazyFailed reports whether a restored snapshot found, on first use, a
// schema that does not compile: the refresher then rebuilds it even though
// its inputs did not change, so the tool is rejected rather than failing
// every call.
func (s *Snapshot) lazyFailed() bool {
	if !s.lazy {
		return false
	}
	for _, t := range s.Tools {
		if t.schema != nil && t.schema.failed.Load() {
			return true
		}
	}
	return false
}
