package xdsconfig

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	dnsclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dns/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

const (
	HTTPProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	tlsTransportSocket     = "envoy.transport_sockets.tls"
	// dnsClusterType is the registered name of DnsClusterFactory
	// (source/extensions/clusters/dns/dns_cluster.h).
	dnsClusterType = "envoy.cluster.dns"
)

// Cluster is a compiled Cluster with its endpoints.
type Cluster struct {
	name           string
	edsName        string // EDS: the ClusterLoadAssignment name
	isEDS          bool
	priorities     []hostSet // endpoint addresses ("host:port") per priority
	panicThreshold float64   // common_lb_config.healthy_panic_threshold, percent
	tlsConfig      *tls.Config
	h2             bool
	connectTimeout time.Duration
	idleTimeout    time.Duration // common_http_protocol_options.idle_timeout; 0: none
	Limits         ClusterLimits
	RT             *ClusterRuntime
	Transport      http.RoundTripper
	Scheme         string
	tlsKey         string // the UpstreamTlsContext, deterministically marshalled
}

// hostSet is one priority's endpoints: the healthy ones and all of them.
type hostSet struct {
	healthy, all []string
}

type ClusterLimits struct {
	maxConnections, maxPending, maxRequests, MaxRetries int64
}

// ClusterRuntime is the mutable per-cluster state that survives updates of
// the cluster's configuration: round-robin position and circuit-breaker
// gauges. All of it is atomic, so the hot path takes no lock.
type ClusterRuntime struct {
	rr      atomic.Uint64
	active  atomic.Int64 // upstream requests in flight (rq_active)
	pending atomic.Int64 // requests waiting for a connection (rq_pending_active)
	Retries atomic.Int64 // retries in flight (rq_retry_open)
	slots   chan struct{}
}

// CompileCluster compiles one cluster; an EDS cluster's endpoints come
// from its ClusterLoadAssignment (Compile).
func CompileCluster(c *clusterv3.Cluster) (*Cluster, error) {
	cl := &Cluster{name: c.GetName(), connectTimeout: rules.DefaultConnectTimeout, idleTimeout: rules.DefaultIdleTimeout, Scheme: "http", panicThreshold: rules.DefaultPanicThreshold}
	if p := c.GetCommonLbConfig().GetHealthyPanicThreshold(); p != nil {
		// "The specified percent will be truncated to the nearest 1%."
		cl.panicThreshold = math.Trunc(p.GetValue())
	}
	if c.GetConnectTimeout() != nil {
		cl.connectTimeout = c.GetConnectTimeout().AsDuration()
	}
	if err := cl.compileDiscovery(c); err != nil {
		return nil, err
	}
	if !cl.isEDS {
		var err error
		if cl.priorities, err = compileEndpoints(c.GetLoadAssignment()); err != nil {
			return nil, err
		}
	}
	cl.Limits = compileCircuitBreakers(c.GetCircuitBreakers())
	if c.GetHttp2ProtocolOptions() != nil {
		cl.h2 = true // deprecated field, still honoured by Envoy
	}
	if err := cl.compileProtocolOptions(c); err != nil {
		return nil, err
	}
	if err := cl.compileTransportSocket(c.GetTransportSocket()); err != nil {
		return nil, err
	}
	if len(c.GetTransportSocketMatches()) > 0 {
		return nil, errors.New("transport_socket_matches are not emulated")
	}
	return cl, nil
}

// compileDiscovery accepts the discovery types whose hosts Go's dialer
// resolves the way Envoy would, and EDS.
func (cl *Cluster) compileDiscovery(c *clusterv3.Cluster) error {
	switch t := c.GetClusterDiscoveryType().(type) {
	case nil:
		// Type defaults to STATIC.
	case *clusterv3.Cluster_Type:
		switch t.Type {
		case clusterv3.Cluster_STATIC, clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
			// DNS names are resolved by the dialer on each connection: a
			// STRICT_DNS host stands for all its addresses, a LOGICAL_DNS
			// host for the first one — both are what Go's dialer does.
		case clusterv3.Cluster_EDS:
			cl.isEDS, cl.edsName = true, cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName())
		default:
			return fmt.Errorf("cluster type %v is not emulated", t.Type)
		}
	case *clusterv3.Cluster_ClusterType:
		// The DNS cluster extension (source/extensions/clusters/dns): strict
		// or logical DNS, resolved by the dialer like the two types above.
		if t.ClusterType.GetName() != dnsClusterType {
			return fmt.Errorf("cluster_type %q is not emulated", t.ClusterType.GetName())
		}
		var dc dnsclusterv3.DnsCluster
		if err := t.ClusterType.GetTypedConfig().UnmarshalTo(&dc); err != nil {
			return fmt.Errorf("cluster_type %s: %w", dnsClusterType, err)
		}
	default:
		return fmt.Errorf("cluster discovery type %T is not emulated", t)
	}
	return nil
}

// compileCircuitBreakers reads the DEFAULT priority's thresholds over
// Envoy's defaults; routes here use no other priority.
func compileCircuitBreakers(cb *clusterv3.CircuitBreakers) ClusterLimits {
	l := ClusterLimits{rules.DefaultMaxConnections, rules.DefaultMaxPending, rules.DefaultMaxRequests, rules.DefaultMaxRetries}
	for _, th := range cb.GetThresholds() {
		if th.GetPriority() != corev3.RoutingPriority_DEFAULT {
			continue
		}
		for dst, v := range map[*int64]*wrapperspb.UInt32Value{&l.maxConnections: th.GetMaxConnections(),
			&l.maxPending: th.GetMaxPendingRequests(), &l.maxRequests: th.GetMaxRequests(), &l.MaxRetries: th.GetMaxRetries()} {
			if v != nil {
				*dst = int64(v.GetValue())
			}
		}
	}
	return l
}

// compileProtocolOptions reads the cluster's HttpProtocolOptions: the
// upstream protocol and the idle timeout.
func (cl *Cluster) compileProtocolOptions(c *clusterv3.Cluster) error {
	a, ok := c.GetTypedExtensionProtocolOptions()[HTTPProtocolOptionsKey]
	if !ok {
		return nil
	}
	var hpo upstreamhttpv3.HttpProtocolOptions
	if err := a.UnmarshalTo(&hpo); err != nil {
		return fmt.Errorf("%s: %w", HTTPProtocolOptionsKey, err)
	}
	if len(hpo.GetHttpFilters()) > 0 {
		return errors.New("upstream http filters are not emulated")
	}
	if d := hpo.GetCommonHttpProtocolOptions().GetIdleTimeout(); d != nil {
		cl.idleTimeout = d.AsDuration()
	}
	switch p := hpo.GetUpstreamProtocolOptions().(type) {
	case *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_:
		switch p.ExplicitHttpConfig.GetProtocolConfig().(type) {
		case *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions:
			cl.h2 = true
		case *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions:
		default:
			return errors.New("HTTP/3 upstreams are not emulated")
		}
	case *upstreamhttpv3.HttpProtocolOptions_UseDownstreamProtocolConfig, *upstreamhttpv3.HttpProtocolOptions_AutoConfig:
		// HTTP/1.1 downstream in the local data plane; ALPN picks for TLS.
	}
	return nil
}

// compileTransportSocket accepts raw_buffer and the TLS transport socket.
func (cl *Cluster) compileTransportSocket(ts *corev3.TransportSocket) error {
	if ts == nil {
		return nil
	}
	if ts.GetName() != tlsTransportSocket && ts.GetTypedConfig().GetTypeUrl() != "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext" {
		if ts.GetName() != "envoy.transport_sockets.raw_buffer" {
			return fmt.Errorf("transport socket %q is not emulated", ts.GetName())
		}
		return nil
	}
	var utc tlsv3.UpstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&utc); err != nil {
		return fmt.Errorf("transport socket: %w", err)
	}
	if err := utc.ValidateAll(); err != nil {
		return fmt.Errorf("transport socket: %w", err)
	}
	tc, err := compileUpstreamTLS(&utc, cl.h2)
	if err != nil {
		return err
	}
	cl.tlsConfig, cl.Scheme = tc, "https"
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&utc)
	cl.tlsKey = string(b)
	return nil
}

// compileEndpoints lists the endpoints of a ClusterLoadAssignment by
// priority. Endpoints whose health_status is UNHEALTHY, DRAINING or TIMEOUT
// are not healthy; everything else counts as healthy (no active health
// checks). Unhealthy ones are kept for panic mode (pick).
func compileEndpoints(cla *endpointv3.ClusterLoadAssignment) ([]hostSet, error) {
	var out []hostSet
	for _, loc := range cla.GetEndpoints() {
		p := int(loc.GetPriority())
		for len(out) <= p {
			out = append(out, hostSet{})
		}
		for _, lb := range loc.GetLbEndpoints() {
			healthy := true
			switch lb.GetHealthStatus() {
			case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_DRAINING, corev3.HealthStatus_TIMEOUT:
				healthy = false
			}
			ep := lb.GetEndpoint()
			if ep == nil {
				return nil, errors.New("named endpoints are not emulated")
			}
			sa := ep.GetAddress().GetSocketAddress()
			if sa == nil {
				return nil, errors.New("only socket addresses are emulated")
			}
			port, ok := sa.GetPortSpecifier().(*corev3.SocketAddress_PortValue)
			if !ok {
				return nil, errors.New("named ports are not emulated")
			}
			addr := net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(port.PortValue)))
			out[p].all = append(out[p].all, addr)
			if healthy {
				out[p].healthy = append(out[p].healthy, addr)
			}
		}
	}
	return out, nil
}

// DialError marks a failure to establish the upstream connection (TCP or
// TLS), which Envoy reports as a connection failure (flag UF).
type DialError struct {
	Err     error
	Timeout bool
}

func (e *DialError) Error() string { return e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// dialUpstream connects to an endpoint of a cluster, with TLS when tc is
// set; the handshake has its own connect timeout. Every failure is a
// DialError.
func dialUpstream(ctx context.Context, d *net.Dialer, tc *tls.Config, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var ne net.Error
		return nil, &DialError{Err: err, Timeout: errors.As(err, &ne) && ne.Timeout()}
	}
	if tc == nil {
		return c, nil
	}
	hctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	tlsConn := tls.Client(c, tc)
	if err := tlsConn.HandshakeContext(hctx); err != nil {
		_ = c.Close()
		return nil, &DialError{Err: fmt.Errorf("TLS error: %w", err)}
	}
	return tlsConn, nil
}

// NewTransport builds the connection pool of a cluster: net/http's
// Transport, for HTTP/1.1 and HTTP/2 (rules.go, "Upstream connections").
func NewTransport(cl *Cluster) *http.Transport {
	dialer := &net.Dialer{Timeout: cl.connectTimeout}
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) {
		return dialUpstream(ctx, dialer, nil, addr)
	}
	tr := &http.Transport{
		DialContext:            dial,
		MaxIdleConnsPerHost:    rules.MaxIdlePerHost,
		IdleConnTimeout:        cl.idleTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: rules.MaxResponseHeadersH2,
	}
	protos := new(http.Protocols)
	var tc *tls.Config
	if cl.tlsConfig != nil {
		tc = cl.tlsConfig.Clone()
		tr.TLSClientConfig = tc
		tr.DialTLSContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
			return dialUpstream(ctx, dialer, tc, addr)
		}
	}
	switch {
	case !cl.h2:
		tr.MaxResponseHeaderBytes = rules.MaxResponseHeadersH1
		protos.SetHTTP1(true)
	case tc != nil:
		protos.SetHTTP2(true)
		tr.ForceAttemptHTTP2 = true
	default:
		// Cleartext HTTP/2 with prior knowledge, as Envoy does with
		// http2_protocol_options and no TLS.
		protos.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = protos
	return tr
}

// TransportKey identifies a cluster's connection settings, so an unchanged
// Cluster keeps its connection pool across updates.
func TransportKey(cl *Cluster) string {
	t := "plain"
	if cl.tlsConfig != nil {
		t = "tls:" + cl.tlsKey
	}
	return fmt.Sprintf("%s|%s|h2=%v|ct=%s|idle=%s", cl.name, t, cl.h2, cl.connectTimeout, cl.idleTimeout)
}

func NewClusterRuntime(l ClusterLimits) *ClusterRuntime {
	rt := &ClusterRuntime{}
	if l.maxConnections > 0 {
		rt.slots = make(chan struct{}, l.maxConnections)
	}
	return rt
}

// Pick returns the next endpoint, round robin over the hosts pickHosts
// chooses.
func (c *Cluster) Pick() (string, bool) {
	eps := c.pickHosts()
	if len(eps) == 0 {
		return "", false
	}
	n := c.RT.rr.Add(1) - 1
	return eps[n%uint64(len(eps))], true
}

// pickHosts emulates panic mode (LoadBalancerBase::recalculatePerPriorityPanic
// and isHostSetInPanic in source/common/upstream/load_balancer_impl.cc): a
// priority whose healthy share is below healthy_panic_threshold is in panic
// and balances over all its hosts, healthy or not; with no healthy host in
// any priority every priority is in panic, unless the threshold is 0, which
// disables panic mode, and then there is no host (503, UH). Simplified: the
// first priority with healthy hosts (or, in total panic, with any host)
// takes all the load; Envoy spreads load over priorities by their health
// with the overprovisioning factor.
func (c *Cluster) pickHosts() []string {
	for _, hs := range c.priorities {
		if len(hs.healthy) == 0 {
			continue
		}
		if 100*float64(len(hs.healthy))/float64(len(hs.all)) < c.panicThreshold {
			return hs.all
		}
		return hs.healthy
	}
	if c.panicThreshold == 0 {
		return nil
	}
	for _, hs := range c.priorities {
		if len(hs.all) > 0 {
			return hs.all
		}
	}
	return nil
}

// Acquire applies the circuit breakers before an upstream request
// (ConnPoolImplBase::newStreamImpl): max_requests bounds requests in flight;
// for HTTP/1.1, where a connection carries one request at a time,
// max_connections bounds concurrent requests and the overflow waits as
// pending up to max_pending_requests. Overflow is flag UO.
func (c *Cluster) Acquire(ctx context.Context, log *slog.Logger) (release func(), overflow bool, err error) {
	rt := c.RT
	if rt.active.Add(1) > c.Limits.maxRequests {
		rt.active.Add(-1)
		return nil, true, nil
	}
	if c.h2 || rt.slots == nil {
		return func() { rt.active.Add(-1) }, false, nil
	}
	select {
	case rt.slots <- struct{}{}:
	default:
		if rt.pending.Add(1) > c.Limits.maxPending {
			rt.pending.Add(-1)
			rt.active.Add(-1)
			return nil, true, nil
		}
		log.Debug("upstream request pending", "cluster", c.name)
		select {
		case rt.slots <- struct{}{}:
			rt.pending.Add(-1)
		case <-ctx.Done():
			rt.pending.Add(-1)
			rt.active.Add(-1)
			return nil, false, ctx.Err()
		}
	}
	return func() {
		<-rt.slots
		rt.active.Add(-1)
	}, false, nil
}
