package registry

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/mcp"
)

// catalogEntities are the entities of the generated search catalog, by
// domain.
var catalogEntities = [][2]string{
	{"billing", "invoice"}, {"crm", "customer"}, {"support", "ticket"}, {"hr", "employee"},
	{"logistics", "shipment"}, {"catalog", "product"}, {"calendar", "meeting"},
}

// catalogManifest is a manifest of 35 generated tools, {domain}_{entity}_{action},
// with titles on every other tool and schemas that use the entity's words.
func catalogManifest() string {
	actions := [][2]string{
		{"create", "Create a new %s."}, {"get", "Get one %s by its id."}, {"list", "List %ss, newest first."},
		{"update", "Update the fields of a %s."}, {"delete", "Delete a %s for good."},
	}
	var entries []string
	i := 0
	for _, de := range catalogEntities {
		domain, entity := de[0], de[1]
		for _, a := range actions {
			name := domain + "_" + entity + "_" + a[0]
			title := ""
			if i%2 == 0 {
				title = fmt.Sprintf(`"title":"%s %s",`, strings.ToUpper(a[0][:1])+a[0][1:], entity)
			}
			props := fmt.Sprintf(`{"%s_id":{"type":"string","description":"The %s's id."}}`, entity, entity)
			if a[0] == "create" || a[0] == "list" {
				props = `{"name":{"type":"string"},"limit":{"type":"integer"}}`
			}
			entries = append(entries, fmt.Sprintf(
				`{"name":%q,%s"description":%q,"inputSchema":{ "type" : "object", "properties":%s},`+
					`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":%t},"icons":[{"src":"https://x/i.png"}],"version":"1"}`,
				name, title, fmt.Sprintf(a[1], entity), props, a[0] == "get" || a[0] == "list"))
			i++
		}
	}
	return `{"tools":[` + strings.Join(entries, ",") + `]}`
}

// searchSnapshot builds a route of one Tool Service serving manifest with
// the given catalog.
func searchSnapshot(t testing.TB, c *Catalog, manifest string) *Snapshot {
	t.Helper()
	r := Route{Key: "big", Catalog: c, ToolServices: []ToolService{{Name: "s", URL: "http://s"}}}
	return mustBuild(t, r, map[string]*Manifest{"s": mustManifest(t, manifest)})
}

// shortlistNames decodes a SearchTools answer into its names.
func shortlistNames(t testing.TB, b []byte) []string {
	t.Helper()
	var list []struct{ Name string }
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("shortlist is not a JSON array: %v: %s", err, b)
	}
	names := make([]string, len(list))
	for i, e := range list {
		names[i] = e.Name
	}
	return names
}

// TestSearchModeOnlyWhenConfigured: the index exists only for a route in
// search mode; a full-mode route keeps its listing and searches nothing.
func TestSearchModeOnlyWhenConfigured(t *testing.T) {
	for _, tc := range []struct {
		name    string
		catalog *Catalog
		search  bool
	}{
		{"no catalog", nil, false},
		{"full", &Catalog{Mode: "full", PageSize: 10}, false},
		{"default mode", &Catalog{Shortlist: 3}, false},
		{"search", &Catalog{Mode: "search"}, true},
		{"search with paging", &Catalog{Mode: "search", PageSize: 3, Shortlist: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := searchSnapshot(t, tc.catalog, catalogManifest())
			if s.SearchMode() != tc.search || (s.search != nil) != tc.search {
				t.Fatalf("SearchMode() = %v, want %v", s.SearchMode(), tc.search)
			}
			if len(s.Tools) != 35 {
				t.Fatalf("%d tools, want 35 in either mode", len(s.Tools))
			}
			if !tc.search {
				if got := string(s.SearchTools("create an invoice", 0)); got != "[]" {
					t.Errorf("SearchTools outside search mode = %s", got)
				}
				if s.Shortlist() != 0 {
					t.Errorf("Shortlist() = %d outside search mode", s.Shortlist())
				}
				names, _ := walk(t, s, "")
				if len(names) != 35 {
					t.Errorf("full-mode listing has %d tools", len(names))
				}
				return
			}
			if s.search.index == nil || s.search.index.Len() != 35 {
				t.Fatalf("a fresh search-mode build has no index over its 35 tools")
			}
			want := tc.catalog.Shortlist
			if want == 0 {
				want = 5
			}
			if s.Shortlist() != want || s.search.index.Shortlist() != want {
				t.Errorf("Shortlist() = %d, index %d, want %d", s.Shortlist(), s.search.index.Shortlist(), want)
			}
		})
	}
}

// TestSearchModeListing: tools/list of a search-mode route is exactly the
// two meta-tools, whose schemas compile, on one page whatever the page size.
func TestSearchModeListing(t *testing.T) {
	s := searchSnapshot(t, &Catalog{Mode: "search", PageSize: 3, Shortlist: 7}, catalogManifest())
	page, next, ok := s.ToolsPage("")
	if !ok || next != "" {
		t.Fatalf("ToolsPage(\"\") = ok %v next %q, want one page", ok, next)
	}
	want, _ := mcp.EncodeTools(mcp.MetaTools(7))
	if string(page) != string(want) {
		t.Fatalf("listing = %s, want the meta-tools %s", page, want)
	}
	var tools []struct {
		Name         string          `json:"name"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(page, &tools); err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "call_tool" || tools[1].Name != "search_tools" {
		t.Fatalf("listing names = %+v, want call_tool, search_tools", tools)
	}
	for _, tl := range tools {
		if _, err := compileInputSchema(tl.InputSchema); err != nil {
			t.Errorf("%s inputSchema does not compile: %v", tl.Name, err)
		}
	}
	out, err := compileInputSchema(tools[1].OutputSchema)
	if err != nil {
		t.Fatalf("search_tools outputSchema does not compile: %v", err)
	}
	// The answer search_tools gives conforms to its declared outputSchema.
	result := `{"tools":` + string(s.SearchTools("list the customers", 0)) + `}`
	if msgs := validateArguments(out, json.RawMessage(result)); len(msgs) > 0 {
		t.Errorf("search result %s fails outputSchema: %v", result, msgs)
	}
	in, _ := compileInputSchema(tools[1].InputSchema)
	for args, valid := range map[string]bool{
		`{"query":"x"}`: true, `{"query":"x","limit":7}`: true, `{"query":"x","limit":8}`: false,
		`{"query":""}`: false, `{}`: false, `{"query":"x","other":1}`: false,
	} {
		if got := len(validateArguments(in, json.RawMessage(args))) == 0; got != valid {
			t.Errorf("search_tools inputSchema on %s: valid %v, want %v", args, got, valid)
		}
	}
	for _, c := range []string{"x", cursor{tag: s.tag, offset: 3, last: s.Tools[2].Name}.encode()} {
		if _, _, ok := s.ToolsPage(c); ok {
			t.Errorf("search-mode listing accepted cursor %q", c)
		}
	}
}

// TestSearchToolsShortlist: hits carry exactly the declared name, title,
// description and inputSchema of the tools, best first, at most the
// shortlist; a query nothing matches gives an empty array.
func TestSearchToolsShortlist(t *testing.T) {
	s := searchSnapshot(t, &Catalog{Mode: "search", Shortlist: 3}, catalogManifest())
	for _, tc := range []struct {
		query string
		limit int
		first string
		max   int
	}{
		{"create an invoice", 0, "billing_invoice_create", 3},
		{"delete an employee", 1, "hr_employee_delete", 1},
		{"list shipments", 10, "logistics_shipment_list", 3},
		{"order a large pepperoni pizza", 0, "", 0},
		{"", 0, "", 0},
	} {
		t.Run(tc.query, func(t *testing.T) {
			b := s.SearchTools(tc.query, tc.limit)
			names := shortlistNames(t, b)
			if len(names) > tc.max {
				t.Fatalf("%d hits %v, want at most %d", len(names), names, tc.max)
			}
			if tc.first == "" {
				if string(b) != "[]" {
					t.Fatalf("SearchTools(%q) = %s, want []", tc.query, b)
				}
				return
			}
			if len(names) == 0 || names[0] != tc.first {
				t.Fatalf("SearchTools(%q) = %v, want %s first", tc.query, names, tc.first)
			}
			var entries []map[string]json.RawMessage
			if err := json.Unmarshal(b, &entries); err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				var name string
				_ = json.Unmarshal(e["name"], &name)
				tool, res := s.Lookup(name)
				if res != mcp.ToolFound {
					t.Fatalf("hit %q is not a tool of the route", name)
				}
				want := []string{"description", "inputSchema", "name"}
				if tool.Title != "" {
					want = append(want, "title")
				}
				if got := slices.Sorted(maps.Keys(e)); !slices.Equal(got, want) {
					t.Errorf("hit %s has fields %v, want exactly %v", name, got, want)
				}
				if string(e["inputSchema"]) != string(tool.InputSchema) {
					t.Errorf("hit %s inputSchema = %s, want the declared %s", name, e["inputSchema"], tool.InputSchema)
				}
				var title, desc string
				_ = json.Unmarshal(e["title"], &title)
				_ = json.Unmarshal(e["description"], &desc)
				if title != tool.Title || desc != tool.Description {
					t.Errorf("hit %s title/description = %q/%q, want %q/%q", name, title, desc, tool.Title, tool.Description)
				}
			}
		})
	}
}

// TestSearchModeReservedNames: in search mode a real tool named like a
// meta-tool is rejected (one name, one meaning); in full mode it is an
// ordinary tool.
func TestSearchModeReservedNames(t *testing.T) {
	doc := registrytest.ToolsDoc("call_tool", "search_tools", "weather")
	full := searchSnapshot(t, nil, doc)
	if got := toolNames(full); !slices.Equal(got, []string{"call_tool", "search_tools", "weather"}) {
		t.Fatalf("full mode tools = %v", got)
	}
	s := searchSnapshot(t, &Catalog{Mode: "search"}, doc)
	if got := toolNames(s); !slices.Equal(got, []string{"weather"}) {
		t.Fatalf("search mode tools = %v, want [weather]", got)
	}
	if len(s.Rejected) != 2 || s.Rejected[0].Name != "call_tool" || s.Rejected[1].Name != "search_tools" ||
		s.Rejected[0].Reason != reservedName {
		t.Fatalf("rejected = %+v", s.Rejected)
	}
	for _, name := range []string{"call_tool", "search_tools"} {
		if s.Resolve(name) != mcp.ToolUnknown {
			t.Errorf("%s resolves to a real tool in search mode", name)
		}
	}
	// Reserved names are not shadowed either, even when claimed twice.
	r := Route{Key: "big", Catalog: &Catalog{Mode: "search"}, ToolServices: []ToolService{{Name: "a", URL: "http://a"}, {Name: "b", URL: "http://b"}}}
	two := mustBuild(t, r, map[string]*Manifest{"a": mustManifest(t, doc), "b": mustManifest(t, registrytest.ToolsDoc("call_tool", "weather"))})
	if len(two.Shadowed) != 1 || two.Shadowed[0].Name != "weather" || len(two.Rejected) != 3 {
		t.Errorf("shadowed = %+v, rejected = %+v", two.Shadowed, two.Rejected)
	}
}

// TestSearchModeAmbiguousNotSearchable: an ambiguous name cannot be called,
// so search never offers it.
func TestSearchModeAmbiguousNotSearchable(t *testing.T) {
	r := Route{Key: "big", Catalog: &Catalog{Mode: "search"}, ToolServices: []ToolService{{Name: "b", URL: "http://b"}, {Name: "a", URL: "http://a"}}}
	s := mustBuild(t, r, map[string]*Manifest{
		"a": mustManifest(t, catalogManifest()),
		"b": mustManifest(t, registrytest.ToolsDoc("billing_invoice_create", "billing_invoice_create")),
	})
	names := shortlistNames(t, s.SearchTools("create an invoice", 0))
	if len(names) == 0 || slices.Contains(names, "billing_invoice_create") {
		t.Errorf("shortlist %v: want other invoice tools, not the ambiguous billing_invoice_create", names)
	}
}

// TestSearchModeRestore: a restored snapshot keeps search mode and its
// rejections, and builds its index on the first search rather than at once.
func TestSearchModeRestore(t *testing.T) {
	s := searchSnapshot(t, &Catalog{Mode: "search", Shortlist: 2}, catalogManifest())
	data, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back := mustUnmarshal(t, data)
	if !back.SearchMode() || back.Shortlist() != 2 {
		t.Fatalf("restored snapshot: SearchMode %v, Shortlist %d", back.SearchMode(), back.Shortlist())
	}
	if back.search.index != nil {
		t.Errorf("restore built the index before any search")
	}
	a, b := s.SearchTools("update a ticket", 0), back.SearchTools("update a ticket", 0)
	if string(a) != string(b) || len(shortlistNames(t, a)) == 0 {
		t.Errorf("restored search %s, fresh %s", b, a)
	}
	if back.search.index == nil {
		t.Errorf("no index after the first search")
	}
	p1, _, _ := s.ToolsPage("")
	p2, _, _ := back.ToolsPage("")
	if string(p1) != string(p2) {
		t.Errorf("restored listing differs")
	}
}

// BenchmarkSearchTools measures one search_tools answer on the generated
// catalog: ranking plus encoding the shortlist.
func BenchmarkSearchTools(b *testing.B) {
	s := searchSnapshot(b, &Catalog{Mode: "search"}, catalogManifest())
	b.ReportAllocs()
	for b.Loop() {
		s.SearchTools("create an invoice for a customer", 0)
	}
}

// FuzzSearchTools: any query gives a JSON array of at most the shortlist
// tools of the route, each with a non-empty inputSchema.
func FuzzSearchTools(f *testing.F) {
	for _, q := range []string{"create an invoice", "", "order a pizza", `"quoted" 42 x@y.z`, "\xff\xfe", strings.Repeat("invoice ", 300)} {
		f.Add(q, 0)
		f.Add(q, 2)
	}
	s := searchSnapshot(f, &Catalog{Mode: "search", Shortlist: 3}, catalogManifest())
	f.Fuzz(func(t *testing.T, query string, limit int) {
		b := s.SearchTools(query, limit)
		var list []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(b, &list); err != nil || list == nil {
			t.Fatalf("SearchTools(%q, %d) = %s: %v", query, limit, b, err)
		}
		if len(list) > 3 {
			t.Fatalf("%d hits, shortlist 3", len(list))
		}
		for _, e := range list {
			if s.Resolve(e.Name) != mcp.ToolFound || len(e.InputSchema) == 0 {
				t.Fatalf("hit %+v", e)
			}
		}
	})
}

// TestSearchModeSynonyms: the route's own synonyms reach its tools, also
// after a restore from the store.
func TestSearchModeSynonyms(t *testing.T) {
	const q = "list waybills"
	plain := searchSnapshot(t, &Catalog{Mode: "search"}, catalogManifest())
	if names := shortlistNames(t, plain.SearchTools(q, 0)); len(names) != 0 {
		t.Fatalf("without synonyms: %v, want nothing", names)
	}
	s := searchSnapshot(t, &Catalog{Mode: "search", Synonyms: []string{"shipment waybill"}}, catalogManifest())
	data, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for name, snap := range map[string]*Snapshot{"fresh": s, "restored": mustUnmarshal(t, data)} {
		if names := shortlistNames(t, snap.SearchTools(q, 0)); len(names) == 0 || names[0] != "logistics_shipment_list" {
			t.Errorf("%s: SearchTools(%q) = %v, want logistics_shipment_list first", name, q, names)
		}
	}
}
