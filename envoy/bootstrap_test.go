package envoy_test

import (
	"os"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	dnsclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dns/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	// Every type named by an "@type" in the bootstrap files, so protojson
	// can resolve it and ValidateDeep can check it.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/xds"
)

// Ports of toolmesh's servers as cmd/toolmesh defaults them (config.go:
// ExtProcListen 127.0.0.1:9002, XDSListen 127.0.0.1:18000). cmd is package
// main, so they are restated here; a change there must change the bootstrap
// files and this test together.
const (
	defaultXDSPort     = 18000
	defaultExtProcPort = 9002
)

// loadBootstrap parses an Envoy bootstrap YAML file strictly: unknown
// fields and unresolvable "@type"s are errors, as they are for Envoy.
func loadBootstrap(t *testing.T, path string) *bootstrapv3.Bootstrap {
	t.Helper()
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &b
}

func TestBootstrapFiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		node string
		dns  bool   // strict DNS (the DNS cluster extension), else STATIC
		host string // where toolmesh is reached
	}{
		{"gateway.yaml", "toolmesh-gateway", true, "toolmesh"},
		{"gateway-tls.yaml", "toolmesh-gateway", true, "toolmesh"},
		{"sidecar.yaml", "toolmesh-sidecar", false, "127.0.0.1"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := loadBootstrap(t, tc.file)
			if err := xds.ValidateDeep(b); err != nil {
				t.Fatalf("ValidateDeep: %v", err)
			}
			if d := xds.DeprecatedFields(b); len(d) > 0 {
				t.Errorf("deprecated fields set: %v", d)
			}
			if b.GetNode().GetId() != tc.node || b.GetNode().GetCluster() == "" {
				t.Errorf("node = %v, want id %s and a cluster", b.GetNode(), tc.node)
			}
			if a := b.GetAdmin().GetAddress().GetSocketAddress().GetAddress(); a != "127.0.0.1" {
				t.Errorf("admin listens on %q, want loopback only", a)
			}

			ads := b.GetDynamicResources().GetAdsConfig()
			if ads.GetApiType() != corev3.ApiConfigSource_GRPC && ads.GetApiType() != corev3.ApiConfigSource_DELTA_GRPC {
				t.Errorf("ads api_type = %v", ads.GetApiType())
			}
			if len(ads.GetGrpcServices()) != 1 || ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != wire.XDSCluster {
				t.Errorf("ADS does not go to cluster %s: %v", wire.XDSCluster, ads.GetGrpcServices())
			}
			for name, cs := range map[string]*corev3.ConfigSource{
				"lds": b.GetDynamicResources().GetLdsConfig(), "cds": b.GetDynamicResources().GetCdsConfig(),
			} {
				if cs.GetAds() == nil || cs.GetResourceApiVersion() != corev3.ApiVersion_V3 {
					t.Errorf("%s_config is not ADS v3: %v", name, cs)
				}
			}

			clusters := map[string]*clusterv3.Cluster{}
			for _, c := range b.GetStaticResources().GetClusters() {
				clusters[c.GetName()] = c
			}
			for name, port := range map[string]uint32{wire.XDSCluster: defaultXDSPort, wire.ExtProcCluster: defaultExtProcPort} {
				c, ok := clusters[name]
				if !ok {
					t.Errorf("no static cluster %s", name)
					continue
				}
				if d := xds.LegacyDNS(c); len(d) > 0 {
					t.Errorf("%s: DNS settings on the Cluster, want cluster_type envoy.cluster.dns: %v", name, d)
				}
				if got := isStrictDNS(t, c); got != tc.dns || (!tc.dns && c.GetType() != clusterv3.Cluster_STATIC) {
					t.Errorf("%s: strict DNS %v (type %v), want %v", name, got, c.GetType(), tc.dns)
				}
				eps := c.GetLoadAssignment().GetEndpoints()
				if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
					t.Errorf("%s: want exactly one endpoint", name)
					continue
				}
				sa := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
				if sa.GetAddress() != tc.host || sa.GetPortValue() != port {
					t.Errorf("%s: endpoint %s:%d, want %s:%d", name, sa.GetAddress(), sa.GetPortValue(), tc.host, port)
				}
				if c.GetLoadAssignment().GetClusterName() != name {
					t.Errorf("%s: load_assignment.cluster_name = %q", name, c.GetLoadAssignment().GetClusterName())
				}
				requireHTTP2(t, c)
			}

			om := b.GetOverloadManager()
			monitors := map[string]bool{}
			for _, m := range om.GetResourceMonitors() {
				monitors[m.GetName()] = true
			}
			if !monitors["envoy.resource_monitors.fixed_heap"] {
				t.Error("no fixed_heap resource monitor")
			}
			if om.GetBufferFactoryConfig().GetMinimumAccountToTrackPowerOfTwo() == 0 {
				t.Error("buffer accounting is off, so reset_high_memory_stream has nothing to act on")
			}
			for _, a := range om.GetActions() {
				for _, tr := range a.GetTriggers() {
					if !monitors[tr.GetName()] {
						t.Errorf("action %s triggers on unknown monitor %s", a.GetName(), tr.GetName())
					}
				}
			}
		})
	}
}

// isStrictDNS reports whether c is a DNS cluster extension with strict DNS
// semantics (DnsCluster.all_addresses_in_single_endpoint false).
func isStrictDNS(t *testing.T, c *clusterv3.Cluster) bool {
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

// requireHTTP2 checks that a static cluster speaks HTTP/2, which gRPC needs.
func requireHTTP2(t *testing.T, c *clusterv3.Cluster) {
	t.Helper()
	a, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if !ok {
		t.Errorf("%s: no HttpProtocolOptions", c.GetName())
		return
	}
	var hpo upstreamhttpv3.HttpProtocolOptions
	if err := a.UnmarshalTo(&hpo); err != nil {
		t.Fatal(err)
	}
	if hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("%s: not explicit HTTP/2", c.GetName())
	}
}

// TestGatewayTLSBootstrap: gateway-tls.yaml reaches toolmesh's ADS and
// ext_proc servers over mutual TLS (a client certificate and key, the CA
// toolmesh's certificate must chain to, its SAN, HTTP/2 by ALPN), and is
// otherwise gateway.yaml, so the two cannot drift apart.
func TestGatewayTLSBootstrap(t *testing.T) {
	plain, withTLS := loadBootstrap(t, "gateway.yaml"), loadBootstrap(t, "gateway-tls.yaml")
	for _, c := range withTLS.GetStaticResources().GetClusters() {
		ts := c.GetTransportSocket()
		if ts.GetName() != "envoy.transport_sockets.tls" {
			t.Errorf("%s: transport socket %q, want envoy.transport_sockets.tls", c.GetName(), ts.GetName())
			continue
		}
		var up tlsv3.UpstreamTlsContext
		if err := ts.GetTypedConfig().UnmarshalTo(&up); err != nil {
			t.Fatalf("%s: %v", c.GetName(), err)
		}
		ctx := up.GetCommonTlsContext()
		certs := ctx.GetTlsCertificates()
		vc := ctx.GetValidationContext()
		switch {
		case len(certs) != 1 || certs[0].GetCertificateChain().GetFilename() == "" || certs[0].GetPrivateKey().GetFilename() == "":
			t.Errorf("%s: no client certificate and key from files: %v", c.GetName(), certs)
		case vc.GetTrustedCa().GetFilename() == "":
			t.Errorf("%s: toolmesh's certificate is not verified against a CA", c.GetName())
		case len(vc.GetMatchTypedSubjectAltNames()) == 0:
			t.Errorf("%s: any certificate of the CA would pass: no SAN matcher", c.GetName())
		case len(ctx.GetAlpnProtocols()) != 1 || ctx.GetAlpnProtocols()[0] != "h2":
			t.Errorf("%s: ALPN %v, want h2 (gRPC)", c.GetName(), ctx.GetAlpnProtocols())
		}
		c.TransportSocket = nil
	}
	for _, c := range plain.GetStaticResources().GetClusters() {
		if c.GetTransportSocket() != nil {
			t.Errorf("gateway.yaml: %s has a transport socket; it is the plaintext bootstrap", c.GetName())
		}
	}
	if !proto.Equal(plain, withTLS) {
		t.Error("gateway-tls.yaml differs from gateway.yaml in more than the control-plane transport sockets")
	}
}
