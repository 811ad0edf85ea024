package dataplane

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// xdsServer is a go-control-plane ADS server on 127.0.0.1 that records the
// DiscoveryRequests it receives.
type xdsServer struct {
	cache cachev3.SnapshotCache
	addr  string
	mu    sync.Mutex
	reqs  []*discoveryv3.DiscoveryRequest
}

func startXDS(t *testing.T) *xdsServer {
	t.Helper()
	x := &xdsServer{cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)}
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
		x.mu.Lock()
		x.reqs = append(x.reqs, proto.Clone(r).(*discoveryv3.DiscoveryRequest))
		x.mu.Unlock()
		return nil
	}}
	srv := serverv3.NewServer(t.Context(), x.cache, cb)
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	x.addr = lis.Addr().String()
	return x
}

func (x *xdsServer) set(t *testing.T, version string, res map[resourcev3.Type][]types.Resource) {
	t.Helper()
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Consistent(); err != nil {
		t.Fatal(err)
	}
	if err := x.cache.SetSnapshot(t.Context(), "node-1", snap); err != nil {
		t.Fatal(err)
	}
}

// acked reports whether the client ACKed version for typeURL.
func (x *xdsServer) acked(typeURL, version string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.reqs {
		if r.GetTypeUrl() == typeURL && r.GetVersionInfo() == version && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil {
			return true
		}
	}
	return false
}

// nack returns the error detail of a NACK for typeURL, if any.
func (x *xdsServer) nack(typeURL string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.reqs {
		if r.GetTypeUrl() == typeURL && r.GetErrorDetail() != nil {
			return r.GetErrorDetail().GetMessage()
		}
	}
	return ""
}

func (x *xdsServer) firstNode() *corev3.Node {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.reqs) == 0 {
		return nil
	}
	return x.reqs[0].GetNode()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func adsResources(t *testing.T, upAddr, directBody string) map[resourcev3.Type][]types.Resource {
	t.Helper()
	host, port, _ := net.SplitHostPort(upAddr)
	p, _ := strconv.Atoi(port)
	return setup{
		routes: []*routev3.Route{clusterRoute("/eds", "toolsvc_eds", nil), directRoute("/", 200, directBody)},
		clusters: []*clusterv3.Cluster{{
			Name:                 "toolsvc_eds",
			ConnectTimeout:       durationpb.New(time.Second),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     edsConfig(),
		}},
		endpoints: []*endpointv3.ClusterLoadAssignment{cla("toolsvc_eds", host, uint32(p))},
	}.resources(t)
}

func TestWatchADS(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("from eds")) })
	xs := startXDS(t)
	xs.set(t, "v1", adsResources(t, up.addr(), "v1"))

	dp, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- dp.WatchADS(ctx, xs.addr, &corev3.Node{Id: "node-1", Cluster: "toolmesh"}) }()

	waitFor(t, "the first configuration", dp.Ready)
	for _, typ := range []string{resourcev3.ClusterType, resourcev3.ListenerType, resourcev3.RouteType, resourcev3.EndpointType} {
		waitFor(t, "ACK of "+typ, func() bool { return xs.acked(typ, "v1") })
	}
	if n := xs.firstNode(); n.GetId() != "node-1" {
		t.Errorf("node %v", n)
	}
	srv := httptest.NewServer(dp)
	t.Cleanup(srv.Close)
	get := func(path string) string {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 64)
		n, _ := resp.Body.Read(b)
		return string(b[:n])
	}
	if got := get("/eds"); got != "from eds" {
		t.Fatalf("EDS route: %q", got)
	}

	// A listener the data plane cannot take is NACKed; the other types of
	// the same version (unchanged here) are ACKed, as Envoy does per type.
	bad := adsResources(t, up.addr(), "v1")
	rewriteHCM(t, bad, func(h *hcmv3.HttpConnectionManager) {
		h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "custom",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &structpb.Struct{})}}}, h.HttpFilters...)
	})
	xs.set(t, "v2", bad)
	waitFor(t, "NACK of the listener", func() bool { return xs.nack(resourcev3.ListenerType) != "" })
	if msg := xs.nack(resourcev3.ListenerType); !containsAll(msg, "custom", "not emulated") {
		t.Errorf("NACK detail %q", msg)
	}
	waitFor(t, "ACK of routes v2", func() bool { return xs.acked(resourcev3.RouteType, "v2") })
	if xs.acked(resourcev3.ListenerType, "v2") {
		t.Fatal("the rejected listener was ACKed")
	}
	if got := get("/"); got != "v1" {
		t.Fatalf("after the NACK: %q, want the v1 configuration", got)
	}

	// The stream survives the NACK: the next good version is applied.
	xs.set(t, "v3", adsResources(t, up.addr(), "v3"))
	waitFor(t, "v3", func() bool { return get("/") == "v3" })
	waitFor(t, "ACK of listener v3", func() bool { return xs.acked(resourcev3.ListenerType, "v3") })

	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WatchADS returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchADS did not return after cancel")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
