package xds

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// TestTranslateNotifications: with Options.Notifications the cluster and,
// first in the route table, its route (no route timeout) are emitted; the
// addresses decide static or strict DNS discovery; without it neither is.
func TestTranslateNotifications(t *testing.T) {
	routes := []registry.Route{{Key: "r", ToolServices: []registry.ToolService{{Name: "svc", URL: "http://10.0.0.5:8080"}}}}
	tests := []struct {
		name    string
		n       *Notifications
		static  bool
		err     string
		limit   uint32
		present bool
	}{
		{name: "off"},
		{name: "two IP endpoints", n: &Notifications{Addresses: []string{"127.0.0.1:9003", "127.0.0.2:9003"}, MaxStreams: 20},
			static: true, limit: 20, present: true},
		{name: "DNS name", n: &Notifications{Addresses: []string{"toolmesh:9003"}}, limit: 10000, present: true},
		{name: "mixed", n: &Notifications{Addresses: []string{"toolmesh:9003", "127.0.0.1:9003"}}, err: "mix"},
		{name: "no port", n: &Notifications{Addresses: []string{"toolmesh"}}, err: "host:port"},
		{name: "none", n: &Notifications{}, err: "no address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Translate(routes, Options{Notifications: tc.n})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var c *clusterv3.Cluster
			for _, r := range res.Clusters {
				if r.(*clusterv3.Cluster).GetName() == wire.NotificationsCluster {
					c = r.(*clusterv3.Cluster)
				}
			}
			first := res.Routes[0].(*routev3.RouteConfiguration).GetVirtualHosts()[0].GetRoutes()[0]
			if !tc.present {
				if c != nil || first.GetName() == wire.NotificationsCluster {
					t.Fatal("notifications cluster or route emitted without Options.Notifications")
				}
				return
			}
			if c == nil {
				t.Fatal("no notifications cluster")
			}
			if got := c.GetType() == clusterv3.Cluster_STATIC && c.GetClusterType() == nil; got != tc.static {
				t.Errorf("static = %v, want %v", got, tc.static)
			}
			if n := len(c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()); n != len(tc.n.Addresses) {
				t.Errorf("%d endpoints, want %d", n, len(tc.n.Addresses))
			}
			th := c.GetCircuitBreakers().GetThresholds()[0]
			if th.GetMaxRequests().GetValue() != tc.limit || th.GetMaxConnections().GetValue() != tc.limit {
				t.Errorf("circuit breakers %v, want %d", th, tc.limit)
			}
			a := first.GetRoute()
			if first.GetName() != wire.NotificationsCluster || a.GetCluster() != wire.NotificationsCluster {
				t.Fatalf("first route %v, want the notifications route", first)
			}
			if a.GetTimeout() == nil || a.GetTimeout().AsDuration() != 0 {
				t.Errorf("route timeout %v, want an explicit 0s (the 15s default would end streams)", a.GetTimeout())
			}
			if h := first.GetMatch().GetHeaders()[0]; h.GetName() != wire.ClusterHeader ||
				h.GetStringMatch().GetExact() != wire.NotificationsCluster {
				t.Errorf("route match %v", first.GetMatch())
			}
		})
	}
}
