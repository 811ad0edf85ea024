package xds_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

var allTypes = []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType}

// subscribe runs Envoy's ADS start-up sequence (wildcard CDS and LDS, then
// EDS for the EDS clusters and RDS, ACKing each) and returns the first
// response of each type.
func (a *ads) subscribe() map[string]*discoveryv3.DiscoveryResponse {
	a.t.Helper()
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	got := a.recvTypes(resourcev3.ClusterType, resourcev3.ListenerType)
	cds, lds := got[resourcev3.ClusterType], got[resourcev3.ListenerType]
	var eds []string
	for _, c := range clusters(a.t, cds) {
		if c.GetType() == clusterv3.Cluster_EDS {
			eds = append(eds, c.GetName())
		}
	}
	a.send(ack(cds))
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNames: eds})
	a.send(ack(lds))
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: []string{wire.RouteConfigName}})
	for k, v := range a.recvTypes(resourcev3.EndpointType, resourcev3.RouteType) {
		got[k] = v
	}
	a.send(ack(got[resourcev3.EndpointType], eds...))
	a.send(ack(got[resourcev3.RouteType], wire.RouteConfigName))
	return got
}

func clusters(t *testing.T, resp *discoveryv3.DiscoveryResponse) []*clusterv3.Cluster {
	t.Helper()
	var out []*clusterv3.Cluster
	for _, a := range resp.GetResources() {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, &c)
	}
	return out
}

// publicPaths returns the exact-path routes (the Portal routes' public
// paths) of an RDS response.
func publicPaths(t *testing.T, resp *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range resp.GetResources() {
		var rc routev3.RouteConfiguration
		if err := a.UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		out = append(out, pathsOf(&rc)...)
	}
	slices.Sort(out)
	return out
}

func pathsOf(rc *routev3.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if p := r.GetMatch().GetPath(); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// ackUntil ACKs every response the stream receives (EDS and RDS with
// their resource names, CDS and LDS as wildcards) until cond holds.
func (a *ads) ackUntil(what string, cond func() bool) {
	a.t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			a.t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case resp, ok := <-a.in:
			if !ok {
				a.t.Fatal("ads stream closed")
			}
			var rn []string
			if t := resp.GetTypeUrl(); t == resourcev3.EndpointType || t == resourcev3.RouteType {
				rn = names(a.t, resp)
			}
			a.send(ack(resp, rn...))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// labeledValue is the value of one labeled counter or gauge.
func labeledValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func groupVersion(s *xds.Server, key string) string {
	for _, g := range s.Groups() {
		if g.Key == key {
			return g.Version
		}
	}
	return ""
}

func nodeStatus(s *xds.Server, id string) (xds.NodeStatus, bool) {
	for _, n := range s.NodeStatus() {
		if n.NodeID == id {
			return n, true
		}
	}
	return xds.NodeStatus{}, false
}

var sidecarNodes = xds.Options{Nodes: []xds.NodeSelector{{Cluster: "billing-sidecar", Routes: []string{"billing"}}}}

// TestServerPerNodeSubsets connects a gateway and a billing sidecar: each
// gets its own listener routes and clusters, and a Portal change reaches
// only the nodes whose routes it touches.
func TestServerPerNodeSubsets(t *testing.T) {
	s, cc, reg := startServerWith(t, sidecarNodes)
	ctx := t.Context()
	portal := nodePortal()
	if pushed, err := s.Update(ctx, portal); err != nil || !pushed {
		t.Fatalf("Update = %v, %v", pushed, err)
	}
	sidecarGroup := sidecarNodes.GroupKey("billing-1", "billing-sidecar")
	nodes := []struct {
		node     *corev3.Node
		group    string
		clusters []string
		paths    []string
	}{
		{&corev3.Node{Id: "gw-1", Cluster: "gateway"}, xds.AllRoutesGroup,
			[]string{"toolsvc_audit", "toolsvc_invoices", "toolsvc_search", "toolsvc_weather"},
			[]string{"/mcp/billing", "/mcp/core", "/ops/admin"}},
		{&corev3.Node{Id: "billing-1", Cluster: "billing-sidecar"}, sidecarGroup,
			[]string{"toolsvc_invoices", "toolsvc_search"},
			[]string{"/mcp/billing"}},
	}
	streams := map[string]*ads{}
	for _, n := range nodes {
		a := newADSNode(t, cc, n.node)
		streams[n.node.GetId()] = a
		got := a.subscribe()
		if names := names(t, got[resourcev3.ClusterType]); !slices.Equal(names, n.clusters) {
			t.Errorf("%s: CDS %v, want %v", n.node.GetId(), names, n.clusters)
		}
		if paths := publicPaths(t, got[resourcev3.RouteType]); !slices.Equal(paths, n.paths) {
			t.Errorf("%s: RDS public paths %v, want %v", n.node.GetId(), paths, n.paths)
		}
		if names := names(t, got[resourcev3.ListenerType]); !slices.Equal(names, []string{wire.ListenerName}) {
			t.Errorf("%s: LDS %v", n.node.GetId(), names)
		}
		for typ, resp := range got {
			if resp.GetVersionInfo() != groupVersion(s, n.group) {
				t.Errorf("%s: %s version %s, want its group's %s", n.node.GetId(), typeName(typ), resp.GetVersionInfo(), groupVersion(s, n.group))
			}
		}
	}
	if groupVersion(s, xds.AllRoutesGroup) == groupVersion(s, sidecarGroup) {
		t.Fatal("gateway and sidecar share a version though their resources differ")
	}
	for _, n := range nodes {
		eventually(t, n.node.GetId()+" to ACK its group's version", func() bool {
			st, ok := nodeStatus(s, n.node.GetId())
			return ok && st.Connected && st.Group == n.group && st.LastACKVersion == groupVersion(s, n.group) &&
				st.GroupVersion == st.LastACKVersion && st.Version == st.LastACKVersion && st.Cluster == n.node.GetCluster()
		})
	}
	if got := metricValue(t, reg, "toolmesh_xds_connected_nodes"); got != 2 {
		t.Errorf("connected nodes = %v, want 2", got)
	}

	// A change to weather (core only): the gateway gets a new version, the
	// sidecar's group keeps its version and is not pushed.
	sidecarV1 := groupVersion(s, sidecarGroup)
	portal = nodePortal()
	portal[0].ToolServices[0].URL = "http://10.0.0.7:9090"
	if pushed, err := s.Update(ctx, portal); err != nil || !pushed {
		t.Fatalf("Update = %v, %v", pushed, err)
	}
	gwV2 := groupVersion(s, xds.AllRoutesGroup)
	for typ, resp := range streams["gw-1"].recvTypes(allTypes...) {
		if resp.GetVersionInfo() != gwV2 {
			t.Errorf("gateway %s version %s, want %s", typeName(typ), resp.GetVersionInfo(), gwV2)
		}
	}
	if groupVersion(s, sidecarGroup) != sidecarV1 {
		t.Error("a change outside the sidecar's routes changed its version")
	}
	if got := labeledValue(t, reg, "toolmesh_xds_pushes_total", "group", sidecarGroup); got != 1 {
		t.Errorf("sidecar pushes = %v, want 1", got)
	}

	// A change to search, shared by both: both are pushed. The sidecar's
	// next responses carry the new version, so it got nothing in between.
	portal[0].ToolServices[1].URL = "http://search.svc:8081"
	portal[1].ToolServices[1].URL = "http://search.svc:8081"
	if pushed, err := s.Update(ctx, portal); err != nil || !pushed {
		t.Fatalf("Update = %v, %v", pushed, err)
	}
	sidecarV2 := groupVersion(s, sidecarGroup)
	if sidecarV2 == sidecarV1 {
		t.Fatal("a change to a sidecar service did not change its version")
	}
	side := streams["billing-1"]
	for typ, resp := range side.recvTypes(allTypes...) {
		if resp.GetVersionInfo() != sidecarV2 {
			t.Errorf("sidecar %s version %s, want %s", typeName(typ), resp.GetVersionInfo(), sidecarV2)
		}
		if typ == resourcev3.ClusterType {
			for _, c := range clusters(t, resp) {
				if c.GetName() == "toolsvc_search" {
					port := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
					if port != 8081 {
						t.Errorf("sidecar search port %d, want 8081", port)
					}
				}
			}
		}
	}
	if got := labeledValue(t, reg, "toolmesh_xds_pushes_total", "group", sidecarGroup); got != 2 {
		t.Errorf("sidecar pushes = %v, want 2", got)
	}
}

func typeName(typeURL string) string { return typeURL[strings.LastIndexByte(typeURL, '.')+1:] }

// TestServerDeltaSidecar serves a sidecar over delta ADS: only its
// resources, and after a change to one of its clusters only that cluster.
func TestServerDeltaSidecar(t *testing.T) {
	s, cc, _ := startServerWith(t, sidecarNodes)
	portal := nodePortal()
	if _, err := s.Update(t.Context(), portal); err != nil {
		t.Fatal(err)
	}
	group := sidecarNodes.GroupKey("billing-2", "billing-sidecar")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(req *discoveryv3.DeltaDiscoveryRequest) {
		t.Helper()
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	// recv returns the names of the next response's resources and ACKs it.
	recv := func() (string, []string, *discoveryv3.DeltaDiscoveryResponse) {
		t.Helper()
		resp, err := recvDelta(t, st)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range resp.GetResources() {
			got = append(got, r.GetName())
		}
		slices.Sort(got)
		send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
		return resp.GetTypeUrl(), got, resp
	}
	send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "billing-2", Cluster: "billing-sidecar"}, TypeUrl: resourcev3.ClusterType})
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	got := map[string][]string{}
	for range 2 {
		typ, names, _ := recv()
		got[typ] = names
	}
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNamesSubscribe: []string{wire.RouteConfigName}})
	_, _, rds := recv()
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.EndpointType, ResourceNamesSubscribe: []string{"toolsvc_invoices"}})
	typ, eds, _ := recv()
	if !slices.Equal(got[resourcev3.ClusterType], []string{"toolsvc_invoices", "toolsvc_search"}) ||
		!slices.Equal(got[resourcev3.ListenerType], []string{wire.ListenerName}) {
		t.Fatalf("delta CDS/LDS = %v", got)
	}
	if typ != resourcev3.EndpointType || !slices.Equal(eds, []string{"toolsvc_invoices"}) {
		t.Errorf("delta EDS = %s %v", typ, eds)
	}
	var rc routev3.RouteConfiguration
	if err := rds.GetResources()[0].GetResource().UnmarshalTo(&rc); err != nil {
		t.Fatal(err)
	}
	if paths := pathsOf(&rc); !slices.Equal(paths, []string{"/mcp/billing"}) {
		t.Errorf("delta RDS public paths %v", paths)
	}
	eventually(t, "the delta sidecar's ACK to be tracked", func() bool {
		n, ok := nodeStatus(s, "billing-2")
		return ok && n.Connected && n.Group == group && n.LastACKVersion == groupVersion(s, group)
	})

	// Only the changed cluster is sent again.
	portal[1].ToolServices[0].Cluster = &registry.ClusterSettings{ConnectTimeout: config.Duration(3 * time.Second)}
	if pushed, err := s.Update(t.Context(), portal); err != nil || !pushed {
		t.Fatalf("Update = %v, %v", pushed, err)
	}
	typ, names, resp := recv()
	if typ != resourcev3.ClusterType || !slices.Equal(names, []string{"toolsvc_invoices"}) {
		t.Fatalf("delta update = %s %v, want only toolsvc_invoices", typ, names)
	}
	var c clusterv3.Cluster
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(&c); err != nil {
		t.Fatal(err)
	}
	if c.GetConnectTimeout().AsDuration() != 3*time.Second {
		t.Errorf("connect timeout %s, want 3s", c.GetConnectTimeout().AsDuration())
	}
	if resp.GetSystemVersionInfo() != groupVersion(s, group) {
		t.Errorf("delta system version %s, want the group's %s", resp.GetSystemVersionInfo(), groupVersion(s, group))
	}
}

// TestServerNACKStatus checks that a NACK shows in NodeStatus and the
// metrics, and that an ACK of a later version clears it.
func TestServerNACKStatus(t *testing.T) {
	s, cc, reg := startServerWith(t, sidecarNodes)
	portal := nodePortal()
	if _, err := s.Update(t.Context(), portal); err != nil {
		t.Fatal(err)
	}
	a := newADSNode(t, cc, &corev3.Node{Id: "billing-3", Cluster: "billing-sidecar"})
	first := a.subscribe()
	v1 := first[resourcev3.ClusterType].GetVersionInfo()

	portal[1].ToolServices[0].URL = "http://10.0.1.9:9999"
	if _, err := s.Update(t.Context(), portal); err != nil {
		t.Fatal(err)
	}
	next := a.recvTypes(allTypes...)
	cds := next[resourcev3.ClusterType]
	nack := ack(cds)
	nack.VersionInfo = v1
	nack.ErrorDetail = &statuspb.Status{Code: 3, Message: "cluster toolsvc_invoices: bad threshold"}
	a.send(nack)
	want := "Cluster version " + cds.GetVersionInfo() + ": cluster toolsvc_invoices: bad threshold"
	eventually(t, "the NACK to show in NodeStatus", func() bool {
		n, _ := nodeStatus(s, "billing-3")
		return n.LastNACK == want
	})
	if got := labeledValue(t, reg, "toolmesh_xds_nacks_total", "type", "Cluster"); got != 1 {
		t.Errorf("Cluster NACKs = %v, want 1", got)
	}

	// The fix: a new version, ACKed (go-control-plane also re-sends the
	// rejected version once, which the loop ACKs too).
	portal[1].ToolServices[0].URL = "http://10.0.1.9:8080"
	if _, err := s.Update(t.Context(), portal); err != nil {
		t.Fatal(err)
	}
	a.ackUntil("the NACK to clear", func() bool {
		n, _ := nodeStatus(s, "billing-3")
		v := groupVersion(s, n.Group)
		return n.LastNACK == "" && n.LastACKVersion == v && n.Version == v
	})
}
