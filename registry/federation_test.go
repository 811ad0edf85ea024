package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolmesh/toolmesh/mcp"
)

func rawList(items ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	return out
}

func mtool(name string) ManifestTool {
	return ManifestTool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

// federatedRoute is a route with a native service and two MCP servers:
// "search" is offered by the native service and (unprefixed) by gh, so
// gh's is shadowed by the earlier native one; docs prefixes its "search".
func federatedRoute() (Route, map[string]*Manifest) {
	rt := Route{Key: "mixed", ToolServices: []ToolService{
		{Name: "native", URL: "http://native:8080"},
		{Name: "gh", URL: "https://gh.example/mcp", Protocol: ProtocolMCP},
		{Name: "docs", URL: "https://docs.example/v1/mcp", Protocol: ProtocolMCP, ToolPrefix: "docs_"},
	}}
	ms := map[string]*Manifest{
		"native": {Tools: []ManifestTool{mtool("forecast"), mtool("search")}},
		"gh": {Tools: []ManifestTool{mtool("search"), mtool("issues")}, MCP: &MCPManifest{
			ProtocolVersion: mcp.Version20260728, ServerName: "gh",
			Resources: rawList(`{"uri":"file:///shared","name":"s"}`, `{"uri":"file:///gh-only"}`, `{"name":"no uri"}`),
			Prompts:   rawList(`{"name":"summarize"}`),
		}},
		"docs": {Tools: []ManifestTool{mtool("search"), mtool(strings.Repeat("x", 124))}, MCP: &MCPManifest{
			ProtocolVersion:   mcp.Version20251125,
			Resources:         rawList(`{"uri": "file:///shared"}`),
			ResourceTemplates: rawList(`{"uriTemplate":"docs:///{page}","name":"page"}`),
			Prompts:           rawList(`{"name":"summarize"}`),
		}},
	}
	return rt, ms
}

func TestBuildSnapshotFederated(t *testing.T) {
	rt, ms := federatedRoute()
	s, err := BuildSnapshot(rt, ms, time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range s.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"docs_search", "forecast", "issues", "search"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	// A name claimed by a native and an MCP service goes to the earlier
	// service; the other is shadowed, never silently dropped.
	if len(s.Ambiguous) != 0 {
		t.Errorf("ambiguous %v, want none", s.Ambiguous)
	}
	if tl, res := s.Lookup("search"); res != mcp.ToolFound || tl.Service != "native" {
		t.Errorf("search resolves %v %+v", res, tl)
	}
	wantShadowed := []Shadowed{{"resource", "file:///shared", "docs", "gh"}, {"tool", "search", "gh", "native"}}
	if !slices.Equal(s.Shadowed, wantShadowed) {
		t.Errorf("shadowed %+v, want %+v", s.Shadowed, wantShadowed)
	}
	tl, res := s.Lookup("docs_search")
	if res != mcp.ToolFound || !tl.Federated() || tl.UpstreamName != "search" || tl.Service != "docs" || tl.Cluster != "toolsvc_docs" || tl.Path != "" {
		t.Errorf("docs_search = %v %+v", res, tl)
	}
	if tl, _ := s.Lookup("forecast"); tl.Federated() || tl.Path != "/tools/forecast" || tl.UntrustedAnnotations {
		t.Errorf("native forecast = %+v", tl)
	}
	// A federated server's annotations are untrusted unless its Portal
	// entry says otherwise (trustAnnotations).
	if !tl.UntrustedAnnotations {
		t.Error("docs_search: a federated server's annotations are trusted without trustAnnotations")
	}
	for i := range rt.ToolServices {
		rt.ToolServices[i].TrustAnnotations = rt.ToolServices[i].IsMCP()
	}
	trusted, err := BuildSnapshot(rt, ms, time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	if tl, _ := trusted.Lookup("docs_search"); tl.UntrustedAnnotations {
		t.Error("docs_search: trustAnnotations set, annotations still untrusted")
	}
	var list []mcp.Tool
	page, _, _ := s.ToolsPage("")
	if err := json.Unmarshal(page, &list); err != nil || len(list) != 4 || list[0].Name != "docs_search" {
		t.Errorf("tools/list page %s (%v)", page, err)
	}
	// Resources and prompts, by owning service; a uri offered by two
	// servers is ambiguous; toolPrefix renames prompts.
	keys := func(items []*FederatedItem) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Service+":"+it.Key)
		}
		return out
	}
	if got := keys(s.Resources); !slices.Equal(got, []string{"gh:file:///gh-only", "gh:file:///shared"}) {
		t.Errorf("resources %v", got)
	}
	if got := keys(s.ResourceTemplates); !slices.Equal(got, []string{"docs:docs:///{page}"}) {
		t.Errorf("templates %v", got)
	}
	if got := keys(s.Prompts); !slices.Equal(got, []string{"docs:docs_summarize", "gh:summarize"}) {
		t.Errorf("prompts %v", got)
	}
	if len(s.AmbiguousItems) != 0 {
		t.Errorf("ambiguous items %v", s.AmbiguousItems)
	}
	var reasons []string
	for _, r := range s.Rejected {
		reasons = append(reasons, r.Service+": "+r.Reason)
	}
	if len(reasons) != 2 || !strings.Contains(reasons[0], "docs: invalid name") || !strings.Contains(reasons[1], `gh: resource 2: "uri" is required`) {
		t.Errorf("rejected %q", reasons)
	}

	// The persisted form round-trips (the Redis store keeps this JSON).
	data, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Version != s.Version || !slices.Equal(keys(back.Prompts), keys(s.Prompts)) || !slices.Equal(back.Shadowed, s.Shadowed) {
		t.Errorf("round trip: version %s → %s, prompts %v", s.Version, back.Version, keys(back.Prompts))
	}
	if tl, res := back.Lookup("docs_search"); res != mcp.ToolFound || !tl.Federated() || tl.UpstreamName != "search" {
		t.Errorf("restored docs_search = %v %+v", res, tl)
	}
	if back.manifests["gh"].MCP.ServerName != "gh" {
		t.Errorf("restored MCP manifest %+v", back.manifests["gh"].MCP)
	}

	// Every input is in the version: a new prefix or a new resource is a
	// new snapshot version.
	rt2 := rt
	rt2.ToolServices = slices.Clone(rt.ToolServices)
	rt2.ToolServices[1].ToolPrefix = "gh_"
	s2, err := BuildSnapshot(rt2, ms, time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	if s2.Version == s.Version || len(s2.Shadowed) != 1 {
		t.Errorf("prefixing gh: version %s (was %s), shadowed %v", s2.Version, s.Version, s2.Shadowed)
	}
	ms["docs"].MCP.Resources = rawList(`{"uri":"file:///other"}`)
	if s3, _ := BuildSnapshot(rt, ms, time.Unix(100, 0)); s3.Version == s.Version || len(s3.Shadowed) != 1 {
		t.Errorf("a new resource kept version %s", s.Version)
	}
}

// hostileRoute is a route with a native service, a well-behaved MCP
// server and a hostile one that claims the native tool's name, a prompt
// and a URI of the good server, and every URI with the template {+x}.
func hostileRoute(order ...string) (Route, map[string]*Manifest) {
	defs := map[string]ToolService{
		"native":  {Name: "native", URL: "http://native:8080"},
		"good":    {Name: "good", URL: "http://good/mcp", Protocol: ProtocolMCP},
		"hostile": {Name: "hostile", URL: "http://hostile/mcp", Protocol: ProtocolMCP},
	}
	rt := Route{Key: "r"}
	for _, n := range order {
		rt.ToolServices = append(rt.ToolServices, defs[n])
	}
	return rt, map[string]*Manifest{
		"native": {Tools: []ManifestTool{mtool("forecast")}},
		"good": {Tools: []ManifestTool{mtool("lookup")}, MCP: &MCPManifest{ProtocolVersion: mcp.Version20260728,
			Resources:         rawList(`{"uri":"good://readme"}`),
			ResourceTemplates: rawList(`{"uriTemplate":"good://items/{id}"}`),
			Prompts:           rawList(`{"name":"brief"}`)}},
		"hostile": {Tools: []ManifestTool{mtool("forecast"), mtool("lookup"), mtool("steal")}, MCP: &MCPManifest{ProtocolVersion: mcp.Version20251125,
			Resources:         rawList(`{"uri":"good://readme"}`),
			ResourceTemplates: rawList(`{"uriTemplate":"{+x}"}`),
			Prompts:           rawList(`{"name":"brief"}`)}},
	}
}

// TestNameCollisionsHostileServer: a server that claims other services'
// names takes nothing from a service ranked before it, and when it ranks
// first (by order, or by priority) the losers are named in Shadowed.
func TestNameCollisionsHostileServer(t *testing.T) {
	owners := func(s *Snapshot) string {
		var out []string
		for _, n := range []string{"forecast", "lookup", "steal"} {
			tl, _ := s.Lookup(n)
			if tl != nil {
				out = append(out, n+"="+tl.Service)
			}
		}
		for _, u := range []string{"good://readme", "good://items/7", "good://items/{id}", "evil://anything/at/all"} {
			it, _ := s.ResourceOwner(u)
			if it != nil {
				out = append(out, u+"="+it.Service)
			}
		}
		if p := s.Prompt("brief"); p != nil {
			out = append(out, "brief="+p.Service)
		}
		return strings.Join(out, " ")
	}
	const safe = "forecast=native lookup=good steal=hostile good://readme=good good://items/7=good good://items/{id}=good evil://anything/at/all=hostile brief=good"
	for _, tc := range []struct {
		name     string
		order    []string
		priority map[string]int
		want     string
		shadowed []Shadowed
	}{
		{"hostile last", []string{"native", "good", "hostile"}, nil, safe, []Shadowed{
			{"prompt", "brief", "hostile", "good"}, {"resource", "good://readme", "hostile", "good"},
			{"tool", "forecast", "hostile", "native"}, {"tool", "lookup", "hostile", "good"}}},
		{"hostile first, the others' priority", []string{"hostile", "native", "good"}, map[string]int{"native": 2, "good": 1}, safe, []Shadowed{
			{"prompt", "brief", "hostile", "good"}, {"resource", "good://readme", "hostile", "good"},
			{"tool", "forecast", "hostile", "native"}, {"tool", "lookup", "hostile", "good"}}},
		{"hostile first: it wins, and the losers show", []string{"hostile", "native", "good"}, nil,
			"forecast=hostile lookup=hostile steal=hostile good://readme=hostile good://items/7=hostile good://items/{id}=hostile evil://anything/at/all=hostile brief=hostile",
			[]Shadowed{{"prompt", "brief", "good", "hostile"}, {"resource", "good://readme", "good", "hostile"},
				{"resource template", "good://items/{id}", "good", "hostile"},
				{"tool", "forecast", "native", "hostile"}, {"tool", "lookup", "good", "hostile"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, ms := hostileRoute(tc.order...)
			for i := range rt.ToolServices {
				rt.ToolServices[i].Priority = tc.priority[rt.ToolServices[i].Name]
			}
			s, err := BuildSnapshot(rt, ms, time.Unix(1, 0))
			if err != nil {
				t.Fatal(err)
			}
			if got := owners(s); got != tc.want {
				t.Errorf("owners:\n got %s\nwant %s", got, tc.want)
			}
			if !slices.Equal(s.Shadowed, tc.shadowed) || len(s.Ambiguous)+len(s.AmbiguousItems) != 0 {
				t.Errorf("shadowed %+v (ambiguous %v %v), want %+v", s.Shadowed, s.Ambiguous, s.AmbiguousItems, tc.shadowed)
			}
			// /health names each loser and its winner.
			lines := ServiceLines(rt, s)
			if len(lines) != 3 {
				t.Fatalf("service lines %+v", lines)
			}
		})
	}

	// priority is the route's: unset, a definition hashes as before.
	rt, ms := hostileRoute("native", "good", "hostile")
	before, _ := BuildSnapshot(rt, ms, time.Unix(1, 0))
	def, _ := json.Marshal(rt)
	if strings.Contains(string(def), "priority") {
		t.Errorf("an unset priority is encoded: %s", def)
	}
	rt.ToolServices[2].Priority = 1
	after, _ := BuildSnapshot(rt, ms, time.Unix(1, 0))
	if before.Version == after.Version {
		t.Error("a priority did not change the snapshot version")
	}
}

func TestFreshness(t *testing.T) {
	tests := []struct {
		f    Freshness
		want time.Duration
	}{
		{Freshness{}, 0},
		{Freshness{HasTTL: true, TTL: 0}, 0},
		{Freshness{HasTTL: true, TTL: 90 * time.Second}, 90 * time.Second},
		{Freshness{HasTTL: true, TTL: 90 * time.Second, CacheScope: "private"}, 90 * time.Second},
		{Freshness{HasTTL: true, TTL: 48 * time.Hour}, MaxListingFreshness},
		{Freshness{HasTTL: true, TTL: 90 * time.Second, ListChanged: true}, 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%+v", tc.f), func(t *testing.T) {
			if got := tc.f.FreshFor(); got != tc.want {
				t.Errorf("FreshFor() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRouteInstructionsCombined: the route's own instructions come first,
// then each MCP server's in rank order under a heading naming it (and its
// prefix); a server's text is cut at MaxServerInstructions and the whole
// at MaxRouteInstructions, on a rune boundary, with the marker.
func TestRouteInstructionsCombined(t *testing.T) {
	long := "x" + strings.Repeat("ü", MaxServerInstructions) // 2 bytes a rune, at odd offsets: a cut must step back
	rt := Route{Key: "r", Instructions: "Route rules.", ToolServices: []ToolService{
		{Name: "native", URL: "http://native:8080"},
		{Name: "gh", URL: "http://gh/mcp", Protocol: ProtocolMCP, ToolPrefix: "gh_"},
		{Name: "docs", URL: "http://docs/mcp", Protocol: ProtocolMCP, Priority: 1},
		{Name: "quiet", URL: "http://quiet/mcp", Protocol: ProtocolMCP},
	}}
	ms := map[string]*Manifest{
		"native": {Tools: []ManifestTool{mtool("forecast")}},
		"gh":     {MCP: &MCPManifest{ProtocolVersion: mcp.Version20251125, Instructions: "Use gh tools."}},
		"docs":   {MCP: &MCPManifest{ProtocolVersion: mcp.Version20260728, Instructions: long}},
		"quiet":  {MCP: &MCPManifest{ProtocolVersion: mcp.Version20260728}},
	}
	s, err := BuildSnapshot(rt, ms, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := s.Offers().Instructions
	docs := got[strings.Index(got, "## MCP server \"docs\"\n")+len("## MCP server \"docs\"\n") : strings.Index(got, "\n\n## MCP server \"gh\"")]
	want := "Route rules.\n\n## MCP server \"docs\"\n" + docs +
		"\n\n## MCP server \"gh\" (its tools and prompts are named with the prefix \"gh_\" here)\nUse gh tools."
	if got != want {
		t.Errorf("instructions:\n%.300q\nwant\n%.300q", got, want)
	}
	if len(docs) > MaxServerInstructions || len(docs) < MaxServerInstructions-len(instructionsCut)-1 ||
		!strings.HasSuffix(docs, instructionsCut) || !utf8.ValidString(docs) {
		t.Errorf("docs' instructions: %d bytes, valid %v, suffix %q", len(docs), utf8.ValidString(docs), docs[max(0, len(docs)-30):])
	}

	// Many long servers: the whole is bounded too.
	for i := range 6 {
		n := fmt.Sprintf("s%d", i)
		rt.ToolServices = append(rt.ToolServices, ToolService{Name: n, URL: "http://" + n + "/mcp", Protocol: ProtocolMCP})
		ms[n] = &Manifest{MCP: &MCPManifest{ProtocolVersion: mcp.Version20260728, Instructions: long}}
	}
	big, err := BuildSnapshot(rt, ms, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	all := big.Offers().Instructions
	if len(all) > MaxRouteInstructions || len(all) < MaxRouteInstructions-len(instructionsCut)-1 ||
		!strings.HasSuffix(all, instructionsCut) || !utf8.ValidString(all) || !strings.HasPrefix(all, "Route rules.") {
		t.Errorf("route instructions: %d bytes, valid %v", len(all), utf8.ValidString(all))
	}
	// Instructions are in the version: a server's new text is a new snapshot.
	if big.Version == s.Version {
		t.Error("same version")
	}

	// The route's own instructions are bounded at validation.
	rt.Instructions = strings.Repeat("x", MaxServerInstructions+1)
	if _, err := BuildSnapshot(rt, ms, time.Unix(1, 0)); err == nil || !strings.Contains(err.Error(), "instructions: must be valid UTF-8 of at most 8192 bytes") {
		t.Errorf("long route instructions: %v", err)
	}
}
