package refresher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/fetch"
)

// TestRegistryListingFailureLog: the warning that the previous routes are
// kept appears only when there are routes to keep.
func TestRegistryListingFailureLog(t *testing.T) {
	var logs bytes.Buffer
	src := &switchSource{err: errors.New("portal down")}
	r := New(Options{Source: src, Fetcher: downFetcher{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); strings.Contains(s, "keeping the previous routes") || !strings.Contains(s, "no routes yet") {
		t.Errorf("failure with no routes logged:\n%s", s)
	}
	logs.Reset()
	src.err = nil
	_ = r.Refresh(t.Context())
	if len(r.Routes()) != 1 {
		t.Fatalf("routes after a good listing: %+v", r.Routes())
	}
	src.err = errors.New("portal down")
	_ = r.Refresh(t.Context())
	if s := logs.String(); !strings.Contains(s, "keeping the previous routes") || len(r.Routes()) != 1 {
		t.Errorf("failure with routes logged:\n%s", s)
	}
}

type downFetcher struct{}

func (downFetcher) Fetch(context.Context, registry.ToolService) (*registry.Manifest, error) {
	return nil, errors.New("tool service down")
}

// switchSource lists one route, or fails with err; refreshes are serialized.
type switchSource struct{ err error }

func (s *switchSource) List(context.Context) (*registry.Listing, error) {
	if s.err != nil {
		return nil, s.err
	}
	return registry.DecodeListing([]byte(`{"routes":[{"key":"a","toolServices":[{"name":"s","url":"http://a"}]}]}`))
}

// TestRegistryKeepsRoutesOnInvalidFile: after start-up, a Portal file that
// turns invalid keeps the last good routes, and the health detail names the
// file, line and column.
func TestRegistryKeepsRoutesOnInvalidFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "portal.yaml")
	write := func(doc string) {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://s\n")
	r := New(Options{Source: fetch.NewFileSource(path), Fetcher: downFetcher{}})
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	write("routes:\n- key: a\n  toolServices:\n  - name: s\n    url: gopher://s\n")
	err := r.Refresh(t.Context())
	if routes := r.Routes(); len(routes) != 1 || routes[0].ToolServices[0].URL != "http://s" {
		t.Errorf("routes after an invalid file = %+v, want the last good ones", routes)
	}
	if want := path + `:5:5: route "a": tool service "s": url:`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Refresh() = %v, want %q", err, want)
	}
}

func TestCatalogOverrides(t *testing.T) {
	e := newEnv(t)
	e.alphaDef = strings.Replace(e.alphaDef, `"key":"alpha"`, `"key":"alpha","catalog":{"mode":"full","pageSize":2}`, 1)
	e.portal.Set(registrytest.ModeOK, e.listing(e.alphaDef, e.betaDef))

	for _, tc := range []struct {
		overrides map[string]registry.Catalog
		want      []string
	}{
		{map[string]registry.Catalog{"alpha": {PageSize: -1}}, []string{`catalog override for route "alpha": catalog.pageSize: -1 is not in 0..10000`}},
		{map[string]registry.Catalog{"alpha": {PageSize: 10001, Shortlist: 51, Mode: "x"}}, []string{"catalog.pageSize", "catalog.shortlist", `catalog.mode: "x"`}},
		{map[string]registry.Catalog{"Alpha": {}}, []string{`catalog override for "Alpha": route key must match`}},
	} {
		err := e.reg.SetCatalogOverrides(tc.overrides)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("SetCatalogOverrides(%v) = %v, want %q", tc.overrides, err, w)
			}
		}
	}

	e.start(t)
	// The page size a snapshot serves: its first page's, when it has more.
	pageSize := func(path string) int {
		_, s, _ := e.reg.Lookup(path)
		if _, sizes := walk(t, s, ""); len(sizes) > 1 {
			return sizes[0]
		}
		return 0
	}
	pageSizes := func() (alpha, beta int) { return pageSize("/mcp/alpha"), pageSize("/tools/beta") }
	if a, b := pageSizes(); a != 2 || b != 0 {
		t.Fatalf("page sizes from the Portal = %d %d, want 2 0", a, b)
	}
	_, alpha, _ := e.reg.Lookup("/mcp/alpha")
	if names, sizes := walk(t, alpha, ""); !slices.Equal(names, []string{"a_one", "a_two", "s_one"}) || !slices.Equal(sizes, []int{2, 1}) {
		t.Errorf("alpha walk = %q %v", names, sizes)
	}

	// The override replaces the Portal's catalog object as a whole.
	if err := e.reg.SetCatalogOverrides(map[string]registry.Catalog{"alpha": {}, "beta": {PageSize: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a, b := pageSizes(); a != 0 || b != 1 {
		t.Errorf("page sizes with overrides = %d %d, want 0 1", a, b)
	}
	if rs := e.reg.Routes(); rs[0].Catalog == nil || rs[0].Catalog.Mode != "" || rs[1].Catalog.PageSize != 1 {
		t.Errorf("Routes() must show the effective catalog: %+v %+v", rs[0].Catalog, rs[1].Catalog)
	}
	if err := e.reg.SetCatalogOverrides(nil); err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a, b := pageSizes(); a != 2 || b != 0 {
		t.Errorf("page sizes without overrides = %d %d, want the Portal's 2 0", a, b)
	}
}

// walk lists every page of s starting at cursor and returns the names in
// order and the page sizes; it fails on an invalid cursor or a walk longer
// than the catalog.
func walk(t testing.TB, s *registry.Snapshot, cursor string) (names []string, sizes []int) {
	t.Helper()
	for range len(s.Tools) + 2 {
		page, next, ok := s.ToolsPage(cursor)
		if !ok {
			t.Fatalf("ToolsPage(%q) rejected a cursor it issued", cursor)
		}
		var tools []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(page, &tools); err != nil {
			t.Fatalf("page is not a JSON array of tools: %v: %s", err, page)
		}
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		sizes = append(sizes, len(tools))
		if next == "" {
			return names, sizes
		}
		cursor = next
	}
	t.Fatalf("walk of %d tools did not end", len(s.Tools))
	return nil, nil
}
