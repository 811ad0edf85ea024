package xds_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/scalegen"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// BenchmarkScaleTranslate translates the Portals of the scale catalogs
// (scalegen.Sizes, TOOLMESH_BENCH_SCALE): each route has its own Tool
// Service and shares one with nine other routes. "translate" is Translate
// alone; "update" is a changed Portal pushed through the server (translate,
// validate every resource, hash, SetSnapshot). Its growth sub-benchmark
// fails when the time per route grows faster than linear from one size to
// the next.
func BenchmarkScaleTranslate(b *testing.B) {
	sizes := scalegen.Sizes(b)
	res := scalegen.Results{}
	for _, n := range sizes {
		routes := scalegen.Routes(n).Listing.Routes
		// A second Portal that differs in one shared service's timeout.
		changed := make([]registry.Route, len(routes))
		copy(changed, routes)
		for i := range changed {
			if len(changed[i].ToolServices) > 1 && changed[i].ToolServices[1].Name == scalegen.SharedService(0) {
				svcs := append([]registry.ToolService(nil), changed[i].ToolServices...)
				svcs[1].Cluster = &registry.ClusterSettings{RequestTimeout: config.Duration(30e9)}
				changed[i].ToolServices = svcs
			}
		}
		b.Run(fmt.Sprintf("routes=%d/translate", n), func(b *testing.B) {
			var clusters int
			for b.Loop() {
				r, err := xds.Translate(routes, xds.Options{})
				if err != nil {
					b.Fatal(err)
				}
				clusters = len(r.Clusters)
			}
			if want := n + scalegen.Shared(n); clusters < want {
				b.Fatalf("%d clusters, want at least %d", clusters, want)
			}
			res.Set("translate-per-route", n, float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n))
			b.ReportMetric(float64(clusters), "clusters")
		})
		b.Run(fmt.Sprintf("routes=%d/update", n), func(b *testing.B) {
			s := xds.NewServer(b.Context(), slog.New(slog.DiscardHandler), xds.Options{}, nil)
			portals := [2][]registry.Route{routes, changed}
			i := 0
			for b.Loop() {
				pushed, err := s.Update(b.Context(), portals[i%2])
				if err != nil || !pushed {
					b.Fatalf("Update = %v, %v", pushed, err)
				}
				i++
			}
			res.Set("update-per-route", n, float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n))
		})
	}
	res.CheckGrowth(b, sizes,
		scalegen.Bound{Metric: "translate-per-route", Max: 4},
		scalegen.Bound{Metric: "update-per-route", Max: 4},
	)
}
