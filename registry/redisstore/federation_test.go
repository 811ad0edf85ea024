package redisstore

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

func rawList(items ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	return out
}

func mtool(name string) registry.ManifestTool {
	return registry.ManifestTool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

// federatedRoute is a route with a native service and two MCP servers:
// "search" is offered by the native service and (unprefixed) by gh, so it
// is ambiguous; docs prefixes its "search" and is not. (The registry's
// federation tests build the same route.)
func federatedRoute() (registry.Route, map[string]*registry.Manifest) {
	rt := registry.Route{Key: "mixed", ToolServices: []registry.ToolService{
		{Name: "native", URL: "http://native:8080"},
		{Name: "gh", URL: "https://gh.example/mcp", Protocol: registry.ProtocolMCP},
		{Name: "docs", URL: "https://docs.example/v1/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "docs_"},
	}}
	ms := map[string]*registry.Manifest{
		"native": {Tools: []registry.ManifestTool{mtool("forecast"), mtool("search")}},
		"gh": {Tools: []registry.ManifestTool{mtool("search"), mtool("issues")}, MCP: &registry.MCPManifest{
			ProtocolVersion: mcp.Version20260728, ServerName: "gh",
			Resources: rawList(`{"uri":"file:///shared","name":"s"}`, `{"uri":"file:///gh-only"}`, `{"name":"no uri"}`),
			Prompts:   rawList(`{"name":"summarize"}`),
		}},
		"docs": {Tools: []registry.ManifestTool{mtool("search"), mtool(strings.Repeat("x", 124))}, MCP: &registry.MCPManifest{
			ProtocolVersion:   mcp.Version20251125,
			Resources:         rawList(`{"uri": "file:///shared"}`),
			ResourceTemplates: rawList(`{"uriTemplate":"docs:///{page}","name":"page"}`),
			Prompts:           rawList(`{"name":"summarize"}`),
		}},
	}
	return rt, ms
}

// TestFederatedSnapshotRedis: a snapshot with federated tools, resources
// and prompts survives the Redis store.
func TestFederatedSnapshotRedis(t *testing.T) {
	srv := startRedis(t, "")
	st := newRedisStore(t, srv, RedisOptions{})
	rt, ms := federatedRoute()
	s, err := registry.BuildSnapshot(rt, ms, time.Unix(100, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Save(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load(t.Context(), "mixed")
	if err != nil || got == nil {
		t.Fatalf("Load() = %v, %v", got, err)
	}
	if got.Version != s.Version || !slices.Equal(toolNames(got), toolNames(s)) || !slices.Equal(got.Ambiguous, s.Ambiguous) ||
		len(got.Resources) != len(s.Resources) || len(got.ResourceTemplates) != len(s.ResourceTemplates) || len(got.Prompts) != len(s.Prompts) {
		t.Fatalf("loaded %s %v, saved %s %v", got.Version, toolNames(got), s.Version, toolNames(s))
	}
	if tl, res := got.Lookup("docs_search"); res != mcp.ToolFound || !tl.Federated() || tl.UpstreamName != "search" {
		t.Errorf("loaded docs_search = %v %+v", res, tl)
	}
	if p := got.Prompts[0]; p.Service != "docs" || p.Key != "docs_summarize" || p.UpstreamName != "summarize" || string(p.Raw) != `{"name":"summarize"}` {
		t.Errorf("loaded prompt %+v", p)
	}
}
