package registry

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// sharedRoutes are two routes that each have their own Tool Service and use
// the same shared one; each call decodes the manifests anew, as each fetch
// does.
func sharedRoutes(t *testing.T, sharedURL string, catalog *Catalog) (Route, Route, map[string]*Manifest) {
	t.Helper()
	ms := map[string]*Manifest{
		"own-a": mustManifest(t, `{"tools":[{"name":"a1","inputSchema":{"type":"object","description":"a1"}}]}`),
		"own-b": mustManifest(t, `{"tools":[{"name":"b1","inputSchema":{"type":"object","description":"b1"}}]}`),
		"sh": mustManifest(t, `{"tools":[
			{"name":"s1","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}}},
			{"name":"`+mcp.MetaToolSearch+`","inputSchema":{"type":"object"}}]}`),
	}
	a := Route{Key: "a", ToolServices: []ToolService{{Name: "own-a", URL: "http://a"}, {Name: "sh", URL: "http://sh"}}}
	b := Route{Key: "b", Catalog: catalog, ToolServices: []ToolService{{Name: "own-b", URL: "http://b"}, {Name: "sh", URL: sharedURL}}}
	return a, b, ms
}

func TestServiceToolsSharedAcrossRoutes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sharedURL string // route b's URL of service sh
		share     bool
	}{
		{"same definition and manifest", "http://sh", true},
		{"another definition", "http://sh2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Route b is in search mode: the shared build is the same, what
			// the route makes of it (a meta-tool name is reserved) is its own.
			ra, rb, ms := sharedRoutes(t, tc.sharedURL, &Catalog{Mode: ModeSearch})
			a := mustBuild(t, ra, ms)
			_, _, ms2 := sharedRoutes(t, tc.sharedURL, nil)
			b := mustBuild(t, rb, ms2)
			sa, _ := a.Lookup("s1")
			sb, _ := b.Lookup("s1")
			if sa == nil || sb == nil {
				t.Fatalf("s1 missing: %v %v", sa, sb)
			}
			if (sa == sb) != tc.share {
				t.Errorf("routes share s1's Tool: %v, want %v", sa == sb, tc.share)
			}
			if sa.schema != sb.schema {
				t.Error("identical schemas must share one entry in any case")
			}
			if sb.BasePath != "" || sb.Cluster != wire.ClusterName("sh") {
				t.Errorf("b's s1 = %+v", sb)
			}
			if _, res := a.Lookup(mcp.MetaToolSearch); res != mcp.ToolFound {
				t.Errorf("full-mode route a: %s resolves %v, want found", mcp.MetaToolSearch, res)
			}
			if _, res := b.Lookup(mcp.MetaToolSearch); res != mcp.ToolUnknown || !slices.ContainsFunc(b.Rejected, func(r RejectedTool) bool { return r.Name == mcp.MetaToolSearch }) {
				t.Errorf("search-mode route b: %s resolves %v, rejected %+v", mcp.MetaToolSearch, res, b.Rejected)
			}
			if msgs := sb.ValidateArguments(json.RawMessage(`{"n":"x"}`)); len(msgs) != 1 {
				t.Errorf("ValidateArguments = %q", msgs)
			}
		})
	}
}

// The version is a hash of the route and its manifests' content: equal
// whichever way the manifests were canonicalized, and whitespace in a
// manifest changes nothing.
func TestRebuildCanonicalVersion(t *testing.T) {
	r, ms := schemaRoute(t, "r")
	built := mustBuild(t, r, ms)
	spaced := mustManifest(t, `{"tools":[
		{"name":"good","inputSchema":{ "type" : "object", "properties":{"n":{"type":"integer"}},"required":["n"]}},
		{"name":"bad","inputSchema":`+badSchema+`},
		{"name":"twin","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}
	]}`)
	c, err := Canonicalize(spaced)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := RebuildCanonical(r, built, map[string]*Canonical{"s": c}, t0); out != nil || err != nil {
		t.Errorf("RebuildCanonical() = %v, %v: same content must keep the snapshot", out, err)
	}
	changed := mustManifest(t, `{"tools":[{"name":"good","inputSchema":{"type":"object"}}]}`)
	c2, _ := Canonicalize(changed)
	out, err := RebuildCanonical(r, built, map[string]*Canonical{"s": c2}, t0)
	if err != nil || out == nil || out.Version == built.Version {
		t.Errorf("RebuildCanonical() = %v, %v: changed content must rebuild", out, err)
	}
	if _, err := RebuildCanonical(r, nil, map[string]*Canonical{}, t0); err == nil || !strings.Contains(err.Error(), "no manifest for tool service(s) s") {
		t.Errorf("missing manifest: %v", err)
	}
}

// Every field of a manifest entry is part of its manifest's digest, so a
// change to any of them changes the version; a field added to ManifestTool
// without being hashed fails here.
func TestManifestDigestCoversEveryField(t *testing.T) {
	base := ManifestTool{Name: "n", InputSchema: json.RawMessage(`{"type":"object"}`)}
	d0, err := manifestDigest(&Manifest{Tools: []ManifestTool{base}})
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		tool := base
		f := reflect.ValueOf(&tool).Elem().Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString(f.String() + "x")
		case json.RawMessage:
			f.SetBytes([]byte(`{"x":1}`))
		case *bool:
			f.Set(reflect.ValueOf(new(bool)))
		default:
			t.Fatalf("field %s of type %s: extend manifestDigest and this test", v.Type().Field(i).Name, f.Type())
		}
		d, err := manifestDigest(&Manifest{Tools: []ManifestTool{tool}})
		if err != nil || d == d0 {
			t.Errorf("changing %s leaves the digest unchanged (%v)", v.Type().Field(i).Name, err)
		}
	}
	for name, m := range map[string]*Manifest{
		"invalid entry": {Tools: []ManifestTool{base}, Invalid: []InvalidEntry{{Index: 1, Reason: "r"}}},
		"mcp listing":   {Tools: []ManifestTool{base}, MCP: &MCPManifest{ProtocolVersion: "2025-06-18"}},
		"active false":  {Tools: []ManifestTool{{Name: "n", InputSchema: base.InputSchema, Active: new(bool)}}},
	} {
		if d, _ := manifestDigest(m); d == d0 {
			t.Errorf("%s leaves the digest unchanged", name)
		}
	}
}

// Routes built in parallel that share a large service build it together
// (each claims chunks of its entries) and all get the same Tools.
func TestServiceBuildConcurrent(t *testing.T) {
	var tools []string
	for i := range 3 * parallelMinTools {
		tools = append(tools, fmt.Sprintf(`{"name":"c%03d","inputSchema":{"type":"object","properties":{"p%d":{"type":"string"}}}}`, i, i))
	}
	tools = append(tools, `{"name":"bad","inputSchema":`+badSchema+`}`)
	doc := `{"tools":[` + strings.Join(tools, ",") + `]}`
	const routes = 8
	snaps := make([]*Snapshot, routes)
	var wg sync.WaitGroup
	for i := range routes {
		m := mustManifest(t, doc) // each route its own decoded copy, as from a store
		r := Route{Key: fmt.Sprintf("r%d", i), ToolServices: []ToolService{{Name: "big", URL: "http://big"}}}
		wg.Go(func() { snaps[i] = mustBuild(t, r, map[string]*Manifest{"big": m}) })
	}
	wg.Wait()
	for i, s := range snaps {
		if len(s.Tools) != 3*parallelMinTools || len(s.Rejected) != 1 || s.Rejected[0].Name != "bad" {
			t.Fatalf("route %d: %d tools, rejected %+v", i, len(s.Tools), s.Rejected)
		}
		for j, tool := range s.Tools {
			if tool != snaps[0].Tools[j] {
				t.Fatalf("route %d tool %s is not the shared one", i, tool.Name)
			}
		}
		if s.manifests["big"] != snaps[0].manifests["big"] {
			t.Errorf("route %d holds its own copy of the canonical manifest", i)
		}
	}
}
