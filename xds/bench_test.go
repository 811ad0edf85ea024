package xds_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// benchPortal is 1,000 routes of 4 Tool Services each, drawn from 2,000
// distinct services (each serves two routes); half are on IP literals (EDS),
// half on DNS names (STRICT_DNS), every tenth has outlier detection and a
// health check. timeout varies one service so two Portals differ.
func benchPortal(timeout config.Duration) []registry.Route {
	const nRoutes, perRoute, nServices = 1000, 4, 2000
	services := make([]registry.ToolService, nServices)
	for i := range services {
		s := registry.ToolService{Name: fmt.Sprintf("svc-%04d", i)}
		if i%2 == 0 {
			s.URL = fmt.Sprintf("http://10.%d.%d.%d:8080", i/65536, i/256%256, i%256)
		} else {
			s.URL = fmt.Sprintf("http://svc-%04d.tools.svc:8080/api", i)
		}
		if i%10 == 0 {
			s.Cluster = &registry.ClusterSettings{
				OutlierDetection: &registry.OutlierDetection{},
				HealthCheck:      &registry.HealthCheck{},
				HTTP2:            true,
			}
		}
		services[i] = s
	}
	services[0].Cluster.RequestTimeout = timeout
	routes := make([]registry.Route, nRoutes)
	for i := range routes {
		r := registry.Route{Key: fmt.Sprintf("route-%04d", i)}
		for k := range perRoute {
			r.ToolServices = append(r.ToolServices, services[(i*perRoute+k)%nServices])
		}
		routes[i] = r
	}
	return routes
}

func BenchmarkTranslate1000Routes(b *testing.B) {
	portals := [2][]registry.Route{benchPortal(0), benchPortal(config.Duration(30e9))}

	b.Run("translate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := xds.Translate(portals[0], xds.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})

	// A changed Portal every time: translate, ValidateDeep every resource,
	// content hash, consistency check and SetSnapshot.
	b.Run("changed", func(b *testing.B) {
		s := xds.NewServer(b.Context(), slog.New(slog.DiscardHandler), xds.Options{}, nil)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			pushed, err := s.Update(b.Context(), portals[i%2])
			if err != nil || !pushed {
				b.Fatalf("Update = %v, %v", pushed, err)
			}
			i++
		}
		b.ReportMetric(float64(len(s.Current().Clusters)), "clusters")
	})

	// The same, with 10 sidecar node groups of 100 routes each and
	// overrides for 200 services: one translation, 11 group snapshots, of
	// which only those holding the changed service are pushed.
	b.Run("changed-10-groups-overrides", func(b *testing.B) {
		opts := xds.Options{Overrides: &xds.Overrides{
			Defaults: &xds.Tuning{OutlierDetection: &xds.OutlierTuning{}},
			Services: map[string]xds.Tuning{},
		}}
		timeout := config.Duration(20e9)
		for i := 1; i <= 200; i++ { // not svc-0000, whose Portal timeout alternates
			opts.Overrides.Services[fmt.Sprintf("svc-%04d", i)] = xds.Tuning{RequestTimeout: &timeout}
		}
		for g := range 10 {
			sel := xds.NodeSelector{Cluster: fmt.Sprintf("sidecar-%d", g)}
			for r := range 100 {
				sel.Routes = append(sel.Routes, fmt.Sprintf("route-%04d", g*100+r))
			}
			opts.Nodes = append(opts.Nodes, sel)
		}
		s := xds.NewServer(b.Context(), slog.New(slog.DiscardHandler), opts, nil)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			pushed, err := s.Update(b.Context(), portals[i%2])
			if err != nil || !pushed {
				b.Fatalf("Update = %v, %v", pushed, err)
			}
			i++
		}
		b.ReportMetric(float64(len(s.Groups())), "groups")
	})

	// A Portal that changed only where Envoy does not look (descriptions):
	// translate and hash, nothing validated or pushed.
	b.Run("retranslate-unchanged", func(b *testing.B) {
		s := xds.NewServer(b.Context(), slog.New(slog.DiscardHandler), xds.Options{}, nil)
		if _, err := s.Update(b.Context(), portals[0]); err != nil {
			b.Fatal(err)
		}
		described := [2][]registry.Route{benchPortal(0), benchPortal(0)}
		for i := range described {
			for j := range described[i] {
				described[i][j].Description = fmt.Sprintf("variant %d", i)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			pushed, err := s.Update(b.Context(), described[i%2])
			if err != nil || pushed {
				b.Fatalf("Update = %v, %v", pushed, err)
			}
			i++
		}
	})

	// The very same Portal again: recognized by its input hash, not
	// translated at all.
	b.Run("unchanged", func(b *testing.B) {
		s := xds.NewServer(b.Context(), slog.New(slog.DiscardHandler), xds.Options{}, nil)
		if _, err := s.Update(b.Context(), portals[0]); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			pushed, err := s.Update(b.Context(), portals[0])
			if err != nil || pushed {
				b.Fatalf("Update = %v, %v", pushed, err)
			}
		}
	})
}
