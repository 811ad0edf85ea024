package xds

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcxds "google.golang.org/grpc/xds"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// pinNode serves the node with this id its own snapshot from now on.
func (s *Server) pinNode(ctx context.Context, nodeID string, res map[resourcev3.Type][]types.Resource, version string) error {
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		return err
	}
	s.groups.pinned.Store(nodeID, struct{}{})
	return s.cache.SetSnapshot(ctx, pinnedKey(nodeID), snap)
}

// grpcProbeResources adapts a translated snapshot for gRPC's xDS client,
// which cannot consume the Envoy listener (it needs an api_listener named
// after the target) nor the cluster-header routes (it skips them). It
// returns an api_listener and a route with a plain cluster action for the
// target, plus the very Cluster and ClusterLoadAssignment that Translate
// made for the Tool Service.
func grpcProbeResources(t *testing.T, target, toolService string, res *Resources) map[resourcev3.Type][]types.Resource {
	t.Helper()
	clusterName := wire.ClusterName(toolService)
	routeName := "probe_" + target
	router, err := pack(&routerv3.Router{})
	if err != nil {
		t.Fatal(err)
	}
	hcm, err := pack(&hcmv3.HttpConnectionManager{
		StatPrefix: "probe",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: routeName,
			ConfigSource:    adsConfigSource(),
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: wellknown.Router, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {&listenerv3.Listener{
			Name:        target,
			ApiListener: &listenerv3.ApiListener{ApiListener: hcm},
		}},
		resourcev3.RouteType: {&routev3.RouteConfiguration{
			Name: routeName,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    target,
				Domains: []string{target},
				Routes: []*routev3.Route{{
					Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusterName}}},
				}},
			}},
		}},
	}
	for _, c := range res.Clusters {
		if cachev3.GetResourceName(c) == clusterName {
			out[resourcev3.ClusterType] = append(out[resourcev3.ClusterType], c)
		}
	}
	for _, e := range res.Endpoints {
		if cachev3.GetResourceName(e) == clusterName {
			out[resourcev3.EndpointType] = append(out[resourcev3.EndpointType], e)
		}
	}
	if len(out[resourcev3.ClusterType]) != 1 || len(out[resourcev3.EndpointType]) != 1 {
		t.Fatalf("snapshot has no EDS cluster %s", clusterName)
	}
	for _, rs := range out {
		for _, r := range rs {
			if err := ValidateDeep(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// TestGRPCXDSClientConsumesClusters uses grpc-go's xDS resolver as an
// independent xDS consumer: an RPC to xds:///<target> only reaches the
// health server if gRPC accepted the Cluster and ClusterLoadAssignment that
// Translate generated (same bytes as Envoy gets) over SotW ADS.
func TestGRPCXDSClientConsumesClusters(t *testing.T) {
	ctx := t.Context()

	// The Tool Service: a real gRPC health server on 127.0.0.1.
	upstream := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(upstream, hs)
	upLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = upstream.Serve(upLis) }()
	t.Cleanup(upstream.Stop)

	// The control plane.
	reg := prometheus.NewRegistry()
	s := NewServer(ctx, slog.New(slog.DiscardHandler), Options{}, reg)
	cp := grpc.NewServer()
	s.Register(cp)
	cpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cp.Serve(cpLis) }()
	t.Cleanup(cp.Stop)

	upPort := upLis.Addr().(*net.TCPAddr).Port
	routes := []registry.Route{{Key: "probe", ToolServices: []registry.ToolService{{
		Name:    "health",
		URL:     "http://127.0.0.1:" + strconv.Itoa(upPort),
		Cluster: &registry.ClusterSettings{HTTP2: true, LBPolicy: "LEAST_REQUEST"},
	}}}}
	if _, err := s.Update(ctx, routes); err != nil {
		t.Fatal(err)
	}
	const target, nodeID = "tool-health", "grpc-probe"
	if err := s.pinNode(ctx, nodeID, grpcProbeResources(t, target, "health", s.Current()), s.Version()); err != nil {
		t.Fatal(err)
	}

	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": "passthrough:///%s", "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": %q}
	}`, cpLis.Addr(), nodeID)
	rb, err := grpcxds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///"+target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })

	rpcCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(rpcCtx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("health check through xds:///%s: %v", target, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("status %v", resp.GetStatus())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "toolmesh_xds_nacks_total" {
			t.Fatalf("gRPC NACKed resources: %v", mf)
		}
	}
	if s.cache.GetStatusInfo(pinnedKey(nodeID)) == nil {
		t.Fatal("the probe was not served from its pinned snapshot")
	}
}
