package xds

import (
	"fmt"
	"net"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	dnsclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dns/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// One cluster per Tool Service, named wire.ClusterName(name). Its
// settings merge, lowest first: built-in defaults, the Portal's `cluster`
// object (docs/contracts/portal.md), the override file's `defaults`, its entry for the
// service (tuning.go; docs/sre.md has the full table). What they become:
//
//	field                    default          Envoy field
//	connectTimeout           1s               cluster.connect_timeout
//	requestTimeout           15s              route.timeout (routes.go; covers retries)
//	idleTimeout              unset            route.idle_timeout (federated: requestTimeout+5s, routes.go)
//	connectionIdleTimeout    30s              HttpProtocolOptions.common_http_protocol_options.idle_timeout
//	maxConnections           1024             circuit_breakers.thresholds[DEFAULT].max_connections
//	maxPendingRequests       1024             ….max_pending_requests
//	maxRequests              1024             ….max_requests
//	maxConcurrentRetries     maxRetries       ….max_retries (concurrent retries, cluster-wide)
//	maxRetries               3                route.retry_policy.num_retries (per call)
//	perTryTimeout            unset            route.retry_policy.per_try_timeout
//	retryOn                  see routes.go    route.retry_policy.retry_on
//	lbPolicy                 ROUND_ROBIN      cluster.lb_policy
//	healthyPanicThreshold    0 (%)            cluster.common_lb_config.healthy_panic_threshold
//	http2                    false            HttpProtocolOptions explicit HTTP/2, else HTTP/1.1
//	outlierDetection         off              cluster.outlier_detection, when on:
//	  consecutive5xx         5                  consecutive_5xx
//	  interval               10s                interval
//	  baseEjectionTime       30s                base_ejection_time
//	  maxEjectionPercent     10                 max_ejection_percent
//	healthCheck              off              cluster.health_checks[0] (HTTP), when on:
//	  path                   /healthz           http_health_check.path (Host = the authority)
//	  interval               5s                 interval
//	  timeout                1s                 timeout
//	  healthyThreshold       1                  healthy_threshold
//	  unhealthyThreshold     3                  unhealthy_threshold
//	sni                      URL host (DNS)   UpstreamTlsContext.sni and the SAN matched
//	caFile                   Options.UpstreamCAFile  ….validation_context.trusted_ca
//	maxRequestBytes          Options.MaxRequestBytes route.request_body_buffer_limit of
//	                                          the public paths that list the service
//
// Fixed choices:
//
//	discovery          EDS over ADS when the URL host is an IP literal (one
//	                   ClusterLoadAssignment, locality and endpoint weight 1);
//	                   cluster_type envoy.cluster.dns (DnsCluster, strict DNS
//	                   semantics) with an inline load_assignment for DNS
//	                   names (Envoy re-resolves every 5s, AUTO address family).
//	https              transport socket UpstreamTlsContext: SNI (DNS names
//	                   only), ALPN h2 or http/1.1, certificate verified
//	                   against caFile and the SNI, else the host, as SAN (DNS
//	                   or IP). Envoy does not verify upstream certificates
//	                   unless told to.

// httpProtocolOptionsKey is the typed_extension_protocol_options key Envoy
// reads HttpProtocolOptions from.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

var lbPolicies = map[string]clusterv3.Cluster_LbPolicy{
	"ROUND_ROBIN":   clusterv3.Cluster_ROUND_ROBIN,
	"LEAST_REQUEST": clusterv3.Cluster_LEAST_REQUEST,
	"RANDOM":        clusterv3.Cluster_RANDOM,
	"RING_HASH":     clusterv3.Cluster_RING_HASH,
	"MAGLEV":        clusterv3.Cluster_MAGLEV,
}

// buildCluster returns the Tool Service's cluster and, for EDS clusters, its
// load assignment (nil for DNS clusters, whose assignment is inline).
func buildCluster(u upstream) (*clusterv3.Cluster, *endpointv3.ClusterLoadAssignment, error) {
	s := u.settings
	lb, ok := lbPolicies[s.lbPolicy]
	if !ok { // checked with the settings; a guard for hand-built input
		return nil, nil, fmt.Errorf("lbPolicy %q is not one of ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV", s.lbPolicy)
	}
	hpo, err := httpProtocolOptions(s.http2, s.connIdleTimeout)
	if err != nil {
		return nil, nil, err
	}
	c := &clusterv3.Cluster{
		Name:           u.cluster,
		ConnectTimeout: durationpb.New(s.connectTimeout),
		LbPolicy:       lb,
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			Priority:           corev3.RoutingPriority_DEFAULT,
			MaxConnections:     wrapperspb.UInt32(s.maxConnections),
			MaxPendingRequests: wrapperspb.UInt32(s.maxPendingRequests),
			MaxRequests:        wrapperspb.UInt32(s.maxRequests),
			MaxRetries:         wrapperspb.UInt32(s.maxConcurrentRetries),
		}}},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: hpo},
		// Always set, 0 included: unset means Envoy's 50% (tuning.go).
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{
			HealthyPanicThreshold: &typev3.Percent{Value: s.panicThreshold},
		},
	}
	if od := s.outlier; od != nil {
		c.OutlierDetection = &clusterv3.OutlierDetection{
			Consecutive_5Xx:    wrapperspb.UInt32(od.Consecutive5xx),
			Interval:           durationpb.New(od.Interval.D()),
			BaseEjectionTime:   durationpb.New(od.BaseEjectionTime.D()),
			MaxEjectionPercent: wrapperspb.UInt32(od.MaxEjectionPercent),
		}
	}
	if hc := s.health; hc != nil {
		codec := typev3.CodecClientType_HTTP1
		if s.http2 {
			codec = typev3.CodecClientType_HTTP2
		}
		c.HealthChecks = []*corev3.HealthCheck{{
			Timeout:            durationpb.New(hc.Timeout.D()),
			Interval:           durationpb.New(hc.Interval.D()),
			HealthyThreshold:   wrapperspb.UInt32(hc.HealthyThreshold),
			UnhealthyThreshold: wrapperspb.UInt32(hc.UnhealthyThreshold),
			HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
				Host:            u.authority,
				Path:            hc.Path,
				CodecClientType: codec,
			}},
		}}
	}
	if u.scheme == "https" {
		ts, err := upstreamTLS(u)
		if err != nil {
			return nil, nil, err
		}
		c.TransportSocket = ts
	}

	cla := loadAssignment(u)
	if u.ip {
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
		c.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsConfigSource()}
		return c, cla, nil
	}
	if c.ClusterDiscoveryType, err = dnsDiscovery(); err != nil {
		return nil, nil, err
	}
	c.LoadAssignment = cla
	return c, nil, nil
}

// dnsClusterType is the cluster_type name of DnsCluster (DnsClusterFactory
// in source/extensions/clusters/dns/dns_cluster.h). Cluster.type STRICT_DNS
// still works, but its DNS settings on the Cluster (dns_refresh_rate,
// respect_dns_ttl, dns_lookup_family, …) are deprecated in favour of this
// extension, whose all_addresses_in_single_endpoint false is strict DNS.
const dnsClusterType = "envoy.cluster.dns"

// dnsDiscovery is the cluster_type of a cluster whose endpoints are DNS
// names: the DnsCluster extension with its defaults (strict DNS, AUTO,
// every 5s).
func dnsDiscovery() (*clusterv3.Cluster_ClusterType, error) {
	dns, err := pack(&dnsclusterv3.DnsCluster{})
	if err != nil {
		return nil, err
	}
	return &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{
		Name: dnsClusterType, TypedConfig: dns,
	}}, nil
}

// staticOrDNS makes c, whose load assignment lists its endpoints, STATIC
// when every endpoint is an IP address, else a DNS cluster.
func staticOrDNS(c *clusterv3.Cluster, static bool) (*clusterv3.Cluster, error) {
	if static {
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
		return c, nil
	}
	dns, err := dnsDiscovery()
	if err != nil {
		return nil, err
	}
	c.ClusterDiscoveryType = dns
	return c, nil
}

// loadAssignment is the Tool Service's single endpoint. The locality is
// non-nil and both weights are 1, as gRPC's xDS client requires.
func loadAssignment(u upstream) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: u.cluster,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: socketAddress(u.host, u.port),
				}},
				LoadBalancingWeight: wrapperspb.UInt32(1),
			}},
		}},
	}
}

func httpProtocolOptions(http2 bool, idle time.Duration) (*anypb.Any, error) {
	explicit := &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
		ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{
			HttpProtocolOptions: &corev3.Http1ProtocolOptions{},
		},
	}
	if http2 {
		explicit.ProtocolConfig = &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
			Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
		}
	}
	return pack(&upstreamhttpv3.HttpProtocolOptions{
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(idle)},
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: explicit,
		},
	})
}

func upstreamTLS(u upstream) (*corev3.TransportSocket, error) {
	alpn := []string{"http/1.1"}
	if u.settings.http2 {
		alpn = []string{"h2"}
	}
	// The certificate must name the server we asked for: the SNI when an
	// SRE set one, else the URL host.
	sni, sanName, san := u.host, u.host, tlsv3.SubjectAltNameMatcher_DNS
	if u.ip {
		sni, san = "", tlsv3.SubjectAltNameMatcher_IP_ADDRESS // SNI must not be an IP literal (RFC 6066 §3)
	}
	if s := u.settings.sni; s != nil {
		sni, sanName, san = *s, *s, tlsv3.SubjectAltNameMatcher_DNS
	}
	ctx := &tlsv3.UpstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols: alpn,
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: u.settings.caFile}},
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
					SanType: san,
					Matcher: exact(sanName),
				}},
			}},
		},
	}
	ctx.Sni = sni
	return tlsTransportSocket(ctx)
}

// tlsTransportSocket is the TLS transport socket with context ctx (an
// UpstreamTlsContext or a DownstreamTlsContext).
func tlsTransportSocket(ctx proto.Message) (*corev3.TransportSocket, error) {
	a, err := pack(ctx)
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTLS,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a},
	}, nil
}

// authority is what the Tool Service expects in Host: the host, with the
// port only when it is not the scheme's default.
func authority(scheme, host string, port uint32) string {
	if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) {
		if isIP(host) && net.ParseIP(host).To4() == nil {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
}

func isIP(host string) bool { return net.ParseIP(host) != nil }
