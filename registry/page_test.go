package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/registrytest"
)

// pagedSnapshot builds a route of one Tool Service with the named tools and
// the given page size.
func pagedSnapshot(t testing.TB, pageSize int, names ...string) *Snapshot {
	t.Helper()
	r := Route{Key: "paged", ToolServices: []ToolService{{Name: "s", URL: "http://s"}}}
	if pageSize >= 0 {
		r.Catalog = &Catalog{PageSize: pageSize}
	}
	return mustBuild(t, r, map[string]*Manifest{"s": mustManifest(t, registrytest.ToolsDoc(names...))})
}

func toolNamesN(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("t%02d", i)
	}
	return names
}

// pageNames decodes a tools/list page and returns its tool names.
func pageNames(t testing.TB, page []byte) []string {
	t.Helper()
	var tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal(page, &tools); err != nil {
		t.Fatalf("page is not a JSON array of tools: %v: %s", err, page)
	}
	names := make([]string, len(tools))
	for i, tl := range tools {
		if len(tl.InputSchema) == 0 {
			t.Fatalf("tool %q has no inputSchema: %s", tl.Name, page)
		}
		names[i] = tl.Name
	}
	return names
}

// walk lists every page of s starting at cursor and returns the names in
// order and the page sizes; it fails on an invalid cursor or a walk longer
// than the catalog.
func walk(t testing.TB, s *Snapshot, cursor string) (names []string, sizes []int) {
	t.Helper()
	for range len(s.Tools) + 2 {
		page, next, ok := s.ToolsPage(cursor)
		if !ok {
			t.Fatalf("ToolsPage(%q) rejected a cursor it issued", cursor)
		}
		got := pageNames(t, page)
		names = append(names, got...)
		sizes = append(sizes, len(got))
		if next == "" {
			return names, sizes
		}
		cursor = next
	}
	t.Fatalf("walk of %d tools did not end", len(s.Tools))
	return nil, nil
}

func TestToolsPageWalk(t *testing.T) {
	all := toolNamesN(20)
	for _, tc := range []struct {
		pageSize  int
		wantSizes []int
	}{
		{0, []int{20}},
		{1, slices.Repeat([]int{1}, 20)},
		{3, []int{3, 3, 3, 3, 3, 3, 2}},
		{7, []int{7, 7, 6}},
		{10, []int{10, 10}},
		{19, []int{19, 1}},
		{20, []int{20}},
		{25, []int{20}},
		{MaxPageSize, []int{20}},
	} {
		t.Run(fmt.Sprint(tc.pageSize), func(t *testing.T) {
			s := pagedSnapshot(t, tc.pageSize, all...)
			names, sizes := walk(t, s, "")
			if !slices.Equal(names, all) {
				t.Errorf("walk = %q, want every tool once in order", names)
			}
			if !slices.Equal(sizes, tc.wantSizes) {
				t.Errorf("page sizes = %v, want %v", sizes, tc.wantSizes)
			}
			first, next, _ := s.ToolsPage("")
			if tc.pageSize == 0 || tc.pageSize >= len(all) {
				full, _, _ := pagedSnapshot(t, -1, all...).ToolsPage("")
				if string(first) != string(full) || next != "" {
					t.Errorf("one page must be the whole serialized list, without a cursor")
				}
			}
			// Pages are cut once: asking again returns the same bytes.
			again, next2, _ := s.ToolsPage("")
			if &again[0] != &first[0] || next2 != next {
				t.Errorf("first page not served from the precomputed bytes")
			}
		})
	}
	empty := pagedSnapshot(t, 5)
	if page, next, ok := empty.ToolsPage(""); !ok || string(page) != "[]" || next != "" {
		t.Errorf("empty paged route: %s %q %v", page, next, ok)
	}
}

func TestToolsPageAcrossSnapshots(t *testing.T) {
	old := pagedSnapshot(t, 5, toolNamesN(20)...)
	page1, cur, _ := old.ToolsPage("")
	seen := pageNames(t, page1) // t00..t04; the cursor's last name is t04

	tests := []struct {
		name   string
		tools  []string
		want   []string // the names the rest of the walk lists
		sizes  []int
		detail string
	}{
		{
			name:  "unchanged content, new version",
			tools: append(toolNamesN(20), "zz"),
			want:  append(toolNamesN(20)[5:], "zz"),
			sizes: []int{5, 5, 5, 1},
		},
		{
			name:   "tool added before the cursor point",
			tools:  append(toolNamesN(20), "t02a"),
			want:   toolNamesN(20)[5:],
			sizes:  []int{4, 5, 5, 1}, // realigns onto the new snapshot's pages
			detail: "t02a sorts before the cursor point and cannot be listed",
		},
		{
			name:  "tool added after the cursor point",
			tools: append(toolNamesN(20), "t07a"),
			want:  []string{"t05", "t06", "t07", "t07a", "t08", "t09", "t10", "t11", "t12", "t13", "t14", "t15", "t16", "t17", "t18", "t19"},
			sizes: []int{5, 5, 5, 1},
		},
		{
			name:  "cursor tool removed",
			tools: slices.Delete(toolNamesN(20), 4, 5),
			want:  toolNamesN(20)[5:],
			sizes: []int{1, 5, 5, 4},
		},
		{
			name:  "every later tool removed",
			tools: toolNamesN(4),
			want:  nil,
			sizes: []int{0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := pagedSnapshot(t, 5, tc.tools...)
			if next.Version == old.Version {
				t.Fatal("test needs a new snapshot version")
			}
			rest, sizes := walk(t, next, cur)
			if !slices.Equal(rest, tc.want) {
				t.Errorf("rest of the walk = %q, want %q %s", rest, tc.want, tc.detail)
			}
			if !slices.Equal(sizes, tc.sizes) {
				t.Errorf("page sizes = %v, want %v", sizes, tc.sizes)
			}
			both := append(slices.Clone(seen), rest...)
			if len(slices.Compact(slices.Clone(both))) != len(both) || !slices.IsSorted(both) {
				t.Errorf("a tool was listed twice or out of order: %q", both)
			}
		})
	}

	// Paging turned off since the cursor was issued: the rest in one page.
	off := pagedSnapshot(t, 0, append(toolNamesN(20), "zz")...)
	page, next, ok := off.ToolsPage(cur)
	if got := pageNames(t, page); !ok || next != "" || !slices.Equal(got, append(toolNamesN(20)[5:], "zz")) {
		t.Errorf("cursor on an unpaged snapshot = %q %q %v", got, next, ok)
	}
}

func TestToolsPageInvalidCursors(t *testing.T) {
	s := pagedSnapshot(t, 5, toolNamesN(12)...)
	_, valid, _ := s.ToolsPage("")
	raw, err := base64.RawURLEncoding.DecodeString(valid)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	with := func(f func(c *cursor)) string {
		c, ok := decodeCursor(valid)
		if !ok {
			t.Fatal("issued cursor does not decode")
		}
		f(&c)
		return c.encode()
	}
	for name, cur := range map[string]string{
		"not base64":             "!!!",
		"one char":               "x",
		"padded":                 valid + "=",
		"std alphabet":           strings.NewReplacer("-", "+", "_", "/").Replace(enc(append(slices.Clone(raw), 0xfb, 0xff))),
		"truncated":              valid[:6],
		"wrong format":           enc(append([]byte{2}, raw[1:]...)),
		"no name":                enc(raw[:len(raw)-3]),
		"bad name":               with(func(c *cursor) { c.last = "a b" }),
		"offset zero":            with(func(c *cursor) { c.offset = 0 }),
		"offset past the end":    with(func(c *cursor) { c.offset = 12 }),
		"offset contradicts":     with(func(c *cursor) { c.offset = 6 }),
		"name contradicts":       with(func(c *cursor) { c.last = "t07" }),
		"too long":               strings.Repeat("A", maxCursorLen+1),
		"json instead of binary": enc([]byte(`{"v":1}`)),
	} {
		if page, next, ok := s.ToolsPage(cur); ok {
			t.Errorf("%s: ToolsPage(%q) = %s %q, want invalid", name, cur, page, next)
		}
	}
	unpaged := pagedSnapshot(t, 0, toolNamesN(3)...)
	if _, _, ok := unpaged.ToolsPage("x"); ok {
		t.Error("an unpaged snapshot accepted a garbled cursor")
	}
}

func FuzzToolsPageCursor(f *testing.F) {
	s := pagedSnapshot(f, 3, toolNamesN(10)...)
	_, c, _ := s.ToolsPage("")
	for _, seed := range []string{"", c, "x", "AQAAAAAAAAAAA3QwMg", strings.Repeat("_", 40)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, cur string) {
		page, next, ok := s.ToolsPage(cur)
		if !ok {
			return
		}
		names := pageNames(t, page)
		if len(names) > 3 && cur != "" {
			t.Fatalf("page of %d tools", len(names))
		}
		if next != "" {
			if _, ok := decodeCursor(next); !ok {
				t.Fatalf("issued cursor %q does not decode", next)
			}
		}
	})
}
