package refresher_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/scalegen"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/refresher"
)

// scaleRegistry returns a registry of catalog c with the in-memory Portal
// and Tool Services of scalegen, not started.
func scaleRegistry(c *scalegen.Catalog, f *scalegen.Fetcher) *refresher.Registry {
	return refresher.New(refresher.Options{
		Source:       scalegen.Source{Listing: c.Listing},
		Fetcher:      f,
		Interval:     time.Hour,
		FetchTimeout: 10 * time.Minute,
	})
}

// BenchmarkScale measures the registry at catalog sizes of
// scalegen.Sizes (TOOLMESH_BENCH_SCALE; default 50 and 500 routes, 100
// tools each): the first build of every snapshot from scratch, the heap it
// holds, the refresh after one shared Tool Service changed (only the
// routes that use it may rebuild), and route and tool lookups. Its growth
// sub-benchmarks fail when a per-unit cost grows faster than linear from
// one size to the next in the same run.
func BenchmarkScale(b *testing.B) {
	sizes := scalegen.Sizes(b)
	res := scalegen.Results{}
	for _, n := range sizes {
		c := scalegen.Generate(n)
		pairs := float64(c.RouteTools())
		var reg *refresher.Registry
		f := c.Fetcher()

		b.Run(fmt.Sprintf("routes=%d/build", n), func(b *testing.B) {
			var heap float64
			for b.Loop() {
				b.StopTimer()
				reg = nil
				base := scalegen.HeapInUse() // also frees the schemas of the last build
				reg = scaleRegistry(c, f)
				b.StartTimer()
				if err := reg.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				heap = float64(scalegen.HeapInUse()) - float64(base)
				b.StartTimer()
			}
			checkServed(b, reg, c)
			perPair := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / pairs
			res.Set("build-per-tool", n, perPair)
			res.Set("heap-per-tool", n, heap/pairs)
			b.ReportMetric(heap/(1<<20), "heap-MB")
			b.ReportMetric(heap/pairs, "heap-B/tool")
			b.ReportMetric(perPair, "ns/tool")
			b.ReportMetric(pairs, "tools")
		})
		if reg == nil {
			// The build was filtered out; the rest needs a registry.
			reg = scaleRegistry(c, f)
			if err := reg.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
		}

		b.Run(fmt.Sprintf("routes=%d/rebuild-one-service", n), func(b *testing.B) {
			svc := scalegen.SharedService(0)
			affected := c.RoutesOf(svc)
			rev := 0
			for b.Loop() {
				b.StopTimer()
				rev++
				f.Set(svc, scalegen.Manifest(svc, scalegen.SharedTools, rev))
				before := snapshots(reg, c)
				b.StartTimer()
				if err := reg.Refresh(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				rebuilt := changedRoutes(before, snapshots(reg, c))
				if fmt.Sprint(rebuilt) != fmt.Sprint(affected) {
					b.Fatalf("changing %s rebuilt routes %v, want exactly %v", svc, rebuilt, affected)
				}
				b.StartTimer()
			}
			perPair := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / pairs
			res.Set("rebuild-per-tool", n, perPair)
			b.ReportMetric(float64(len(affected)), "rebuilt-routes")
			b.ReportMetric(perPair, "ns/tool")
		})

		// Lookups spread over every route, in a fixed pseudo-random order,
		// so a larger catalog is not measured on a warm cache only.
		const probes = 1 << 12
		paths, names := make([]string, probes), make([]string, probes)
		snaps := make([]*registry.Snapshot, probes)
		for i := range probes {
			k := (i * 7919) % n
			rt := c.Listing.Routes[k]
			paths[i] = rt.Path()
			snaps[i] = reg.Snapshot(rt.Key)
			names[i] = snaps[i].Tools[(i*31)%len(snaps[i].Tools)].Name
		}
		b.Run(fmt.Sprintf("routes=%d/lookup-route", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, s, ok := reg.Lookup(paths[i%probes]); !ok || s == nil {
					b.Fatalf("Lookup(%s) found nothing", paths[i%probes])
				}
				i++
			}
			res.Set("lookup-route", n, float64(b.Elapsed().Nanoseconds())/float64(b.N))
		})
		b.Run(fmt.Sprintf("routes=%d/resolve-tool", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if t, _ := snaps[i%probes].Lookup(names[i%probes]); t == nil {
					b.Fatalf("Lookup(%s) found nothing", names[i%probes])
				}
				i++
			}
			res.Set("resolve-tool", n, float64(b.Elapsed().Nanoseconds())/float64(b.N))
		})
		reg = nil
	}
	// Per-unit bounds: linear work stays near 1x; 4x leaves room for cache
	// and GC effects of a 10x larger heap while a quadratic step (10x per
	// 10x size) still fails.
	res.CheckGrowth(b, sizes,
		scalegen.Bound{Metric: "build-per-tool", Max: 4},
		scalegen.Bound{Metric: "rebuild-per-tool", Max: 4},
		scalegen.Bound{Metric: "heap-per-tool", Max: 2},
		scalegen.Bound{Metric: "lookup-route", Max: 4},
		scalegen.Bound{Metric: "resolve-tool", Max: 4},
	)
}

// checkServed fails b unless every route of c is served with all its tools.
func checkServed(b *testing.B, reg *refresher.Registry, c *scalegen.Catalog) {
	b.Helper()
	for _, rt := range c.Listing.Routes {
		_, s, ok := reg.Lookup(rt.Path())
		if !ok || s == nil || len(s.Tools) != scalegen.OwnTools+scalegen.SharedTools {
			b.Fatalf("route %s not served with all its tools: %+v", rt.Key, reg.Health().Routes[0])
		}
	}
}

// snapshots returns the current snapshot of every route.
func snapshots(reg *refresher.Registry, c *scalegen.Catalog) map[string]*registry.Snapshot {
	m := make(map[string]*registry.Snapshot, len(c.Listing.Routes))
	for _, rt := range c.Listing.Routes {
		m[rt.Key] = reg.Snapshot(rt.Key)
	}
	return m
}

// changedRoutes returns the routes, sorted, whose snapshot was replaced: a
// route whose inputs did not change keeps its snapshot pointer.
func changedRoutes(before, after map[string]*registry.Snapshot) []string {
	var keys []string
	for k, s := range after {
		if before[k] != s {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
