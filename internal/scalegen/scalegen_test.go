package scalegen

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/registry"
)

// TestGrowth checks the judgement the scale benchmarks fail on: per-unit
// costs that stay flat, or grow a little, pass; one that grows with the
// size (quadratic total work) or is missing at one size is reported or
// left out.
func TestGrowth(t *testing.T) {
	bounds := []Bound{{Metric: "build", Max: 4}, {Metric: "heap", Max: 2}}
	tests := []struct {
		name       string
		build      [2]float64 // per unit at 1,000 and 10,000 routes
		heap       [2]float64
		wantOver   int
		wantGrowth float64 // of build
	}{
		{"linear", [2]float64{100, 110}, [2]float64{13000, 13100}, 0, 1.1},
		{"noisy but linear", [2]float64{100, 390}, [2]float64{13000, 25000}, 0, 3.9},
		{"quadratic build", [2]float64{100, 1000}, [2]float64{13000, 13000}, 1, 10},
		{"memory doubles per unit", [2]float64{100, 100}, [2]float64{10000, 30000}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Results{}
			r.Set("build", 1000, tt.build[0])
			r.Set("build", 10000, tt.build[1])
			r.Set("heap", 1000, tt.heap[0])
			r.Set("heap", 10000, tt.heap[1])
			r.Set("skipped", 1000, 1) // measured at one size only
			growth, over := r.Growth(1000, 10000, append(bounds, Bound{Metric: "skipped", Max: 1})...)
			if len(over) != tt.wantOver {
				t.Errorf("over = %q, want %d lines", over, tt.wantOver)
			}
			if g := growth["build"]; g < tt.wantGrowth-1e-9 || g > tt.wantGrowth+1e-9 {
				t.Errorf("build growth = %v, want %v", g, tt.wantGrowth)
			}
			if _, ok := growth["skipped"]; ok {
				t.Errorf("a metric measured at one size has a growth: %v", growth)
			}
		})
	}
}

// TestGenerate checks the catalog's shape: tool counts, sharing, unique
// names per route, and input schemas that are valid JSON objects of a few
// hundred bytes to a few KB.
func TestGenerate(t *testing.T) {
	c := Generate(20)
	if got, want := c.Tools(), 20*ToolsPerRoute; got != want {
		t.Errorf("Tools() = %d, want %d", got, want)
	}
	if got, want := c.RouteTools(), 20*(OwnTools+SharedTools); got != want {
		t.Errorf("RouteTools() = %d, want %d", got, want)
	}
	if got := c.RoutesOf(SharedService(0)); len(got) != SharedBy {
		t.Errorf("RoutesOf(%s) = %v, want %d routes", SharedService(0), got, SharedBy)
	}
	if err := c.Listing.Validate(); err != nil {
		t.Fatalf("the generated listing does not validate: %v", err)
	}
	minLen, maxLen := 1<<30, 0
	for _, rt := range c.Listing.Routes {
		seen := map[string]bool{}
		for _, s := range rt.ToolServices {
			for _, tool := range c.Manifests[s.Name].Tools {
				if seen[tool.Name] {
					t.Fatalf("route %s: tool %s twice", rt.Key, tool.Name)
				}
				seen[tool.Name] = true
				var schema map[string]any
				if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema["type"] != "object" {
					t.Fatalf("tool %s: inputSchema %s: %v", tool.Name, tool.InputSchema, err)
				}
				minLen, maxLen = min(minLen, len(tool.InputSchema)), max(maxLen, len(tool.InputSchema))
			}
		}
	}
	if minLen < 200 || maxLen < 2000 || maxLen > 8000 {
		t.Errorf("inputSchema sizes %d..%d bytes, want a few hundred to a few thousand", minLen, maxLen)
	}
	// Every tool of a route builds into its snapshot.
	rt := c.Listing.Routes[3]
	ms := map[string]*registry.Manifest{}
	for _, s := range rt.ToolServices {
		ms[s.Name] = c.Manifests[s.Name]
	}
	snap, err := registry.BuildSnapshot(rt, ms, time.Unix(0, 0))
	if err != nil || len(snap.Tools) != OwnTools+SharedTools || len(snap.Rejected) != 0 {
		t.Fatalf("BuildSnapshot = %v, %d tools, rejected %v", err, len(snap.Tools), snap.Rejected)
	}
}
