package registry

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/mcp"
)

func TestURITemplateMatch(t *testing.T) {
	for _, tc := range []struct {
		tmpl, uri string
		want      bool
	}{
		{"file:///{name}", "file:///a.txt", true},
		{"file:///{name}", "file:///dir/a.txt", false},
		{"file:///{+path}", "file:///dir/a.txt", true},
		{"gh://issues/{n}", "gh://issues/42", true},
		{"gh://issues/{n}", "gh://pulls/42", false},
		{"db://{table}{?limit,offset}", "db://users?limit=5", true},
		{"db://{table}{?limit}", "db://users", true},
		{"x://a.b/{id}", "x://aXb/1", false}, // literals are not patterns
		{"bad://{open", "bad://{open", false},
	} {
		if got := compileTemplate(tc.tmpl).match(tc.uri); got != tc.want {
			t.Errorf("%s matches %s = %v, want %v", tc.tmpl, tc.uri, got, tc.want)
		}
	}
}

// federatedItemsSnapshot has two MCP servers: a (prefix a_) and b, each
// with resources, a template and prompts; both templates match
// x://shared/1, only b's x://shared/1/2.
func federatedItemsSnapshot(t *testing.T, pageSize int) *Snapshot {
	t.Helper()
	route := Route{Key: "r", Catalog: &Catalog{PageSize: pageSize}, ToolServices: []ToolService{
		{Name: "a", URL: "http://a/mcp", Protocol: ProtocolMCP, ToolPrefix: "a_"},
		{Name: "b", URL: "http://b/mcp", Protocol: ProtocolMCP},
	}}
	raw := func(s ...string) []json.RawMessage {
		out := make([]json.RawMessage, len(s))
		for i, v := range s {
			out[i] = json.RawMessage(v)
		}
		return out
	}
	s, err := BuildSnapshot(route, map[string]*Manifest{
		"a": {MCP: &MCPManifest{ProtocolVersion: mcp.Version20260728, Completions: true,
			Resources:         raw(`{"uri":"x://a/1","name":"one"}`, `{"uri":"x://a/2","name":"two"}`),
			ResourceTemplates: raw(`{"uriTemplate":"x://a/items/{id}","name":"item"}`, `{"uriTemplate":"x://shared/{id}","name":"s"}`),
			Prompts:           raw(`{"name":"p1"}`, `{"name":"p2","description":"two"}`)}},
		"b": {MCP: &MCPManifest{ProtocolVersion: mcp.Version20251125,
			Resources:         raw(`{"uri":"x://b/1","name":"b"}`),
			ResourceTemplates: raw(`{"uriTemplate":"x://shared/{+rest}","name":"s2"}`),
			Prompts:           raw(`{"name":"p1"}`)}},
	}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSnapshotFederatedItems(t *testing.T) {
	s := federatedItemsSnapshot(t, 0)
	if o := s.Offers(); !o.Resources || !o.Prompts || !o.Completions {
		t.Errorf("offers %+v", o)
	}
	items, next, ok := s.ItemsPage(mcp.ItemPrompts, "")
	if !ok || next != "" || string(items) != `[{"name":"a_p1"},{"name":"a_p2","description":"two"},{"name":"p1"}]` {
		t.Errorf("prompts %s %q %v", items, next, ok)
	}
	if it := s.Prompt("a_p2"); it == nil || it.Service != "a" || it.UpstreamName != "p2" {
		t.Errorf("prompt a_p2 = %+v", it)
	}
	for _, tc := range []struct {
		uri, service string
		ambiguous    bool
	}{
		{"x://a/1", "a", false},
		{"x://a/items/9", "a", false},
		{"x://a/items/{id}", "a", false}, // completion names the template itself
		{"x://b/1", "b", false},
		{"x://shared/1", "a", false}, // both templates match: a is first

		{"x://shared/1/2", "b", false},
		{"x://none", "", false},
	} {
		it, amb := s.ResourceOwner(tc.uri)
		got := ""
		if it != nil {
			got = it.Service
		}
		if got != tc.service || amb != tc.ambiguous {
			t.Errorf("ResourceOwner(%s) = %q, %v; want %q, %v", tc.uri, got, amb, tc.service, tc.ambiguous)
		}
	}
	if _, _, ok := s.MCPService("a"); !ok {
		t.Error("MCPService(a) not found")
	}
}

func TestSnapshotFederatedItemsPaged(t *testing.T) {
	s := federatedItemsSnapshot(t, 2)
	var all []string
	cursor := ""
	for range 5 {
		items, next, ok := s.ItemsPage(mcp.ItemResources, cursor)
		if !ok {
			t.Fatalf("cursor %q refused", cursor)
		}
		var page []struct{ URI string }
		_ = json.Unmarshal(items, &page)
		if len(page) > 2 {
			t.Errorf("page of %d", len(page))
		}
		for _, p := range page {
			all = append(all, p.URI)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if strings.Join(all, " ") != "x://a/1 x://a/2 x://b/1" {
		t.Errorf("walk %v", all)
	}
	if _, _, ok := s.ItemsPage(mcp.ItemResources, "not base64!"); ok {
		t.Error("a foreign cursor was accepted")
	}
}

// TestPerClientStateOffers: servers without logging offer no per-client
// state (ADR 0022).
func TestPerClientStateOffers(t *testing.T) {
	s := federatedItemsSnapshot(t, 0)
	if o := s.Offers(); o.Logging || o.Subscribe {
		t.Errorf("offers %+v from servers without logging or subscribe", o)
	}
}
