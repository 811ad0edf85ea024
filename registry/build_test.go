package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

func mustManifest(t testing.TB, doc string) *Manifest {
	t.Helper()
	m, err := DecodeManifest([]byte(doc))
	if err != nil {
		t.Fatalf("DecodeManifest(%s) = %v", doc, err)
	}
	return m
}

func fixtureManifest(t testing.TB, name string) *Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "registry", name))
	if err != nil {
		t.Fatal(err)
	}
	return mustManifest(t, string(data))
}

func coreRoute() Route {
	return Route{Key: "core", ToolServices: []ToolService{
		{Name: "weather", URL: "http://weather:8080"},
		{Name: "calc", URL: "https://calc/api/"},
	}}
}

const calcManifest = `{"tools":[
 {"name":"add","version":"2","inputSchema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]},"path":"/v2/add"},
 {"name":"zeta","inputSchema":{"type":"object"}}
]}`

func mustBuild(t testing.TB, r Route, ms map[string]*Manifest) *Snapshot {
	t.Helper()
	s, err := BuildSnapshot(r, ms, t0)
	if err != nil {
		t.Fatalf("BuildSnapshot() = %v", err)
	}
	return s
}

func toolNames(s *Snapshot) []string {
	var names []string
	for _, t := range s.Tools {
		names = append(names, t.Name)
	}
	return names
}

func TestBuildSnapshot(t *testing.T) {
	s := mustBuild(t, coreRoute(), map[string]*Manifest{
		"weather": fixtureManifest(t, "manifest-weather.json"),
		"calc":    mustManifest(t, calcManifest),
	})
	if got, want := toolNames(s), []string{"add", "get_alerts", "get_forecast", "zeta"}; !slices.Equal(got, want) {
		t.Fatalf("tools = %q, want %q (sorted, inactive and invalid left out)", got, want)
	}
	if s.Route != "core" || !s.FetchedAt.Equal(t0) || len(s.Version) != 32 {
		t.Errorf("snapshot header = %q %v %q", s.Route, s.FetchedAt, s.Version)
	}
	wantRejected := []RejectedTool{
		{Service: "weather", Name: "bad name!", Reason: "invalid name: want 1-128 characters of A-Z a-z 0-9 _ . -"},
		{Service: "weather", Name: "no_schema", Reason: "inputSchema is required"},
	}
	if !reflect.DeepEqual(s.Rejected, wantRejected) {
		t.Errorf("rejected = %+v, want %+v", s.Rejected, wantRejected)
	}
	if len(s.Ambiguous) != 0 {
		t.Errorf("ambiguous = %q", s.Ambiguous)
	}

	add, res := s.Lookup("add")
	if res != mcp.ToolFound {
		t.Fatalf("Lookup(add) = %v", res)
	}
	if add.Service != "calc" || add.Cluster != "toolsvc_calc" || add.Path != "/v2/add" || add.BasePath != "/api" || add.Version != "2" {
		t.Errorf("add resolved to %+v", add)
	}
	alerts, _ := s.Lookup("get_alerts")
	if alerts.Path != "/tools/get_alerts" || alerts.BasePath != "" || alerts.Cluster != wire.ClusterName("weather") {
		t.Errorf("get_alerts resolved to %+v", alerts)
	}
	if z, _ := s.Lookup("zeta"); z.Description != "" || z.Title != "" {
		t.Errorf("empty description/title must stay empty, got %q %q", z.Description, z.Title)
	}
	for _, name := range []string{"old_forecast", "bad name!", "no_schema", "nope"} {
		if _, res := s.Lookup(name); res != mcp.ToolUnknown {
			t.Errorf("Lookup(%q) = %v, want unknown", name, res)
		}
		if s.Resolve(name) != mcp.ToolUnknown {
			t.Errorf("Resolve(%q) != unknown", name)
		}
	}

	page, next, ok := s.ToolsPage("")
	if !ok || next != "" {
		t.Fatalf("ToolsPage(\"\") = %v %q", ok, next)
	}
	var listed []map[string]json.RawMessage
	if err := json.Unmarshal(page, &listed); err != nil {
		t.Fatalf("tools JSON %s: %v", page, err)
	}
	if len(listed) != 4 || string(listed[0]["name"]) != `"add"` || string(listed[3]["name"]) != `"zeta"` {
		t.Errorf("tools JSON order: %s", page)
	}
	if _, has := listed[3]["description"]; has {
		t.Errorf("zeta has an invented description: %s", page)
	}
	if _, _, ok := s.ToolsPage("x"); ok {
		t.Error("ToolsPage with a cursor must be invalid without paging")
	}
}

func TestBuildSnapshotRawSchemasPreserved(t *testing.T) {
	schema := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"q":{"$ref":"#/$defs/q","description":"a <b> & c"}},"additionalProperties":false,"$defs":{"q":{"type":"string","pattern":"^[a-z]+$"}},"x-vendor":{"z":1,"a":2}}`
	out := `{"type":"object","properties":{"r":{"type":"string"}}}`
	ann := `{"readOnlyHint":true,"title":"é \u00e9"}`
	icons := `[{"src":"https://x/i.png","mimeType":"image/png"}]`
	m := mustManifest(t, `{"tools":[{"name":"q","title":"Q","inputSchema":`+schema+`,"outputSchema":`+out+`,"annotations":`+ann+`,"icons":`+icons+`}]}`)
	s := mustBuild(t, Route{Key: "r", ToolServices: []ToolService{{Name: "s", URL: "http://s"}}}, map[string]*Manifest{"s": m})
	page, _, _ := s.ToolsPage("")
	want := `[{"name":"q","title":"Q","inputSchema":` + schema + `,"outputSchema":` + out + `,"annotations":` + ann + `,"icons":` + icons + `}]`
	if string(page) != want {
		t.Fatalf("tools JSON\n got %s\nwant %s", page, want)
	}

	// Insignificant whitespace is dropped; everything else (key order,
	// escapes) is kept, and the version does not change.
	pretty := mustManifest(t, "{\"tools\":[{\"name\":\"q\",\"title\":\"Q\",\"inputSchema\":"+indent(t, schema)+",\"outputSchema\":"+out+",\"annotations\":"+ann+",\"icons\":"+icons+"}]}")
	s2 := mustBuild(t, Route{Key: "r", ToolServices: []ToolService{{Name: "s", URL: "http://s"}}}, map[string]*Manifest{"s": pretty})
	if page2, _, _ := s2.ToolsPage(""); string(page2) != want {
		t.Errorf("pretty-printed schema\n got %s\nwant %s", page2, want)
	}
	if s2.Version != s.Version {
		t.Errorf("whitespace changed the version: %s vs %s", s.Version, s2.Version)
	}
}

func indent(t *testing.T, s string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestBuildSnapshotRejections(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		name string
		tool ManifestTool
		want string // "" means accepted
	}{
		{"empty name", ManifestTool{InputSchema: obj}, "invalid name"},
		{"name with space", ManifestTool{Name: "a b", InputSchema: obj}, "invalid name"},
		{"name with slash", ManifestTool{Name: "a/b", InputSchema: obj}, "invalid name"},
		{"name 129 chars", ManifestTool{Name: strings.Repeat("n", 129), InputSchema: obj}, "invalid name"},
		{"name 128 chars", ManifestTool{Name: strings.Repeat("n", 128), InputSchema: obj}, ""},
		{"name with dot dash underscore", ManifestTool{Name: "A.b-c_9", InputSchema: obj}, ""},
		{"no inputSchema", ManifestTool{Name: "t"}, "inputSchema is required"},
		{"null inputSchema", ManifestTool{Name: "t", InputSchema: json.RawMessage(`null`)}, "inputSchema is required"},
		{"inputSchema array", ManifestTool{Name: "t", InputSchema: json.RawMessage(`[]`)}, "inputSchema: must be a JSON object"},
		{"inputSchema true", ManifestTool{Name: "t", InputSchema: json.RawMessage(`true`)}, "inputSchema: must be a JSON object"},
		{"inputSchema no type", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"properties":{}}`)}, `inputSchema: must have "type": "object"`},
		{"inputSchema type string", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"string"}`)}, `must have "type": "object"`},
		{"inputSchema type list", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":["object"]}`)}, `must have "type": "object"`},
		{"inputSchema invalid JSON", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":`)}, "invalid JSON in inputSchema"},
		{"inputSchema against meta-schema", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":5}`)}, "not valid against metaschema"},
		{"remote ref", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`)}, `external reference "https://example.com/a.json" is not allowed`},
		{"file ref", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`)}, "external reference"},
		{"relative ref", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","$ref":"other.json"}`)}, "external reference"},
		{"relative ref under $id", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"$id":"http://x.test/a.json","type":"object","properties":{"a":{"$ref":"b.json"}}}`)}, `external reference "http://x.test/b.json"`},
		{"unknown meta-schema", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"$schema":"https://example.com/meta","type":"object"}`)}, "external reference"},
		{"ref loop", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","$ref":"#"}`)}, "$ref cycle"},
		{"local $defs ref", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`)}, ""},
		{"draft-07 tuple items under default 2020-12", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"p":{"items":[{"type":"string"}]}}}`)}, "got array, want boolean or object"},
		{"draft-07 tuple items with $schema draft-07", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"p":{"items":[{"type":"string"}]}}}`)}, ""},
		{"outputSchema array", ManifestTool{Name: "t", InputSchema: obj, OutputSchema: json.RawMessage(`[]`)}, "outputSchema must be a JSON object"},
		{"outputSchema object", ManifestTool{Name: "t", InputSchema: obj, OutputSchema: json.RawMessage(`{"type":"object"}`)}, ""},
		{"annotations string", ManifestTool{Name: "t", InputSchema: obj, Annotations: json.RawMessage(`"x"`)}, "annotations must be a JSON object"},
		{"icons object", ManifestTool{Name: "t", InputSchema: obj, Icons: json.RawMessage(`{}`)}, "icons must be a JSON array"},
		{"path relative", ManifestTool{Name: "t", InputSchema: obj, Path: "tools/t"}, `path: "tools/t" must start with /`},
		{"path dot dot", ManifestTool{Name: "t", InputSchema: obj, Path: "/tools/../admin"}, `must not contain ".."`},
		{"path with query", ManifestTool{Name: "t", InputSchema: obj, Path: "/invoke?tool=t"}, ""},
		{"x-mcp-header on a string property", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"}}}`)}, ""},
		{"x-mcp-header on a number", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"r":{"type":"number","x-mcp-header":"Region"}}}`)}, "inputSchema: x-mcp-header"},
		{"x-mcp-header under items", ManifestTool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"L"}}}}`)}, "inputSchema: x-mcp-header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manifest{Tools: []ManifestTool{tc.tool, {Name: "other", InputSchema: obj}}}
			s := mustBuild(t, Route{Key: "r", ToolServices: []ToolService{{Name: "s", URL: "http://s"}}}, map[string]*Manifest{"s": m})
			if _, res := s.Lookup("other"); res != mcp.ToolFound {
				t.Fatal("a rejected entry must not take the rest of the manifest down")
			}
			if tc.want == "" {
				if tool, _ := s.Lookup(tc.tool.Name); tool != nil && strings.Contains(string(tc.tool.InputSchema), "x-mcp-header") &&
					(len(s.ParamHeaders(tc.tool.Name)) != 1 || tool.ParamHeaders[0].Name != "Region") {
					t.Fatalf("param headers = %+v, want Region", tool.ParamHeaders)
				}
				if len(s.Rejected) != 0 || len(s.Tools) != 2 {
					t.Fatalf("rejected %+v, want the entry accepted", s.Rejected)
				}
				return
			}
			if len(s.Rejected) != 1 || len(s.Tools) != 1 {
				t.Fatalf("rejected = %+v, tools = %q; want exactly the entry rejected", s.Rejected, toolNames(s))
			}
			r := s.Rejected[0]
			if r.Service != "s" || r.Name != tc.tool.Name || !strings.Contains(r.Reason, tc.want) {
				t.Fatalf("rejected = %+v, want reason containing %q", r, tc.want)
			}
		})
	}
}

func TestBuildSnapshotAmbiguity(t *testing.T) {
	route := Route{Key: "r", ToolServices: []ToolService{{Name: "a", URL: "http://a"}, {Name: "b", URL: "http://b"}}}
	a := mustManifest(t, `{"tools":[
		{"name":"shared","inputSchema":{"type":"object"}},
		{"name":"twice","version":"1","inputSchema":{"type":"object"}},
		{"name":"twice","version":"2","inputSchema":{"type":"object"}},
		{"name":"rolled","version":"1","active":false,"inputSchema":{"type":"object"}},
		{"name":"rolled","version":"2","active":true,"inputSchema":{"type":"object"}},
		{"name":"half","version":"1","inputSchema":{"type":"string"}},
		{"name":"half","version":"2","inputSchema":{"type":"object"}},
		{"name":"only_a","inputSchema":{"type":"object"}}
	]}`)
	b := mustManifest(t, `{"tools":[
		{"name":"shared","inputSchema":{"type":"object"}},
		{"name":"off","active":false,"inputSchema":{"type":"object"}}
	]}`)
	s := mustBuild(t, route, map[string]*Manifest{"a": a, "b": b})
	// Across services the earlier one wins and the other is shadowed;
	// only a name the winning service claims twice is ambiguous.
	if want := []string{"twice"}; !slices.Equal(s.Ambiguous, want) {
		t.Errorf("ambiguous = %q, want %q", s.Ambiguous, want)
	}
	if want := []string{"half", "only_a", "rolled", "shared"}; !slices.Equal(toolNames(s), want) {
		t.Errorf("tools = %q, want %q", toolNames(s), want)
	}
	if want := []Shadowed{{Kind: "tool", Name: "shared", Service: "b", Winner: "a"}}; !slices.Equal(s.Shadowed, want) {
		t.Errorf("shadowed = %+v, want %+v", s.Shadowed, want)
	}
	for name, want := range map[string]mcp.Resolution{
		"shared": mcp.ToolFound, "twice": mcp.ToolAmbiguous,
		"rolled": mcp.ToolFound, "half": mcp.ToolFound, "off": mcp.ToolUnknown,
	} {
		if got := s.Resolve(name); got != want {
			t.Errorf("Resolve(%q) = %v, want %v", name, got, want)
		}
	}
	if tl, _ := s.Lookup("shared"); tl.Service != "a" {
		t.Errorf("shared resolved to %q, want the earlier service a", tl.Service)
	}
	if tl, _ := s.Lookup("rolled"); tl.Version != "2" {
		t.Errorf("rolled resolved to version %q, want the active 2", tl.Version)
	}
	if tl, _ := s.Lookup("half"); tl.Version != "2" {
		t.Errorf("half resolved to version %q, want the valid 2", tl.Version)
	}
	page, _, _ := s.ToolsPage("")
	if bytes.Contains(page, []byte(`"twice"`)) {
		t.Errorf("ambiguous names listed: %s", page)
	}

	// priority overrides the order; a lower-ranked service's claim never
	// makes the winner's name ambiguous, and the winner's own duplicate
	// does not fall through to the loser.
	b2 := mustManifest(t, `{"tools":[{"name":"shared","inputSchema":{"type":"object"}},{"name":"twice","inputSchema":{"type":"object"}}]}`)
	route.ToolServices[1].Priority = 5
	p := mustBuild(t, route, map[string]*Manifest{"a": a, "b": b2})
	if tl, res := p.Lookup("shared"); res != mcp.ToolFound || tl.Service != "b" {
		t.Errorf("with priority 5, shared = %v %+v, want b's", res, tl)
	}
	if tl, res := p.Lookup("twice"); res != mcp.ToolFound || tl.Service != "b" {
		t.Errorf("with priority 5, twice = %v %+v, want b's", res, tl)
	}
	want := []Shadowed{{Kind: "tool", Name: "shared", Service: "a", Winner: "b"}, {Kind: "tool", Name: "twice", Service: "a", Winner: "b"}}
	if !slices.Equal(p.Shadowed, want) || len(p.Ambiguous) != 0 {
		t.Errorf("shadowed = %+v, ambiguous %q; want %+v", p.Shadowed, p.Ambiguous, want)
	}
	route.ToolServices[1].Priority = -1
	if q := mustBuild(t, route, map[string]*Manifest{"a": a, "b": b2}); !slices.Equal(q.Ambiguous, []string{"twice"}) || q.Resolve("twice") != mcp.ToolAmbiguous {
		t.Errorf("a wins twice but offers it twice: ambiguous = %q", q.Ambiguous)
	}
}

func TestBuildSnapshotErrors(t *testing.T) {
	m := mustManifest(t, `{"tools":[]}`)
	if _, err := BuildSnapshot(coreRoute(), map[string]*Manifest{"weather": m}, t0); err == nil || !strings.Contains(err.Error(), `no manifest for tool service(s) calc`) {
		t.Errorf("missing manifest: err = %v", err)
	}
	bad := coreRoute()
	bad.ToolServices[0].URL = "ftp://x"
	if _, err := BuildSnapshot(bad, map[string]*Manifest{"weather": m, "calc": m}, t0); err == nil || !strings.Contains(err.Error(), "scheme must be http or https") {
		t.Errorf("invalid route: err = %v", err)
	}
	empty := mustBuild(t, coreRoute(), map[string]*Manifest{"weather": m, "calc": m})
	if page, _, _ := empty.ToolsPage(""); string(page) != "[]" {
		t.Errorf("empty tools JSON = %s, want []", page)
	}
}

func TestBuildSnapshotVersion(t *testing.T) {
	base := func() (Route, map[string]*Manifest) {
		return coreRoute(), map[string]*Manifest{
			"weather": fixtureManifest(t, "manifest-weather.json"),
			"calc":    mustManifest(t, calcManifest),
		}
	}
	r, ms := base()
	v1 := mustBuild(t, r, ms).Version
	r, ms = base()
	if s, _ := BuildSnapshot(r, ms, t0.Add(time.Hour)); s.Version != v1 {
		t.Errorf("same inputs, other fetch time: version %s != %s", s.Version, v1)
	}
	r, ms = base()
	r.PublicPath = "/mcp/core" // the default, spelled out
	if v := mustBuild(t, r, ms).Version; v != v1 {
		t.Errorf("explicit default publicPath changed the version")
	}
	r, ms = base()
	ms["calc"].Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"number","description":"a <b>"}}}`)
	va := mustBuild(t, r, ms).Version
	ms["calc"].Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"number","description":"a \u003cb>"}}}`)
	if vb := mustBuild(t, r, ms).Version; va != vb {
		t.Errorf("< and \\u003c hash differently (%s, %s): a re-encoding store would break the version check", va, vb)
	}
	changes := map[string]func(r *Route, ms map[string]*Manifest){
		"description": func(r *Route, ms map[string]*Manifest) { ms["calc"].Tools[0].Description = "adds" },
		"schema": func(r *Route, ms map[string]*Manifest) {
			ms["calc"].Tools[1].InputSchema = json.RawMessage(`{"type":"object","required":[]}`)
		},
		"active":       func(r *Route, ms map[string]*Manifest) { f := false; ms["calc"].Tools[1].Active = &f },
		"tool version": func(r *Route, ms map[string]*Manifest) { ms["calc"].Tools[0].Version = "3" },
		"cluster":      func(r *Route, ms map[string]*Manifest) { r.ToolServices[0].Cluster = &ClusterSettings{MaxRetries: 1} },
		"service order": func(r *Route, ms map[string]*Manifest) {
			r.ToolServices[0], r.ToolServices[1] = r.ToolServices[1], r.ToolServices[0]
		},
	}
	for name, change := range changes {
		r, ms := base()
		change(&r, ms)
		if v := mustBuild(t, r, ms).Version; v == v1 {
			t.Errorf("changing the %s kept version %s", name, v)
		}
	}
}

func TestValidateArguments(t *testing.T) {
	s := mustBuild(t, coreRoute(), map[string]*Manifest{
		"weather": fixtureManifest(t, "manifest-weather.json"),
		"calc":    mustManifest(t, calcManifest),
	})
	forecast, _ := s.Lookup("get_forecast")
	add, _ := s.Lookup("add")
	tests := []struct {
		tool *Tool
		args string
		want []string
	}{
		{forecast, `{"city":"Oslo"}`, nil},
		{forecast, `{"city":"Oslo","days":3}`, nil},
		{forecast, `{}`, []string{"arguments: missing property 'city'"}},
		{forecast, ``, []string{"arguments: missing property 'city'"}},
		{forecast, `{"city":"Oslo","days":"3"}`, []string{"arguments/days: got string, want integer"}},
		{forecast, `{"city":"Oslo","days":0}`, []string{"arguments/days: minimum: got 0, want 1"}},
		{forecast, `{"city":""}`, []string{"arguments/city: minLength: got 0, want 1"}},
		{forecast, `{"city":"Oslo","extra":1}`, []string{"arguments: additional properties 'extra' not allowed"}},
		{forecast, `{"days":"x","extra":true}`, []string{
			"arguments/days: got string, want integer",
			"arguments: additional properties 'extra' not allowed",
			"arguments: missing property 'city'",
		}},
		{add, `{"a":1}`, []string{"arguments: missing property 'b'"}},
		{add, `[1,2]`, []string{"arguments: must be an object"}},
		{add, `"x"`, []string{"arguments: must be an object"}},
		{add, `{"a":`, []string{"arguments: not valid JSON"}},
	}
	for _, tc := range tests {
		got := tc.tool.ValidateArguments(json.RawMessage(tc.args))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s(%s) = %q, want %q", tc.tool.Name, tc.args, got, tc.want)
		}
	}

	many := `{"type":"object","properties":{` + strings.Join(func() []string {
		var ps []string
		for i := range 30 {
			ps = append(ps, fmt.Sprintf(`"p%02d":{"type":"string"}`, i))
		}
		return ps
	}(), ",") + `}}`
	args := `{` + strings.Join(func() []string {
		var ps []string
		for i := range 30 {
			ps = append(ps, fmt.Sprintf(`"p%02d":1`, i))
		}
		return ps
	}(), ",") + `}`
	m := &Manifest{Tools: []ManifestTool{{Name: "many", InputSchema: json.RawMessage(many)}}}
	ms := mustBuild(t, Route{Key: "m", ToolServices: []ToolService{{Name: "m", URL: "http://m"}}}, map[string]*Manifest{"m": m})
	mt, _ := ms.Lookup("many")
	got := mt.ValidateArguments(json.RawMessage(args))
	if len(got) != maxArgumentMessages+1 || got[len(got)-1] != "... and 10 more" {
		t.Errorf("messages not capped: %d, last %q", len(got), got[len(got)-1])
	}
}

func TestSnapshotJSONRoundTrip(t *testing.T) {
	route := coreRoute()
	route.Description = "Core <tools>"
	route.ToolServices[0].Cluster = &ClusterSettings{RequestTimeout: config.Duration(3 * time.Second), OutlierDetection: &OutlierDetection{Consecutive5xx: 2}}
	ms := map[string]*Manifest{
		"weather": fixtureManifest(t, "manifest-weather.json"),
		"calc": mustManifest(t, `{"tools":[
			{"name":"add","description":"a < b & c","inputSchema":{"type":"object","properties":{"a":{"type":"number","description":"<a>"}},"required":["a"]}},
			{"name":"add","version":"2","inputSchema":{"type":"object"}},
			{"name":"get_alerts","inputSchema":{"type":"object"}},
			"not an entry"
		]}`),
	}
	orig := mustBuild(t, route, ms)
	if len(orig.Rejected) != 3 || !slices.Equal(orig.Ambiguous, []string{"add"}) || len(orig.Shadowed) != 1 || orig.Shadowed[0].Name != "get_alerts" {
		t.Fatalf("fixture does not exercise rejections, ambiguity and shadowing: %+v %q %+v", orig.Rejected, orig.Ambiguous, orig.Shadowed)
	}
	direct, err := orig.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	reencoded, err := json.Marshal(orig) // HTML-escapes < > & inside the raw schemas
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(direct, reencoded) {
		t.Fatal("test needs json.Marshal to re-escape the stored form")
	}
	for name, data := range map[string][]byte{"MarshalJSON": direct, "json.Marshal": reencoded} {
		t.Run(name, func(t *testing.T) {
			got, err := UnmarshalSnapshot(data)
			if err != nil {
				t.Fatalf("UnmarshalSnapshot() = %v", err)
			}
			if got.Version != orig.Version || got.Route != orig.Route || !got.FetchedAt.Equal(orig.FetchedAt) {
				t.Errorf("header = %s %s %v, want %s %s %v", got.Route, got.Version, got.FetchedAt, orig.Route, orig.Version, orig.FetchedAt)
			}
			if !reflect.DeepEqual(got.Rejected, orig.Rejected) || !reflect.DeepEqual(got.Ambiguous, orig.Ambiguous) || !reflect.DeepEqual(got.Shadowed, orig.Shadowed) {
				t.Errorf("rejected/ambiguous/shadowed changed: %+v %q %+v", got.Rejected, got.Ambiguous, got.Shadowed)
			}
			if !slices.Equal(toolNames(got), toolNames(orig)) {
				t.Errorf("tools = %q, want %q", toolNames(got), toolNames(orig))
			}
			f, res := got.Lookup("get_forecast")
			if res != mcp.ToolFound || f.Cluster != "toolsvc_weather" {
				t.Fatalf("rebuilt lookup = %v %+v", res, f)
			}
			if msgs := f.ValidateArguments(json.RawMessage(`{}`)); !slices.Equal(msgs, []string{"arguments: missing property 'city'"}) {
				t.Errorf("rebuilt validator: %q", msgs)
			}
			if !reflect.DeepEqual(got.def, orig.def) {
				t.Errorf("route definition changed:\n%+v\n%+v", got.def, orig.def)
			}
			var a, b any
			pa, _, _ := got.ToolsPage("")
			pb, _, _ := orig.ToolsPage("")
			_ = json.Unmarshal(pa, &a)
			_ = json.Unmarshal(pb, &b)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("tools JSON differs:\n%s\n%s", pa, pb)
			}
		})
	}
	if pa, _, _ := mustUnmarshal(t, direct).ToolsPage(""); func() bool { pb, _, _ := orig.ToolsPage(""); return !bytes.Equal(pa, pb) }() {
		t.Error("the direct stored form must rebuild byte-identical tools JSON")
	}

	var st map[string]json.RawMessage
	_ = json.Unmarshal(direct, &st)
	for name, tamper := range map[string]func(){
		"version":    func() { st["version"] = json.RawMessage(`"0000"`) },
		"format":     func() { st["format"] = json.RawMessage(`4`) },
		"old format": func() { st["format"] = json.RawMessage(`2`) },
		"manifest":   func() { st["manifests"] = json.RawMessage(`{"weather":{"tools":[]}}`) },
		"no version": func() { delete(st, "version") },
	} {
		saved := map[string]json.RawMessage{}
		for k, v := range st {
			saved[k] = v
		}
		tamper()
		data, _ := json.Marshal(st)
		if _, err := UnmarshalSnapshot(data); err == nil {
			t.Errorf("tampered %s: UnmarshalSnapshot accepted it", name)
		}
		st = saved
	}
	if _, err := UnmarshalSnapshot([]byte(`{`)); err == nil {
		t.Error("garbage accepted")
	}
	if _, err := (&Snapshot{Route: "x"}).MarshalJSON(); err == nil {
		t.Error("a hand-made snapshot cannot be persisted; MarshalJSON must say so")
	}
}

func mustUnmarshal(t *testing.T, data []byte) *Snapshot {
	t.Helper()
	s, err := UnmarshalSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bigManifest(n int) *Manifest {
	m := &Manifest{Tools: make([]ManifestTool, n)}
	for i := range m.Tools {
		m.Tools[i] = ManifestTool{
			Name:        fmt.Sprintf("tool_%05d", i),
			Version:     "1",
			Description: fmt.Sprintf("Tool number %d does one thing well", i),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"q%d":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1}},"required":["q%d"],"additionalProperties":false}`, i, i)),
		}
	}
	return m
}

func BenchmarkBuildSnapshot10k(b *testing.B) {
	route := Route{Key: "big", ToolServices: []ToolService{{Name: "big", URL: "http://big"}}}
	ms := map[string]*Manifest{"big": bigManifest(10000)}
	b.ReportAllocs()
	for b.Loop() {
		s, err := BuildSnapshot(route, ms, t0)
		if err != nil || len(s.Tools) != 10000 {
			b.Fatalf("BuildSnapshot() = %v, %d tools", err, len(s.Tools))
		}
	}
}
