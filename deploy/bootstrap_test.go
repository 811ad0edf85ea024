package deploy_test

import (
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	dnsclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dns/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	// Every type named by an "@type" in the bootstraps, so protojson can
	// resolve it and ValidateDeep can check it.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/xds"
)

// Envoy's admin port in every bootstrap; it is never exposed.
const envoyAdminPort = 9901

// grpcKeepaliveMinTime is the default keepalive enforcement MinTime of
// toolmesh's gRPC servers (internal/app/config.go defaultKeepaliveMinTime,
// restated since cmd is package main). Envoy pinging the toolmesh clusters
// more often than that gets GOAWAY too_many_pings.
const grpcKeepaliveMinTime = 10 * time.Second

// The gRPC service the extproc server reports in its health service.
const extProcHealthService = "envoy.service.ext_proc.v3.ExternalProcessor"

// decodeBootstrap parses an Envoy bootstrap YAML strictly (unknown fields
// and unresolvable "@type"s are errors, as they are for Envoy) and checks it
// with xds.ValidateDeep, Envoy's own validation rules down into every typed
// config.
func decodeBootstrap(t reporter, where string, y []byte) *bootstrapv3.Bootstrap {
	t.Helper()
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := xds.ValidateDeep(&b); err != nil {
		t.Fatalf("%s: ValidateDeep: %v", where, err)
	}
	// Deprecated fields work until Envoy removes them, and some are ignored
	// once their replacement is set; none may be used.
	if d := xds.DeprecatedFields(&b); len(d) > 0 {
		t.Errorf("%s: deprecated fields set: %v", where, d)
	}
	for _, c := range b.GetStaticResources().GetClusters() {
		if d := xds.LegacyDNS(c); len(d) > 0 {
			t.Errorf("%s: cluster %s: DNS settings on the Cluster, want cluster_type envoy.cluster.dns: %v", where, c.GetName(), d)
		}
	}
	return &b
}

// isStrictDNS reports whether c is a DNS cluster extension with strict DNS
// semantics (DnsCluster.all_addresses_in_single_endpoint false).
func isStrictDNS(t reporter, c *clusterv3.Cluster) bool {
	t.Helper()
	ct := c.GetClusterType()
	if ct == nil || ct.GetName() != "envoy.cluster.dns" {
		return false
	}
	var dc dnsclusterv3.DnsCluster
	if err := ct.GetTypedConfig().UnmarshalTo(&dc); err != nil {
		t.Fatalf("%s: %v", c.GetName(), err)
	}
	return !dc.GetAllAddressesInSingleEndpoint()
}

// bootstrapFacts is what the deploy tests compare against the objects
// around a bootstrap.
type bootstrapFacts struct {
	clusters map[string]*clusterv3.Cluster
	// endpoint of each static cluster with exactly one.
	endpoints map[string]*corev3.SocketAddress
	// statsPort is the port of the envoy_stats listener (0: none), and
	// statsPaths the paths it routes to the admin interface.
	statsPort  uint32
	statsPaths map[string]bool
	heapBytes  uint64
}

// checkBootstrap checks what every toolmesh Envoy bootstrap must have and
// returns its facts: admin on loopback, ADS to toolmesh_xds, the two
// toolmesh clusters over HTTP/2, and the overload manager.
func checkBootstrap(t reporter, where string, b *bootstrapv3.Bootstrap) bootstrapFacts {
	t.Helper()
	f := bootstrapFacts{clusters: map[string]*clusterv3.Cluster{}, endpoints: map[string]*corev3.SocketAddress{}, statsPaths: map[string]bool{}}
	if b.GetNode().GetId() == "" || b.GetNode().GetCluster() == "" {
		t.Errorf("%s: node %v needs an id and a cluster", where, b.GetNode())
	}
	admin := b.GetAdmin().GetAddress().GetSocketAddress()
	if admin.GetAddress() != "127.0.0.1" || admin.GetPortValue() != envoyAdminPort {
		t.Errorf("%s: admin on %s:%d, want 127.0.0.1:%d", where, admin.GetAddress(), admin.GetPortValue(), envoyAdminPort)
	}
	ads := b.GetDynamicResources().GetAdsConfig()
	if g := ads.GetGrpcServices(); len(g) != 1 || g[0].GetEnvoyGrpc().GetClusterName() != wire.XDSCluster {
		t.Errorf("%s: ADS does not go to %s: %v", where, wire.XDSCluster, g)
	}
	for name, cs := range map[string]*corev3.ConfigSource{
		"lds": b.GetDynamicResources().GetLdsConfig(), "cds": b.GetDynamicResources().GetCdsConfig(),
	} {
		if cs.GetAds() == nil || cs.GetResourceApiVersion() != corev3.ApiVersion_V3 {
			t.Errorf("%s: %s_config is not ADS v3", where, name)
		}
	}

	for _, c := range b.GetStaticResources().GetClusters() {
		f.clusters[c.GetName()] = c
		if c.GetLoadAssignment().GetClusterName() != c.GetName() {
			t.Errorf("%s: cluster %s: load_assignment.cluster_name = %q", where, c.GetName(), c.GetLoadAssignment().GetClusterName())
		}
		eps := c.GetLoadAssignment().GetEndpoints()
		if len(eps) == 1 && len(eps[0].GetLbEndpoints()) == 1 {
			f.endpoints[c.GetName()] = eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		}
	}
	for _, name := range []string{wire.XDSCluster, wire.ExtProcCluster} {
		c, ok := f.clusters[name]
		if !ok {
			t.Errorf("%s: no static cluster %s", where, name)
			continue
		}
		if f.endpoints[name] == nil {
			t.Errorf("%s: cluster %s: want exactly one endpoint", where, name)
		}
		if !isHTTP2(t, c) {
			t.Errorf("%s: cluster %s is not explicit HTTP/2, which gRPC needs", where, name)
		}
		checkKeepalive(t, where, c)
	}
	if c := f.clusters[wire.ExtProcCluster]; c != nil && c.GetPerConnectionBufferLimitBytes().GetValue() == 0 {
		t.Errorf("%s: %s has no per_connection_buffer_limit_bytes", where, wire.ExtProcCluster)
	}

	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() != "envoy_stats" {
			t.Errorf("%s: unexpected static listener %s: MCP listeners come from xDS", where, l.GetName())
			continue
		}
		f.statsPort = l.GetAddress().GetSocketAddress().GetPortValue()
		for _, r := range statsRoutes(t, where, l) {
			if r.cluster != "envoy_admin" {
				t.Errorf("%s: envoy_stats routes %s to %s", where, r.path, r.cluster)
			}
			f.statsPaths[r.path] = true
		}
	}
	if f.statsPort != 0 {
		ep := f.endpoints["envoy_admin"]
		if ep.GetAddress() != "127.0.0.1" || ep.GetPortValue() != envoyAdminPort {
			t.Errorf("%s: envoy_admin cluster goes to %v, want the admin address", where, ep)
		}
	}

	om := b.GetOverloadManager()
	monitors := map[string]bool{}
	for _, m := range om.GetResourceMonitors() {
		monitors[m.GetName()] = true
		if m.GetName() == "envoy.resource_monitors.fixed_heap" {
			var fh fixedheapv3.FixedHeapConfig
			if err := m.GetTypedConfig().UnmarshalTo(&fh); err != nil {
				t.Errorf("%s: fixed_heap: %v", where, err)
			}
			f.heapBytes = fh.GetMaxHeapSizeBytes()
		}
	}
	if !monitors["envoy.resource_monitors.fixed_heap"] || f.heapBytes == 0 {
		t.Errorf("%s: no fixed_heap resource monitor with a size", where)
	}
	if om.GetBufferFactoryConfig().GetMinimumAccountToTrackPowerOfTwo() == 0 {
		t.Errorf("%s: buffer accounting is off, so reset_high_memory_stream has nothing to act on", where)
	}
	for _, a := range om.GetActions() {
		for _, tr := range a.GetTriggers() {
			if !monitors[tr.GetName()] {
				t.Errorf("%s: action %s triggers on unknown monitor %s", where, a.GetName(), tr.GetName())
			}
		}
	}
	return f
}

func isHTTP2(t reporter, c *clusterv3.Cluster) bool {
	t.Helper()
	a, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if !ok {
		return false
	}
	var hpo upstreamhttpv3.HttpProtocolOptions
	if err := a.UnmarshalTo(&hpo); err != nil {
		t.Fatal(err)
	}
	return hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// checkKeepalive checks that Envoy pings a toolmesh cluster, and not more
// often than toolmesh's gRPC servers accept.
func checkKeepalive(t reporter, where string, c *clusterv3.Cluster) {
	t.Helper()
	a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	var hpo upstreamhttpv3.HttpProtocolOptions
	if a == nil || a.UnmarshalTo(&hpo) != nil {
		return // isHTTP2 reports it
	}
	ka := hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions().GetConnectionKeepalive()
	if ka == nil || ka.GetTimeout().AsDuration() <= 0 {
		t.Errorf("%s: cluster %s has no connection_keepalive with a timeout: %v", where, c.GetName(), ka)
		return
	}
	if iv := ka.GetInterval().AsDuration(); iv <= grpcKeepaliveMinTime {
		t.Errorf("%s: cluster %s pings every %s, not above toolmesh's keepalive MinTime %s (GOAWAY too_many_pings)",
			where, c.GetName(), iv, grpcKeepaliveMinTime)
	}
}

type statsRoute struct{ path, cluster string }

// statsRoutes lists the exact-path routes of the envoy_stats listener.
func statsRoutes(t reporter, where string, l *listenerv3.Listener) []statsRoute {
	t.Helper()
	var out []statsRoute
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			var hcm hcmv3.HttpConnectionManager
			if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
				t.Errorf("%s: envoy_stats filter %s: %v", where, f.GetName(), err)
				continue
			}
			for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					path := r.GetMatch().GetPath()
					if path == "" {
						t.Errorf("%s: envoy_stats has a route that is not an exact path: %v", where, r.GetMatch())
					}
					out = append(out, statsRoute{path, r.GetRoute().GetCluster()})
				}
			}
		}
	}
	return out
}

// TestRepoBootstraps checks envoy/gateway.yaml, envoy/gateway-tls.yaml and envoy/sidecar.yaml as the
// deploy files use them: the compose file mounts the gateway bootstrap.
func TestRepoBootstraps(t *testing.T) {
	for _, file := range []string{"envoy/gateway.yaml", "envoy/gateway-tls.yaml", "envoy/sidecar.yaml"} {
		t.Run(file, func(t *testing.T) {
			b := decodeBootstrap(t, file, readRepoFile(t, file))
			f := checkBootstrap(t, file, b)
			for _, name := range []string{wire.XDSCluster, wire.ExtProcCluster} {
				if f.endpoints[name].GetPortValue() == 0 {
					t.Errorf("%s: %s has no port", file, name)
				}
			}
		})
	}
}
