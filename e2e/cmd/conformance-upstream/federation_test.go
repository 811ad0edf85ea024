package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	tmcp "github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// TestFederatedDiscovery lists both endpoints of this server with toolmesh's
// own MCP client (registry/upstream), the one the registry uses for
// protocol mcp Tool Services: the 2026-07-28 era on /stateless, and on /mcp
// (legacy only) the fallback to initialize, a session, and its DELETE.
func TestFederatedDiscovery(t *testing.T) {
	var mu sync.Mutex
	var seen []string // method, Mcp-Session-Id present
	h := newHandler(slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" session="+boolText(r.Header.Get("Mcp-Session-Id") != ""))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := upstream.New(upstream.Options{})

	names := func(items []json.RawMessage, key string) []string {
		var out []string
		for _, raw := range items {
			var m map[string]any
			_ = json.Unmarshal(raw, &m)
			out = append(out, m[key].(string))
		}
		return out
	}
	for _, tc := range []struct {
		path    string
		era     tmcp.Era
		version string
	}{
		{"/stateless", tmcp.EraStateless, tmcp.Version20260728},
		{"/mcp", tmcp.EraLegacy, tmcp.Version20251125},
	} {
		t.Run(tc.path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := c.Discover(ctx, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if l.Era != tc.era || l.ProtocolVersion != tc.version {
				t.Errorf("era %v version %q, want %v %q", l.Era, l.ProtocolVersion, tc.era, tc.version)
			}
			if tc.era == tmcp.EraLegacy && (l.Server.Name != "toolmesh-conformance-upstream" || l.Session == "") {
				t.Errorf("server %+v session %q", l.Server, l.Session)
			}
			tools := names(l.Tools, "name")
			for _, want := range suiteTools {
				if !slices.Contains(tools, want) {
					t.Errorf("tool %s not listed (got %d tools)", want, len(tools))
				}
			}
			if !slices.Contains(names(l.Resources, "uri"), "test://static-text") ||
				!slices.Contains(names(l.ResourceTemplates, "uriTemplate"), "test://template/{id}/data") ||
				!slices.Contains(names(l.Prompts, "name"), "test_simple_prompt") {
				t.Errorf("resources %v templates %v prompts %v", names(l.Resources, "uri"),
					names(l.ResourceTemplates, "uriTemplate"), names(l.Prompts, "name"))
			}
			if !l.ListChanged {
				t.Error("the server declares listChanged; the listing does not say so")
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	// The legacy session is ended with DELETE.
	if !slices.Contains(seen, "DELETE /mcp session=yes") {
		t.Errorf("no DELETE of the legacy session: %v", seen)
	}
	// Stateless requests never carry a session.
	for _, s := range seen {
		if s == "POST /stateless session=yes" {
			t.Errorf("a /stateless request carried Mcp-Session-Id: %v", seen)
			break
		}
	}
}

func boolText(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
