package xds_test

import (
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// TestServerClusters checks the effective settings Clusters reports against
// the layers they merge and against the clusters the same build pushed.
func TestServerClusters(t *testing.T) {
	portalCluster := &registry.ClusterSettings{
		ConnectTimeout: config.Duration(2 * time.Second),
		MaxRetries:     1,
		LBPolicy:       "LEAST_REQUEST",
	}
	tests := []struct {
		name      string
		cluster   *registry.ClusterSettings
		overrides string
		check     func(t *testing.T, v xds.ClusterView)
	}{
		{
			name: "built-in defaults",
			check: func(t *testing.T, v xds.ClusterView) {
				s := v.Settings
				if s.ConnectTimeout.D() != registry.DefaultConnectTimeout || s.RequestTimeout.D() != registry.DefaultRequestTimeout ||
					s.MaxRetries != registry.DefaultMaxRetries || s.MaxConcurrentRetries != registry.DefaultMaxRetries ||
					s.LBPolicy != registry.DefaultLBPolicy || !slices.Equal(s.RetryOn, xds.DefaultRetryOn) ||
					s.OutlierDetection != nil || s.HealthCheck != nil || s.TLS || s.SNI != "" {
					t.Errorf("settings = %+v", s)
				}
				if len(v.Origins) != 0 {
					t.Errorf("origins = %v, want none", v.Origins)
				}
			},
		},
		{
			name:    "Portal cluster object",
			cluster: portalCluster,
			check: func(t *testing.T, v xds.ClusterView) {
				s := v.Settings
				if s.ConnectTimeout.D() != 2*time.Second || s.MaxRetries != 1 || s.MaxConcurrentRetries != 1 || s.LBPolicy != "LEAST_REQUEST" {
					t.Errorf("settings = %+v", s)
				}
				want := map[string]string{"connectTimeout": "the Portal cluster object", "maxRetries": "the Portal cluster object", "lbPolicy": "the Portal cluster object"}
				if !maps.Equal(v.Origins, want) {
					t.Errorf("origins = %v, want %v", v.Origins, want)
				}
			},
		},
		{
			name:    "overrides defaults and the service entry win over the Portal",
			cluster: portalCluster,
			overrides: "defaults: {connectTimeout: 3s, maxConnections: 10, outlierDetection: {}}\n" +
				"services:\n  weather: {connectTimeout: 4s, perTryTimeout: 5s, retryOn: [5xx], healthCheck: {path: /ready}}\n",
			check: func(t *testing.T, v xds.ClusterView) {
				s := v.Settings
				if s.ConnectTimeout.D() != 4*time.Second || s.MaxConnections != 10 || s.MaxRetries != 1 ||
					s.PerTryTimeout == nil || s.PerTryTimeout.D() != 5*time.Second || !slices.Equal(s.RetryOn, []string{"5xx"}) {
					t.Errorf("settings = %+v", s)
				}
				if s.OutlierDetection == nil || s.OutlierDetection.Consecutive5xx != 5 {
					t.Errorf("outlierDetection = %+v, want on with its defaults", s.OutlierDetection)
				}
				if s.HealthCheck == nil || s.HealthCheck.Path != "/ready" || s.HealthCheck.Interval.D() != 5*time.Second {
					t.Errorf("healthCheck = %+v", s.HealthCheck)
				}
				want := map[string]string{
					"connectTimeout":   "overrides services.weather",
					"perTryTimeout":    "overrides services.weather",
					"retryOn":          "overrides services.weather",
					"healthCheck":      "overrides services.weather",
					"maxConnections":   "overrides defaults",
					"outlierDetection": "overrides defaults",
					"maxRetries":       "the Portal cluster object",
					"lbPolicy":         "the Portal cluster object",
				}
				if !maps.Equal(v.Origins, want) {
					t.Errorf("origins = %v, want %v", v.Origins, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ov *xds.Overrides
			if tt.overrides != "" {
				var err error
				if ov, err = xds.ParseOverrides([]byte(tt.overrides)); err != nil {
					t.Fatal(err)
				}
			}
			s := xds.NewServer(t.Context(), slog.New(slog.DiscardHandler), xds.Options{Overrides: ov}, nil)
			if got := s.Clusters(); got != nil {
				t.Fatalf("Clusters before the first build = %+v, want nil", got)
			}
			routes := []registry.Route{
				{Key: "core", ToolServices: []registry.ToolService{{Name: "weather", URL: "http://10.0.0.1:8080", Cluster: tt.cluster}}},
				{Key: "ops", ToolServices: []registry.ToolService{{Name: "weather", URL: "http://10.0.0.1:8080", Cluster: tt.cluster}}},
			}
			if _, err := s.Update(t.Context(), routes); err != nil {
				t.Fatal(err)
			}
			views := s.Clusters()
			if len(views) != 1 {
				t.Fatalf("Clusters = %+v, want one (weather)", views)
			}
			v := views[0]
			if v.Service != "weather" || v.Cluster != wire.ClusterName("weather") || v.Protocol != "toolservice" ||
				v.Endpoint != "http://10.0.0.1:8080" || !slices.Equal(v.Routes, []string{"core", "ops"}) {
				t.Errorf("view = %+v", v)
			}
			tt.check(t, v)
			// The view is what was pushed.
			c := pushedCluster(t, s, v.Cluster)
			if c.GetConnectTimeout().AsDuration() != v.Settings.ConnectTimeout.D() {
				t.Errorf("pushed connect timeout %s, view %s", c.GetConnectTimeout().AsDuration(), v.Settings.ConnectTimeout.D())
			}
			if max := c.GetCircuitBreakers().GetThresholds()[0].GetMaxConnections().GetValue(); max != v.Settings.MaxConnections {
				t.Errorf("pushed max connections %d, view %d", max, v.Settings.MaxConnections)
			}
		})
	}
}

// TestServerClustersFollowOverrides: new overrides show at once; overrides
// that cannot be put in force leave the view on the ones that are.
func TestServerClustersFollowOverrides(t *testing.T) {
	s := xds.NewServer(t.Context(), slog.New(slog.DiscardHandler), xds.Options{}, nil)
	routes := []registry.Route{{Key: "core", ToolServices: []registry.ToolService{
		{Name: "search", URL: "https://search.example.com", Protocol: registry.ProtocolMCP},
	}}}
	if _, err := s.Update(t.Context(), routes); err != nil {
		t.Fatal(err)
	}
	v := s.Clusters()[0]
	if v.Protocol != "mcp" || !v.Settings.TLS || v.Settings.SNI != "search.example.com" || v.Endpoint != "https://search.example.com" {
		t.Errorf("view = %+v", v)
	}
	good, err := xds.ParseOverrides([]byte("services:\n  search: {requestTimeout: 1m, sni: api.example.com}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetOverrides(t.Context(), good); err != nil {
		t.Fatal(err)
	}
	v = s.Clusters()[0]
	if v.Settings.RequestTimeout.D() != time.Minute || v.Settings.SNI != "api.example.com" || v.Origins["sni"] != "overrides services.search" {
		t.Errorf("after the overrides: %+v", v)
	}
	// perTryTimeout above requestTimeout fails the build: the good overrides stay.
	bad, err := xds.ParseOverrides([]byte("services:\n  search: {requestTimeout: 1s, perTryTimeout: 2s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetOverrides(t.Context(), bad); err == nil {
		t.Fatal("SetOverrides took perTryTimeout above requestTimeout")
	}
	if v = s.Clusters()[0]; v.Settings.RequestTimeout.D() != time.Minute {
		t.Errorf("after rejected overrides: requestTimeout %s, want the 1m in force", v.Settings.RequestTimeout.D())
	}
}

func pushedCluster(t *testing.T, s *xds.Server, name string) *clusterv3.Cluster {
	t.Helper()
	for _, r := range s.Current().Clusters {
		if c := r.(*clusterv3.Cluster); c.GetName() == name {
			return c
		}
	}
	t.Fatalf("no cluster %s pushed", name)
	return nil
}
