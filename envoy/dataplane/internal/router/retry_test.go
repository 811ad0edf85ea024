package router

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// TestRetryGivenBackWhenBackoffCut: a retry of a retriable status holds
// one of the cluster's max_retries (rq_retry_open) during its back-off and
// gives it back when the downstream goes away meanwhile, as a retry after a
// reset does; otherwise every such call would shrink the cluster's retry
// budget for good.
func TestRetryGivenBackWhenBackoffCut(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer up.Close()
	host, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	portN, _ := strconv.Atoi(port)
	cl, err := xdsconfig.CompileCluster(&clusterv3.Cluster{Name: "c", LoadAssignment: &endpointv3.ClusterLoadAssignment{
		ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
				Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: host,
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(portN)}}}}}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	cl.RT, cl.Transport = xdsconfig.NewClusterRuntime(cl.Limits), xdsconfig.NewTransport(cl)
	// A back-off of up to an hour: the downstream leaves during it.
	table, err := xdsconfig.CompileRouteTable(&routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{{
		Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"},
				RetryPolicy: &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(1),
					RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Hour)}}}}}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &headers.Map{H: []headers.Header{{Key: ":authority", Value: "x"}, {Key: ":path", Value: "/"}, {Key: ":method", Value: "GET"}}}
	rt := table.Match(h)
	downstream, leave := context.WithCancel(context.Background())
	defer leave()
	x := &Call{Downstream: downstream, Log: slog.New(slog.DiscardHandler), Headers: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, _ := x.Forward(downstream, rt, cl); resp != nil {
			resp.Body.Close()
		}
	}()
	// Leave once the retry is reserved (or the call ended: a back-off
	// drawn near zero retried at once, which gives its place back too).
wait:
	for deadline := time.Now().Add(30 * time.Second); cl.RT.Retries.Load() == 0; runtime.Gosched() {
		select {
		case <-done:
			break wait
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no retry reserved")
		}
	}
	leave()
	<-done
	if n := cl.RT.Retries.Load(); n != 0 {
		t.Fatalf("%d retries still open after the call ended", n)
	}
}
