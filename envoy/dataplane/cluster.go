package dataplane

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	dnsclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dns/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
)

const (
	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	tlsTransportSocket     = "envoy.transport_sockets.tls"
	// dnsClusterType is the registered name of DnsClusterFactory
	// (source/extensions/clusters/dns/dns_cluster.h).
	dnsClusterType = "envoy.cluster.dns"
)

// cluster is a compiled Cluster with its endpoints.
type cluster struct {
	name           string
	edsName        string // EDS: the ClusterLoadAssignment name
	isEDS          bool
	priorities     []hostSet // endpoint addresses ("host:port") per priority
	panicThreshold float64   // common_lb_config.healthy_panic_threshold, percent
	tlsConfig      *tls.Config
	h2             bool
	connectTimeout time.Duration
	idleTimeout    time.Duration // common_http_protocol_options.idle_timeout; 0: none
	limits         clusterLimits
	rt             *clusterRuntime
	transport      http.RoundTripper
	scheme         string
	tlsKey         string // fingerprint of the UpstreamTlsContext
}

// hostSet is one priority's endpoints: the healthy ones and all of them.
type hostSet struct {
	healthy, all []string
}

type clusterLimits struct {
	maxConnections, maxPending, maxRequests, maxRetries int64
}

// clusterRuntime is the mutable per-cluster state that survives updates of
// the cluster's configuration: round-robin position and circuit-breaker
// gauges. All of it is atomic, so the hot path takes no lock.
type clusterRuntime struct {
	rr      atomic.Uint64
	active  atomic.Int64 // upstream requests in flight (rq_active)
	pending atomic.Int64 // requests waiting for a connection (rq_pending_active)
	retries atomic.Int64 // retries in flight (rq_retry_open)
	slots   chan struct{}
}

func compileCluster(c *clusterv3.Cluster) (*cluster, error) {
	cl := &cluster{name: c.GetName(), connectTimeout: defaultConnectTimeout, idleTimeout: defaultIdleTimeout, scheme: "http", panicThreshold: defaultPanicThreshold}
	if p := c.GetCommonLbConfig().GetHealthyPanicThreshold(); p != nil {
		// "The specified percent will be truncated to the nearest 1%."
		cl.panicThreshold = math.Trunc(p.GetValue())
	}
	if c.GetConnectTimeout() != nil {
		cl.connectTimeout = c.GetConnectTimeout().AsDuration()
	}
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
			cl.isEDS = true
			cl.edsName = c.GetEdsClusterConfig().GetServiceName()
			if cl.edsName == "" {
				cl.edsName = c.GetName()
			}
		default:
			return nil, fmt.Errorf("cluster type %v is not emulated", t.Type)
		}
	case *clusterv3.Cluster_ClusterType:
		// The DNS cluster extension (source/extensions/clusters/dns): strict
		// or logical DNS, resolved by the dialer like the two types above.
		if t.ClusterType.GetName() != dnsClusterType {
			return nil, fmt.Errorf("cluster_type %q is not emulated", t.ClusterType.GetName())
		}
		var dc dnsclusterv3.DnsCluster
		if err := t.ClusterType.GetTypedConfig().UnmarshalTo(&dc); err != nil {
			return nil, fmt.Errorf("cluster_type %s: %w", dnsClusterType, err)
		}
	default:
		return nil, fmt.Errorf("cluster discovery type %T is not emulated", t)
	}
	if !cl.isEDS {
		var err error
		if cl.priorities, err = compileEndpoints(c.GetLoadAssignment()); err != nil {
			return nil, err
		}
	}
	cl.limits = clusterLimits{defaultMaxConnections, defaultMaxPending, defaultMaxRequests, defaultMaxRetries}
	for _, th := range c.GetCircuitBreakers().GetThresholds() {
		if th.GetPriority() != corev3.RoutingPriority_DEFAULT {
			continue // only the DEFAULT priority is used by routes here
		}
		if th.GetMaxConnections() != nil {
			cl.limits.maxConnections = int64(th.GetMaxConnections().GetValue())
		}
		if th.GetMaxPendingRequests() != nil {
			cl.limits.maxPending = int64(th.GetMaxPendingRequests().GetValue())
		}
		if th.GetMaxRequests() != nil {
			cl.limits.maxRequests = int64(th.GetMaxRequests().GetValue())
		}
		if th.GetMaxRetries() != nil {
			cl.limits.maxRetries = int64(th.GetMaxRetries().GetValue())
		}
	}
	if c.GetHttp2ProtocolOptions() != nil {
		cl.h2 = true // deprecated field, still honoured by Envoy
	}
	if a, ok := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]; ok {
		var hpo upstreamhttpv3.HttpProtocolOptions
		if err := a.UnmarshalTo(&hpo); err != nil {
			return nil, fmt.Errorf("%s: %w", httpProtocolOptionsKey, err)
		}
		if len(hpo.GetHttpFilters()) > 0 {
			return nil, errors.New("upstream http filters are not emulated")
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
				return nil, errors.New("HTTP/3 upstreams are not emulated")
			}
		case *upstreamhttpv3.HttpProtocolOptions_UseDownstreamProtocolConfig, *upstreamhttpv3.HttpProtocolOptions_AutoConfig:
			// HTTP/1.1 downstream in the local data plane; ALPN picks for TLS.
		}
	}
	if ts := c.GetTransportSocket(); ts != nil {
		if ts.GetName() != tlsTransportSocket && ts.GetTypedConfig().GetTypeUrl() != "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext" {
			if ts.GetName() != "envoy.transport_sockets.raw_buffer" {
				return nil, fmt.Errorf("transport socket %q is not emulated", ts.GetName())
			}
		} else {
			var utc tlsv3.UpstreamTlsContext
			if err := ts.GetTypedConfig().UnmarshalTo(&utc); err != nil {
				return nil, fmt.Errorf("transport socket: %w", err)
			}
			if err := utc.ValidateAll(); err != nil {
				return nil, fmt.Errorf("transport socket: %w", err)
			}
			tc, err := compileUpstreamTLS(&utc, cl.h2)
			if err != nil {
				return nil, err
			}
			cl.tlsConfig, cl.scheme = tc, "https"
			b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&utc)
			sum := sha256.Sum256(b)
			cl.tlsKey = hex.EncodeToString(sum[:8])
		}
	}
	if len(c.GetTransportSocketMatches()) > 0 {
		return nil, errors.New("transport_socket_matches are not emulated")
	}
	return cl, nil
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

// tlsCertificates and validationContext read what upstream and downstream
// contexts share, as Envoy's one CommonTlsContext reader serves both
// (source/common/tls/context_config_impl.cc): the inline tls_certificates,
// and the inline validation_context (nil when there is none).
func tlsCertificates(common *tlsv3.CommonTlsContext) ([]tls.Certificate, error) {
	var certs []tls.Certificate
	for _, c := range common.GetTlsCertificates() {
		chain, err := dataSource(c.GetCertificateChain())
		if err != nil {
			return nil, err
		}
		key, err := dataSource(c.GetPrivateKey())
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair([]byte(chain), []byte(key))
		if err != nil {
			return nil, fmt.Errorf("tls certificate: %w", err)
		}
		certs = append(certs, pair)
	}
	return certs, nil
}

func validationContext(common *tlsv3.CommonTlsContext) (*tlsv3.CertificateValidationContext, error) {
	switch v := common.GetValidationContextType().(type) {
	case nil:
		return nil, nil
	case *tlsv3.CommonTlsContext_ValidationContext:
		return v.ValidationContext, nil
	default:
		return nil, fmt.Errorf("validation context %T is not emulated", v)
	}
}

// trustedCAPool is the pool of a validation context's trusted_ca.
func trustedCAPool(vc *tlsv3.CertificateValidationContext) (*x509.CertPool, error) {
	ca, err := dataSource(vc.GetTrustedCa())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ca)) {
		return nil, errors.New("trusted_ca: no certificates")
	}
	return pool, nil
}

// compileUpstreamTLS emulates the upstream TLS transport socket: SNI only
// when sni is set; the server certificate is verified against trusted_ca
// only when a validation context has one (Envoy does not verify upstream
// certificates without it), and its SANs only when SAN matchers are given —
// never against the SNI.
func compileUpstreamTLS(u *tlsv3.UpstreamTlsContext, h2 bool) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: u.GetSni(), InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	common := u.GetCommonTlsContext()
	cfg.NextProtos = common.GetAlpnProtocols()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"http/1.1"}
		if h2 {
			cfg.NextProtos = []string{"h2"}
		}
	}
	certs, err := tlsCertificates(common)
	if err != nil {
		return nil, err
	}
	cfg.Certificates = certs
	vc, err := validationContext(common)
	if err != nil {
		return nil, err
	}
	if vc.GetTrustedCa() == nil {
		return cfg, nil
	}
	pool, err := trustedCAPool(vc)
	if err != nil {
		return nil, err
	}
	var sans []sanMatcher
	for _, m := range vc.GetMatchTypedSubjectAltNames() {
		sm, err := compileStringMatcher(m.GetMatcher())
		if err != nil {
			return nil, err
		}
		if m.GetSanType() == tlsv3.SubjectAltNameMatcher_OTHER_NAME || m.GetSanType() == tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED {
			return nil, fmt.Errorf("subject alt name type %v is not emulated", m.GetSanType())
		}
		sans = append(sans, sanMatcher{typ: m.GetSanType(), m: sm})
	}
	for _, m := range vc.GetMatchSubjectAltNames() {
		sm, err := compileStringMatcher(m)
		if err != nil {
			return nil, err
		}
		sans = append(sans, sanMatcher{m: sm}) // deprecated untyped form: any SAN
	}
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("no peer certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter}); err != nil {
			return err
		}
		if len(sans) == 0 {
			return nil
		}
		for _, s := range sans {
			if s.match(certs[0]) {
				return nil
			}
		}
		return errors.New("no subject alternative name matched")
	}
	return cfg, nil
}

// sanMatcher is one SubjectAltNameMatcher (DefaultCertValidator): the SANs
// of the given type are matched; a DNS SAN with a leading wildcard label
// matches an exact matcher for a name in that domain (dnsNameMatch).
type sanMatcher struct {
	typ tlsv3.SubjectAltNameMatcher_SanType // unspecified: any type
	m   *stringMatcher
}

func (s sanMatcher) match(c *x509.Certificate) bool {
	anyType := s.typ == tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED
	if anyType || s.typ == tlsv3.SubjectAltNameMatcher_DNS {
		for _, n := range c.DNSNames {
			if s.m.match(n) || (s.m.kind == 0 && wildcardDNSMatch(n, s.m.s)) {
				return true
			}
		}
	}
	if anyType || s.typ == tlsv3.SubjectAltNameMatcher_IP_ADDRESS {
		for _, ip := range c.IPAddresses {
			if s.m.match(ip.String()) {
				return true
			}
		}
	}
	if anyType || s.typ == tlsv3.SubjectAltNameMatcher_URI {
		for _, u := range c.URIs {
			if s.m.match(u.String()) {
				return true
			}
		}
	}
	if anyType || s.typ == tlsv3.SubjectAltNameMatcher_EMAIL {
		for _, e := range c.EmailAddresses {
			if s.m.match(e) {
				return true
			}
		}
	}
	return false
}

// wildcardDNSMatch matches a certificate name "*.example.com" against
// "a.example.com" (one label only).
func wildcardDNSMatch(certName, name string) bool {
	if !strings.HasPrefix(certName, "*.") {
		return false
	}
	i := strings.IndexByte(name, '.')
	return i > 0 && strings.EqualFold(name[i:], certName[1:])
}

// dialError marks a failure to establish the upstream connection (TCP or
// TLS), which Envoy reports as a connection failure (flag UF).
type dialError struct {
	err     error
	timeout bool
}

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dialUpstream connects to an endpoint of a cluster, with TLS when tc is
// set; the handshake has its own connect timeout. Every failure is a
// dialError.
func dialUpstream(ctx context.Context, d *net.Dialer, tc *tls.Config, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var ne net.Error
		return nil, &dialError{err: err, timeout: errors.As(err, &ne) && ne.Timeout()}
	}
	if tc == nil {
		return c, nil
	}
	hctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	tlsConn := tls.Client(c, tc)
	if err := tlsConn.HandshakeContext(hctx); err != nil {
		_ = c.Close()
		return nil, &dialError{err: fmt.Errorf("TLS error: %w", err)}
	}
	return tlsConn, nil
}

// upstreamPool is a cluster's connection pool.
type upstreamPool interface {
	http.RoundTripper
	// retire closes the idle connections of a pool no configuration uses
	// any more.
	retire()
}

// netTransport is a cluster's pool: net/http's Transport.
type netTransport struct{ *http.Transport }

func (t netTransport) retire() { t.CloseIdleConnections() }

// newTransport builds the connection pool of a cluster: net/http's
// Transport, for HTTP/1.1 and HTTP/2 (rules.go, "Upstream connections").
func newTransport(cl *cluster) upstreamPool {
	dialer := &net.Dialer{Timeout: cl.connectTimeout}
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) {
		return dialUpstream(ctx, dialer, nil, addr)
	}
	tr := &http.Transport{
		DialContext:            dial,
		MaxIdleConnsPerHost:    maxIdlePerHost,
		IdleConnTimeout:        cl.idleTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHeadersH2,
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
		tr.MaxResponseHeaderBytes = maxResponseHeadersH1
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
	return netTransport{tr}
}

// transportKey identifies a cluster's connection settings, so an unchanged
// cluster keeps its connection pool across updates.
func transportKey(cl *cluster) string {
	t := "plain"
	if cl.tlsConfig != nil {
		t = "tls:" + cl.tlsKey
	}
	return fmt.Sprintf("%s|%s|h2=%v|ct=%s|idle=%s", cl.name, t, cl.h2, cl.connectTimeout, cl.idleTimeout)
}

func newClusterRuntime(l clusterLimits) *clusterRuntime {
	rt := &clusterRuntime{}
	if l.maxConnections > 0 {
		rt.slots = make(chan struct{}, l.maxConnections)
	}
	return rt
}

// pick returns the next endpoint, round robin over the hosts pickHosts
// chooses.
func (c *cluster) pick() (string, bool) {
	eps := c.pickHosts()
	if len(eps) == 0 {
		return "", false
	}
	n := c.rt.rr.Add(1) - 1
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
func (c *cluster) pickHosts() []string {
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

// acquire applies the circuit breakers before an upstream request
// (ConnPoolImplBase::newStreamImpl): max_requests bounds requests in flight;
// for HTTP/1.1, where a connection carries one request at a time,
// max_connections bounds concurrent requests and the overflow waits as
// pending up to max_pending_requests. Overflow is flag UO.
func (c *cluster) acquire(ctx context.Context, log *slog.Logger) (release func(), overflow bool, err error) {
	rt := c.rt
	if rt.active.Add(1) > c.limits.maxRequests {
		rt.active.Add(-1)
		return nil, true, nil
	}
	if c.h2 || rt.slots == nil {
		return func() { rt.active.Add(-1) }, false, nil
	}
	select {
	case rt.slots <- struct{}{}:
	default:
		if rt.pending.Add(1) > c.limits.maxPending {
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
