package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
// "search" is offered by the native service and (unprefixed) by gh, so it
// is ambiguous; docs prefixes its "search" and is not.
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
	if want := []string{"docs_search", "forecast", "issues"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	// A name claimed by a native and an MCP service is ambiguous, never picked.
	if !slices.Equal(s.Ambiguous, []string{"search"}) {
		t.Errorf("ambiguous %v, want [search]", s.Ambiguous)
	}
	if _, res := s.Lookup("search"); res != mcp.ToolAmbiguous {
		t.Errorf("search resolves %v", res)
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
	if err := json.Unmarshal(page, &list); err != nil || len(list) != 3 || list[0].Name != "docs_search" {
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
	if got := keys(s.Resources); !slices.Equal(got, []string{"gh:file:///gh-only"}) {
		t.Errorf("resources %v", got)
	}
	if got := keys(s.ResourceTemplates); !slices.Equal(got, []string{"docs:docs:///{page}"}) {
		t.Errorf("templates %v", got)
	}
	if got := keys(s.Prompts); !slices.Equal(got, []string{"docs:docs_summarize", "gh:summarize"}) {
		t.Errorf("prompts %v", got)
	}
	if !slices.Equal(s.AmbiguousItems, []string{"resource file:///shared"}) {
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
	if back.Version != s.Version || !slices.Equal(keys(back.Prompts), keys(s.Prompts)) || !slices.Equal(back.AmbiguousItems, s.AmbiguousItems) {
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
	if s2.Version == s.Version || len(s2.Ambiguous) != 0 {
		t.Errorf("prefixing gh: version %s (was %s), ambiguous %v", s2.Version, s.Version, s2.Ambiguous)
	}
	ms["docs"].MCP.Resources = rawList(`{"uri":"file:///other"}`)
	if s3, _ := BuildSnapshot(rt, ms, time.Unix(100, 0)); s3.Version == s.Version || len(s3.AmbiguousItems) != 0 {
		t.Errorf("a new resource kept version %s", s.Version)
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
