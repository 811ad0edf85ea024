package xds

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// Notifications is where Envoy reaches the notifications servers of the
// extproc processes (docs/decisions/0012-change-notification-streams.md).
// With it, xDS emits the cluster wire.NotificationsCluster and, first in
// the route table, a route the extproc server selects with
// x-toolmesh-cluster, as it selects a Tool Service:
//
//	cluster   HTTP/1.1, static for IP addresses, strict DNS (DnsCluster)
//	          for names, so a name that resolves to every replica spreads
//	          streams over them; circuit breakers max_connections,
//	          max_pending_requests and max_requests = MaxStreams (Envoy's
//	          default of 1024 each, cluster/v3/circuit_breaker.proto, would
//	          cap the streams below the gateway's own bound: HTTP/1.1 holds
//	          one connection per stream).
//	route     timeout 0s: route_components.proto RouteAction.timeout "A
//	          value of 0 will disable the route's timeout" (the 15s default
//	          would end every stream); no idle_timeout, so the connection
//	          manager's stream_idle_timeout (5 minutes by default,
//	          http_connection_manager.proto) applies, which the stream's
//	          keep-alive comments reset; no retries.
type Notifications struct {
	// Addresses are host:port, all IP literals or all DNS names.
	Addresses []string
	// MaxStreams is the cluster's circuit-breaker limit (0: 10000).
	MaxStreams uint32
}

// notificationsConnectTimeout bounds the connect to a notifications server,
// a process next to Envoy or in its mesh.
const notificationsConnectTimeout = time.Second

// Check reports what Translate would reject in n.
func (n *Notifications) Check() error { return n.check() }

func (n *Notifications) check() error {
	if n == nil {
		return nil
	}
	if len(n.Addresses) == 0 {
		return fmt.Errorf("options: Notifications has no address")
	}
	ips := 0
	for _, a := range n.Addresses {
		host, _, err := hostPort("notifications address", a)
		if err != nil {
			return err
		}
		if _, err := netip.ParseAddr(host); err == nil {
			ips++
		}
	}
	if ips != 0 && ips != len(n.Addresses) {
		return fmt.Errorf("options: notifications addresses %q mix IP addresses and DNS names", n.Addresses)
	}
	return nil
}

// hostPort splits an option's host:port (field names the option in the
// error): the host must be set and the port 1 to 65535.
func hostPort(field, addr string) (host string, port uint32, err error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("options: %s %q is not host:port", field, addr)
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("options: %s %q: port must be 1 to 65535", field, addr)
	}
	return host, uint32(p), nil
}

// buildNotificationsCluster is the notifications cluster, nil without
// Options.Notifications.
func buildNotificationsCluster(opts Options) (*clusterv3.Cluster, error) {
	n := opts.Notifications
	if n == nil {
		return nil, nil
	}
	limit := n.MaxStreams
	limit = cmp.Or(limit, 10000)
	hpo, err := httpProtocolOptions(false, time.Hour)
	if err != nil {
		return nil, err
	}
	eps := make([]*endpointv3.LbEndpoint, 0, len(n.Addresses))
	static := true
	for _, a := range n.Addresses {
		host, port, _ := hostPort("", a) // checked by Options.check
		if _, err := netip.ParseAddr(host); err != nil {
			static = false
		}
		eps = append(eps, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: socketAddress(host, port),
			}},
		})
	}
	c := &clusterv3.Cluster{
		Name:                          wire.NotificationsCluster,
		ConnectTimeout:                durationpb.New(notificationsConnectTimeout),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: hpo},
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			Priority:           corev3.RoutingPriority_DEFAULT,
			MaxConnections:     wrapperspb.UInt32(limit),
			MaxPendingRequests: wrapperspb.UInt32(limit),
			MaxRequests:        wrapperspb.UInt32(limit),
		}}},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: wire.NotificationsCluster,
			Endpoints:   []*endpointv3.LocalityLbEndpoints{{LbEndpoints: eps}},
		},
	}
	if opts.ControlTLS != nil {
		// The notifications server speaks HTTP/1.1 to Envoy (above).
		if c.TransportSocket, err = controlTransportSocket(opts.ControlTLS, "http/1.1"); err != nil {
			return nil, err
		}
	}
	return staticOrDNS(c, static)
}

// notificationsRoute sends what the extproc server marked for the
// notifications cluster there, without a route timeout.
func notificationsRoute() *routev3.Route {
	return &routev3.Route{
		Name: wire.NotificationsCluster,
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers: []*routev3.HeaderMatcher{{
				Name:                 wire.ClusterHeader,
				HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: exact(wire.NotificationsCluster)},
			}},
		},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: wire.NotificationsCluster},
			Timeout:          durationpb.New(0),
		}},
		RequestHeadersToRemove: []string{wire.ClusterHeader},
	}
}
