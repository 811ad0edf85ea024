package xds_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

const waitFor = 10 * time.Second // bound on every wait for the server

func testRoutes(services ...string) []registry.Route {
	r := registry.Route{Key: "core"}
	for i, s := range services {
		r.ToolServices = append(r.ToolServices, registry.ToolService{
			Name: s,
			URL:  "http://10.0.0." + string(rune('1'+i)) + ":8080",
		})
	}
	return []registry.Route{r}
}

// startServer runs an xds.Server on 127.0.0.1 and returns it with a client
// connection and the metrics registry.
func startServer(t *testing.T) (*xds.Server, *grpc.ClientConn, *prometheus.Registry) {
	t.Helper()
	return startServerWith(t, xds.Options{})
}

// startServerWith is startServer with options.
func startServerWith(t *testing.T, opts xds.Options) (*xds.Server, *grpc.ClientConn, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s := xds.NewServer(t.Context(), slog.New(slog.DiscardHandler), opts, reg)
	gs := grpc.NewServer()
	s.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return s, cc, reg
}

// ads is a state-of-the-world ADS stream driven the way Envoy drives it.
type ads struct {
	t      *testing.T
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node   *corev3.Node
	in     chan *discoveryv3.DiscoveryResponse
}

func newADS(t *testing.T, cc *grpc.ClientConn, nodeID string) *ads {
	t.Helper()
	return newADSNode(t, cc, &corev3.Node{Id: nodeID, Cluster: "toolmesh"})
}

// newADSNode opens an ADS stream for the node.
func newADSNode(t *testing.T, cc *grpc.ClientConn, node *corev3.Node) *ads {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := &ads{t: t, stream: st, node: node, in: make(chan *discoveryv3.DiscoveryResponse, 16)}
	go func() {
		defer close(a.in)
		for {
			resp, err := st.Recv()
			if err != nil {
				return
			}
			a.in <- resp
		}
	}()
	return a
}

func (a *ads) send(req *discoveryv3.DiscoveryRequest) {
	a.t.Helper()
	req.Node = a.node
	if err := a.stream.Send(req); err != nil {
		a.t.Fatalf("send %s: %v", req.GetTypeUrl(), err)
	}
}

// recv returns the next response, failing the test if none comes in time.
func (a *ads) recv() *discoveryv3.DiscoveryResponse {
	a.t.Helper()
	select {
	case resp, ok := <-a.in:
		if !ok {
			a.t.Fatal("ads stream closed")
		}
		return resp
	case <-time.After(waitFor):
		a.t.Fatal("no discovery response in time")
	}
	return nil
}

// recvTypes reads responses until it has one of each wanted type.
func (a *ads) recvTypes(typeURLs ...string) map[string]*discoveryv3.DiscoveryResponse {
	a.t.Helper()
	got := map[string]*discoveryv3.DiscoveryResponse{}
	for len(got) < len(typeURLs) {
		resp := a.recv()
		if !slices.Contains(typeURLs, resp.GetTypeUrl()) {
			a.t.Fatalf("unexpected response of type %s", resp.GetTypeUrl())
		}
		got[resp.GetTypeUrl()] = resp
	}
	return got
}

func ack(resp *discoveryv3.DiscoveryResponse, names ...string) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{
		TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(),
		ResponseNonce: resp.GetNonce(), ResourceNames: names,
	}
}

func names(t *testing.T, resp *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range resp.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		switch r := m.(type) {
		case interface{ GetName() string }:
			out = append(out, r.GetName())
		case interface{ GetClusterName() string }:
			out = append(out, r.GetClusterName())
		}
	}
	slices.Sort(out) // the cache answers in map order
	return out
}

func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// eventually polls cond until it holds, bounded by waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestServerSotW(t *testing.T) {
	s, cc, reg := startServer(t)
	ctx := t.Context()
	pushed, err := s.Update(ctx, testRoutes("weather", "search"))
	if err != nil || !pushed {
		t.Fatalf("first Update = %v, %v; want pushed", pushed, err)
	}
	v1 := s.Version()

	// Envoy's ADS sequence: wildcard CDS and LDS, then EDS and RDS by name
	// (ACKing CDS and LDS with those requests), then ACK EDS and RDS.
	a := newADS(t, cc, "envoy-1")
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	first := a.recvTypes(resourcev3.ClusterType, resourcev3.ListenerType)
	cds, lds := first[resourcev3.ClusterType], first[resourcev3.ListenerType]
	if got := names(t, cds); !slices.Equal(got, []string{"toolsvc_search", "toolsvc_weather"}) {
		t.Fatalf("CDS names = %v", got)
	}
	if got := names(t, lds); !slices.Equal(got, []string{wire.ListenerName}) {
		t.Fatalf("LDS names = %v", got)
	}
	if cds.GetVersionInfo() != v1 || lds.GetVersionInfo() != v1 {
		t.Fatalf("versions %s/%s, want %s", cds.GetVersionInfo(), lds.GetVersionInfo(), v1)
	}
	a.send(ack(cds))
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: []string{"toolsvc_search", "toolsvc_weather"}})
	a.send(ack(lds))
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: []string{wire.RouteConfigName}})
	second := a.recvTypes(resourcev3.EndpointType, resourcev3.RouteType)
	eds, rds := second[resourcev3.EndpointType], second[resourcev3.RouteType]
	if got := names(t, eds); !slices.Equal(got, []string{"toolsvc_search", "toolsvc_weather"}) {
		t.Fatalf("EDS names = %v", got)
	}
	if got := names(t, rds); !slices.Equal(got, []string{wire.RouteConfigName}) {
		t.Fatalf("RDS names = %v", got)
	}
	a.send(ack(eds, "toolsvc_search", "toolsvc_weather"))
	a.send(ack(rds, wire.RouteConfigName))

	// The same Portal again: nothing to push, version unchanged.
	pushed, err = s.Update(ctx, testRoutes("weather", "search"))
	if err != nil || pushed {
		t.Fatalf("unchanged Update = %v, %v; want not pushed", pushed, err)
	}
	if s.Version() != v1 {
		t.Fatalf("version changed on an unchanged Portal: %s → %s", v1, s.Version())
	}

	// A changed Portal pushes a new version. The next responses on the
	// stream carry it, which also shows the no-op Update sent nothing.
	pushed, err = s.Update(ctx, testRoutes("weather", "search", "maps"))
	if err != nil || !pushed {
		t.Fatalf("changed Update = %v, %v; want pushed", pushed, err)
	}
	v2 := s.Version()
	if v2 == v1 {
		t.Fatal("version unchanged after the Portal changed")
	}
	resp := a.recv()
	if resp.GetVersionInfo() != v2 {
		t.Fatalf("next response has version %s, want %s", resp.GetVersionInfo(), v2)
	}
	if got := s.Current(); got == nil || len(got.Clusters) != 3 {
		t.Fatalf("Current() does not hold the new snapshot: %v", got)
	}

	// A NACK of that response is counted.
	nack := ack(resp)
	nack.VersionInfo = v1 // Envoy NACKs with the last version it accepted
	nack.ErrorDetail = &statuspb.Status{Code: 3, Message: "test rejects this"}
	a.send(nack)
	eventually(t, "the NACK to be counted", func() bool { return metricValue(t, reg, "toolmesh_xds_nacks_total") == 1 })

	// The rejected version is not sent again (go-control-plane would resend
	// it at once, in a loop, since the NACK names the older version): the
	// other types' v2 responses arrive, the NACKed type's does not.
	quiet := time.After(500 * time.Millisecond)
	for done := false; !done; {
		select {
		case r := <-a.in:
			if r.GetTypeUrl() == resp.GetTypeUrl() {
				t.Fatalf("the NACKed %s version %s was sent again", r.GetTypeUrl(), r.GetVersionInfo())
			}
		case <-quiet:
			done = true
		}
	}
	// The next change is sent as usual.
	if _, err := s.Update(ctx, testRoutes("weather", "search", "maps", "news")); err != nil {
		t.Fatal(err)
	}
	for {
		r := a.recv()
		if r.GetTypeUrl() == resp.GetTypeUrl() {
			if r.GetVersionInfo() != s.Version() {
				t.Fatalf("after the NACK, %s got version %s, want %s", r.GetTypeUrl(), r.GetVersionInfo(), s.Version())
			}
			break
		}
	}

	if got := metricValue(t, reg, "toolmesh_xds_pushes_total"); got != 3 {
		t.Errorf("toolmesh_xds_pushes_total = %v, want 3", got)
	}
	if got := metricValue(t, reg, "toolmesh_xds_build_duration_seconds"); got != 4 {
		t.Errorf("build duration observations = %v, want 4", got)
	}
	if got := metricValue(t, reg, "toolmesh_xds_streams"); got != 1 {
		t.Errorf("toolmesh_xds_streams = %v, want 1", got)
	}
}

// TestServerNewNodeGetsCurrentSnapshot checks that a node that connects
// after the last Update (any node id) is answered at once.
func TestServerNewNodeGetsCurrentSnapshot(t *testing.T) {
	s, cc, _ := startServer(t)
	if _, err := s.Update(t.Context(), testRoutes("weather")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gateway-a", "sidecar-b"} {
		a := newADS(t, cc, id)
		a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
		resp := a.recv()
		if resp.GetVersionInfo() != s.Version() || !slices.Equal(names(t, resp), []string{"toolsvc_weather"}) {
			t.Fatalf("node %s got version %s %v", id, resp.GetVersionInfo(), names(t, resp))
		}
	}
}

func TestServerDelta(t *testing.T) {
	s, cc, reg := startServer(t)
	if _, err := s.Update(t.Context(), testRoutes("weather", "search")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "envoy-delta"}
	for _, typeURL := range []string{resourcev3.ClusterType, resourcev3.ListenerType} {
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typeURL}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string][]string{}
	for len(got) < 2 {
		resp, err := recvDelta(t, st)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetResources() {
			got[resp.GetTypeUrl()] = append(got[resp.GetTypeUrl()], r.GetName())
			if r.GetVersion() == "" {
				t.Errorf("delta resource %s has no version", r.GetName())
			}
			if resp.GetTypeUrl() == resourcev3.ClusterType {
				var c clusterv3.Cluster
				if err := r.GetResource().UnmarshalTo(&c); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got[resourcev3.ClusterType])
	if !slices.Equal(got[resourcev3.ClusterType], []string{"toolsvc_search", "toolsvc_weather"}) {
		t.Errorf("delta clusters = %v", got[resourcev3.ClusterType])
	}
	if !slices.Equal(got[resourcev3.ListenerType], []string{wire.ListenerName}) {
		t.Errorf("delta listeners = %v", got[resourcev3.ListenerType])
	}
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl: resourcev3.ClusterType, ErrorDetail: &statuspb.Status{Code: 3, Message: "delta nack"},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delta NACK to be counted", func() bool { return metricValue(t, reg, "toolmesh_xds_nacks_total") == 1 })
	cancel()
	eventually(t, "the stream gauge to drop", func() bool { return metricValue(t, reg, "toolmesh_xds_streams") == 0 })
}

func recvDelta(t *testing.T, st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) (*discoveryv3.DeltaDiscoveryResponse, error) {
	t.Helper()
	type result struct {
		resp *discoveryv3.DeltaDiscoveryResponse
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		resp, err := st.Recv()
		ch <- result{resp, err}
	}()
	select {
	case r := <-ch:
		if r.err == io.EOF {
			t.Fatal("delta stream closed")
		}
		return r.resp, r.err
	case <-time.After(waitFor):
		t.Fatal("no delta response in time")
	}
	return nil, nil
}

// TestServerUpdateErrorKeepsSnapshot checks that a Portal the translator
// rejects leaves the last good snapshot in place.
func TestServerUpdateErrorKeepsSnapshot(t *testing.T) {
	s, _, reg := startServer(t)
	if _, err := s.Update(t.Context(), testRoutes("weather")); err != nil {
		t.Fatal(err)
	}
	v := s.Version()
	bad := testRoutes("weather")
	bad[0].ToolServices[0].URL = "ftp://nowhere"
	if pushed, err := s.Update(t.Context(), bad); err == nil || pushed {
		t.Fatalf("Update of a bad Portal = %v, %v; want an error", pushed, err)
	}
	if s.Version() != v || s.Current() == nil {
		t.Fatal("a failed Update changed the served snapshot")
	}
	if got := metricValue(t, reg, "toolmesh_xds_build_errors_total"); got != 1 {
		t.Errorf("toolmesh_xds_build_errors_total = %v, want 1", got)
	}
}

// TestServerIgnoresChangesEnvoyCannotSee checks that a Portal change that
// does not change any resource (a description, a manifest path) keeps the
// version and pushes nothing, while the translation still runs.
func TestServerIgnoresChangesEnvoyCannotSee(t *testing.T) {
	s, _, reg := startServer(t)
	routes := testRoutes("weather")
	if _, err := s.Update(t.Context(), routes); err != nil {
		t.Fatal(err)
	}
	v := s.Version()
	routes = testRoutes("weather")
	routes[0].Description = "now with a description"
	routes[0].ToolServices[0].ManifestPath = "/v2/manifest"
	pushed, err := s.Update(t.Context(), routes)
	if err != nil || pushed || s.Version() != v {
		t.Fatalf("Update = %v, %v, version %s → %s; want no push", pushed, err, v, s.Version())
	}
	if got := metricValue(t, reg, "toolmesh_xds_build_duration_seconds"); got != 2 {
		t.Errorf("builds observed = %v, want 2 (the second one translated)", got)
	}
	if got := metricValue(t, reg, "toolmesh_xds_pushes_total"); got != 1 {
		t.Errorf("pushes = %v, want 1", got)
	}
}
