package xds_test

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	dnsclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dns/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/xds"
)

func TestDeprecatedFields(t *testing.T) {
	dns, err := anypb.New(&dnsclusterv3.DnsCluster{DnsRefreshRate: durationpb.New(5e9), RespectDnsTtl: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    proto.Message
		want []string
	}{
		{"typed DNS cluster", &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{
			ClusterType: &clusterv3.Cluster_CustomClusterType{Name: "envoy.cluster.dns", TypedConfig: dns}}}, nil},
		// Set through JSON: the Go fields are marked deprecated too.
		{"DNS settings on the cluster", clusterJSON(t, `{"name":"c","type":"STRICT_DNS","dnsRefreshRate":"5s","respectDnsTtl":true}`),
			[]string{"dns_refresh_rate", "respect_dns_ttl", "type=STRICT_DNS"}},
		{"address family on a DNS cluster", &clusterv3.Cluster{Name: "c",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS},
			DnsLookupFamily:      clusterv3.Cluster_V4_PREFERRED},
			[]string{"dns_lookup_family=V4_PREFERRED", "type=LOGICAL_DNS"}},
		{"deep in a list and a oneof", &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
			Name: "v", Domains: []string{"*"},
			RequestHeadersToAdd: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "a"}, Append: wrapperspb.Bool(true)}},
		}}}, []string{"virtual_hosts[0].request_headers_to_add[0].append"}},
		{"inside an Any", &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{
			ClusterType: &clusterv3.Cluster_CustomClusterType{Name: "x", TypedConfig: mustAny(t, clusterJSON(t, `{"name":"inner","dnsRefreshRate":"1s"}`))}}},
			[]string{"cluster_type.typed_config<envoy.config.cluster.v3.Cluster>.dns_refresh_rate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := xds.DeprecatedFields(tc.m)
			if c, ok := tc.m.(*clusterv3.Cluster); ok {
				got = append(got, xds.LegacyDNS(c)...)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("DeprecatedFields = %v, want %v", got, tc.want)
			}
		})
	}
}

func clusterJSON(t *testing.T, j string) *clusterv3.Cluster {
	t.Helper()
	var c clusterv3.Cluster
	if err := protojson.Unmarshal([]byte(j), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}
