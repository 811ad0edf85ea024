package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// TestPortalContractExamples feeds the Portal registry contract examples
// (docs/contracts/examples/portal) through the real listing decoder.
func TestPortalContractExamples(t *testing.T) {
	for _, name := range []string{"listing.json", "listing.yaml"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(contractDir, "portal", name))
			if err != nil {
				t.Fatal(err)
			}
			l, err := registry.ListingDecoder{Strict: true}.Decode(data)
			if err != nil {
				t.Fatalf("decode %s: %v", name, err)
			}
			if len(l.Routes) == 0 || l.Routes[0].Key != "core" || l.Routes[0].Path() != "/mcp/core" {
				t.Fatalf("unexpected listing: %+v", l.Routes)
			}
			if name == "listing.json" {
				if c := l.Routes[1].Catalog; c == nil || c.Mode != "search" || len(c.Synonyms) != 2 {
					t.Errorf("process route catalog = %+v, want search mode with two synonym groups", c)
				}
			}
		})
	}
}

// TestToolServiceContractExamples feeds the Tool Service wire contract
// manifests (docs/contracts/examples/toolservice) through the real manifest
// decoder and snapshot builder, and checks what the contract says about them:
// inactive versions are left out, a name offered twice is ambiguous, an
// invalid entry is rejected while the rest of the manifest is used.
func TestToolServiceContractExamples(t *testing.T) {
	load := func(name string) *registry.Manifest {
		data, err := os.ReadFile(filepath.Join(contractDir, "toolservice", name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := registry.DecodeManifest(data)
		if err != nil {
			t.Fatalf("decode %s: %v", name, err)
		}
		return m
	}
	route := registry.Route{Key: "core", ToolServices: []registry.ToolService{
		{Name: "contract", URL: "http://127.0.0.1:9/base"},
		{Name: "other", URL: "http://127.0.0.1:10"},
	}}
	snap, err := registry.BuildSnapshot(route, map[string]*registry.Manifest{
		"contract": load("manifest.json"),
		"other":    load("manifest-other.json"),
	}, time.Unix(0, 0))
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	var names []string
	for _, tool := range snap.Tools {
		names = append(names, tool.Name)
	}
	if want := []string{"add", "echo", "fail", "secret", "series", "weather"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	if !slices.Equal(snap.Ambiguous, []string{"shared"}) {
		t.Errorf("ambiguous = %v, want [shared]", snap.Ambiguous)
	}
	if len(snap.Rejected) != 1 || snap.Rejected[0].Name != "bad name with spaces" {
		t.Errorf("rejected = %+v, want the invalid name only", snap.Rejected)
	}
	weather, _ := snap.Lookup("weather")
	if weather == nil || weather.Version != "2" {
		t.Errorf("weather resolved to %+v, want the active version 2", weather)
	}
	add, _ := snap.Lookup("add")
	if add == nil || add.Path != "/tools/add" || add.BasePath != "/base" || add.Cluster != wire.ClusterName("contract") {
		t.Errorf("add = %+v", add)
	}
}
