package dataplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

func TestPassThrough(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "toolsvc")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	rt := clusterRoute("/mcp/", "toolsvc_a", func(a *routev3.RouteAction) {
		a.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "tool.internal"}
	})
	rt.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{
		Header: &corev3.HeaderValue{Key: "x-route", Value: "%UPSTREAM_CLUSTER%"}}}
	e := newEnv(t, nil, setup{
		routes:   []*routev3.Route{rt, directRoute("/direct", 200, "direct body")},
		clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
	})

	got := e.do("POST", "/mcp/core", `{"a":1}`, map[string]string{"X-Custom": "c"})
	if got.status != 201 || got.body != `{"ok":true}` {
		t.Fatalf("got %d %q", got.status, got.body)
	}
	for k, want := range map[string]string{
		"Server": "envoy", "Content-Type": "application/json", "Content-Length": "11", "X-Route": "toolsvc_a",
	} {
		if v := got.header.Get(k); v != want {
			t.Errorf("response %s = %q, want %q", k, v, want)
		}
	}
	if got.header.Get("X-Envoy-Upstream-Service-Time") == "" {
		t.Error("x-envoy-upstream-service-time missing")
	}
	reqs := up.requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	h := reqs[0].header
	if len(h.Get("X-Request-Id")) != 36 || h.Get("X-Forwarded-Proto") != "http" ||
		h.Get("X-Envoy-Expected-Rq-Timeout-Ms") != "15000" || h.Get("X-Custom") != "c" || reqs[0].body != `{"a":1}` ||
		reqs[0].host != "tool.internal" {
		t.Errorf("upstream request %+v", reqs[0])
	}

	if got := e.do("GET", "/direct", "", nil); got.status != 200 || got.body != "direct body" || got.header.Get("Content-Type") != "text/plain" {
		t.Errorf("direct response: %d %q %v", got.status, got.body, got.header)
	}
	if got := e.do("GET", "/nowhere", "", nil); got.status != 404 || got.body != "" {
		t.Errorf("no route: %d %q", got.status, got.body)
	}
}

func TestRetryOn5xx(t *testing.T) {
	tests := []struct {
		name       string
		retries    uint32
		wantStatus int
		wantCalls  int
	}{
		{name: "retried", retries: 1, wantStatus: 200, wantCalls: 2},
		{name: "no retries left", retries: 0, wantStatus: 503, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = w.Write([]byte("second"))
			})
			e := newEnv(t, nil, setup{
				routes: []*routev3.Route{clusterRoute("/", "toolsvc_a", func(a *routev3.RouteAction) {
					a.RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(tt.retries),
						RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond)}}
				})},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
			})
			got := e.do("POST", "/", "body", nil)
			if got.status != tt.wantStatus || int(calls.Load()) != tt.wantCalls {
				t.Fatalf("got %d after %d calls, want %d after %d", got.status, calls.Load(), tt.wantStatus, tt.wantCalls)
			}
			for _, r := range up.requests() {
				if r.body != "body" {
					t.Errorf("attempt sent body %q", r.body)
				}
			}
		})
	}
}

func TestCircuitBreakers(t *testing.T) {
	overflow := "upstream connect error or disconnect/reset before headers. reset reason: overflow"
	tests := []struct {
		name       string
		th         *clusterv3.CircuitBreakers_Thresholds
		wantStatus int
		wantBody   string
	}{
		{name: "max_requests", th: &clusterv3.CircuitBreakers_Thresholds{MaxRequests: wrapperspb.UInt32(1)},
			wantStatus: 503, wantBody: overflow},
		{name: "max_connections without pending room",
			th:         &clusterv3.CircuitBreakers_Thresholds{MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(0)},
			wantStatus: 503, wantBody: overflow},
		{name: "max_connections with pending room waits",
			th:         &clusterv3.CircuitBreakers_Thresholds{MaxConnections: wrapperspb.UInt32(1), MaxPendingRequests: wrapperspb.UInt32(1)},
			wantStatus: 200, wantBody: "done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arrived := make(chan struct{}, 2)
			release := make(chan struct{})
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
				_, _ = w.Write([]byte("done"))
			})
			cl := staticCluster(t, "toolsvc_a", up.addr())
			cl.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{tt.th}}
			e := newEnv(t, nil, setup{
				routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters: []*clusterv3.Cluster{cl},
			})
			first := make(chan response, 1)
			go func() { first <- e.do("GET", "/first", "", nil) }()
			<-arrived
			second := make(chan response, 1)
			go func() { second <- e.do("GET", "/second", "", nil) }()
			if tt.wantStatus == 200 {
				// The second request is pending; it proceeds once the first
				// one frees the connection.
				close(release)
			}
			got := <-second
			if tt.wantStatus != 200 {
				close(release)
			}
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Fatalf("second request got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			if f := <-first; f.status != 200 {
				t.Fatalf("first request got %d", f.status)
			}
		})
	}
}

func tlsCluster(t *testing.T, name, addr string, ca []byte, h2 bool, sans ...*tlsv3.SubjectAltNameMatcher) *clusterv3.Cluster {
	t.Helper()
	cl := staticCluster(t, name, addr)
	utc := &tlsv3.UpstreamTlsContext{Sni: "tool.example", CommonTlsContext: &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa:                 &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: ca}},
			MatchTypedSubjectAltNames: sans,
		}},
	}}
	cl.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, utc)}}
	if h2 {
		cl.TypedExtensionProtocolOptions = map[string]*anypb.Any{xdsconfig.HTTPProtocolOptionsKey: mustAny(t, &upstreamhttpv3.HttpProtocolOptions{
			UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}},
		})}
	}
	return cl
}

func TestUpstreamTLS(t *testing.T) {
	type seen struct {
		sni   string
		proto int
	}
	start := func(h2 bool) (*httptest.Server, chan seen) {
		ch := make(chan seen, 1)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ch <- seen{r.TLS.ServerName, r.ProtoMajor}
			_, _ = w.Write([]byte("secure"))
		}))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv, ch
	}
	pemOf := func(s *httptest.Server) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	}
	for _, h2 := range []bool{false, true} {
		srv, ch := start(h2)
		e := newEnv(t, nil, setup{
			routes:   []*routev3.Route{clusterRoute("/", "toolsvc_tls", nil)},
			clusters: []*clusterv3.Cluster{tlsCluster(t, "toolsvc_tls", strings.TrimPrefix(srv.URL, "https://"), pemOf(srv), h2)},
		})
		got := e.do("GET", "/", "", nil)
		if got.status != 200 || got.body != "secure" {
			t.Fatalf("h2=%v: got %d %q", h2, got.status, got.body)
		}
		s := <-ch
		wantProto := 1
		if h2 {
			wantProto = 2
		}
		if s.sni != "tool.example" || s.proto != wantProto {
			t.Errorf("h2=%v: upstream saw SNI %q HTTP/%d", h2, s.sni, s.proto)
		}
	}

	// SAN matchers are typed; httptest's certificate names example.com and
	// 127.0.0.1.
	san := func(typ tlsv3.SubjectAltNameMatcher_SanType, v string) *tlsv3.SubjectAltNameMatcher {
		return &tlsv3.SubjectAltNameMatcher{SanType: typ, Matcher: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}}
	}
	for _, tc := range []struct {
		san  *tlsv3.SubjectAltNameMatcher
		want int
	}{
		{san(tlsv3.SubjectAltNameMatcher_DNS, "example.com"), 200},
		{san(tlsv3.SubjectAltNameMatcher_IP_ADDRESS, "127.0.0.1"), 200},
		{san(tlsv3.SubjectAltNameMatcher_DNS, "127.0.0.1"), 503},
		{san(tlsv3.SubjectAltNameMatcher_DNS, "other.example"), 503},
	} {
		srv, _ := start(false)
		e := newEnv(t, nil, setup{
			routes:   []*routev3.Route{clusterRoute("/", "toolsvc_tls", nil)},
			clusters: []*clusterv3.Cluster{tlsCluster(t, "toolsvc_tls", strings.TrimPrefix(srv.URL, "https://"), pemOf(srv), false, tc.san)},
		})
		if got := e.do("GET", "/", "", nil); got.status != tc.want {
			t.Errorf("SAN %v %q: got %d %q, want %d", tc.san.GetSanType(), tc.san.GetMatcher().GetExact(), got.status, got.body, tc.want)
		}
	}

	// A server certificate the trusted CA did not sign is a connect failure.
	srv, _ := start(false)
	e := newEnv(t, nil, setup{
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_tls", nil)},
		clusters: []*clusterv3.Cluster{tlsCluster(t, "toolsvc_tls", strings.TrimPrefix(srv.URL, "https://"), otherCA(t), false)},
	})
	got := e.do("GET", "/", "", nil)
	// Since 1.39 the transport failure reason is not in the body.
	if got.status != 503 || !strings.HasSuffix(got.body, "reset reason: connection failure") {
		t.Fatalf("untrusted upstream: got %d %q", got.status, got.body)
	}
}

func TestUpstreamH2C(t *testing.T) {
	proto := make(chan int, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto <- r.ProtoMajor
		_, _ = w.Write([]byte("h2c"))
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	cl := staticCluster(t, "toolsvc_h2c", strings.TrimPrefix(srv.URL, "http://"))
	cl.TypedExtensionProtocolOptions = map[string]*anypb.Any{xdsconfig.HTTPProtocolOptionsKey: mustAny(t, &upstreamhttpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}},
	})}
	e := newEnv(t, nil, setup{
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_h2c", nil)},
		clusters: []*clusterv3.Cluster{cl},
	})
	if got := e.do("POST", "/x?y=1", "b", nil); got.status != 200 || got.body != "h2c" {
		t.Fatalf("got %d %q", got.status, got.body)
	}
	if p := <-proto; p != 2 {
		t.Fatalf("upstream saw HTTP/%d, want prior-knowledge HTTP/2", p)
	}
}

// otherCA returns a fresh self-signed CA certificate (httptest servers all
// share one certificate, so a second server cannot serve as "untrusted").
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "other test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestHealthyPanicThreshold checks panic mode: with Envoy's default 50%
// threshold a cluster whose only endpoint is unhealthy still sends it
// traffic, while at 0% the request is answered at once with 503 no healthy
// upstream (flag UH), the reply local_reply_config turns into an
// "unavailable" result.
func TestHealthyPanicThreshold(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold *float64 // nil: unset
		unhealthy []bool   // per endpoint
		want      int
		wantCalls int
	}{
		{name: "default threshold: panic routes to the unhealthy host", unhealthy: []bool{true}, want: 200, wantCalls: 1},
		{name: "0%: no healthy upstream", threshold: ptr(0.0), unhealthy: []bool{true}, want: 503},
		{name: "0%: healthy hosts still serve", threshold: ptr(0.0), unhealthy: []bool{false}, want: 200, wantCalls: 1},
		{name: "50% healthy is not below a 50% threshold", threshold: ptr(50.0), unhealthy: []bool{true, false}, want: 200, wantCalls: 1},
		{name: "truncated to whole percent: 50.9% is 50%", threshold: ptr(50.9), unhealthy: []bool{true, false}, want: 200, wantCalls: 1},
		{name: "50% healthy is below 51%: panic uses both", threshold: ptr(51.0), unhealthy: []bool{true, false}, want: 200, wantCalls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls [2]atomic.Int32
			c := staticCluster(t, "toolsvc_a", "127.0.0.1:1")
			c.LoadAssignment.Endpoints[0].LbEndpoints = nil
			for i, bad := range tc.unhealthy {
				up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { calls[i].Add(1) })
				ep := cla("toolsvc_a", "127.0.0.1", 0).Endpoints[0].LbEndpoints[0]
				host, port, _ := strings.Cut(up.addr(), ":")
				p, _ := strconv.Atoi(port)
				ep.GetEndpoint().GetAddress().GetSocketAddress().Address = host
				ep.GetEndpoint().GetAddress().GetSocketAddress().PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: uint32(p)}
				if bad {
					ep.HealthStatus = corev3.HealthStatus_UNHEALTHY
				}
				c.LoadAssignment.Endpoints[0].LbEndpoints = append(c.LoadAssignment.Endpoints[0].LbEndpoints, ep)
			}
			if tc.threshold != nil {
				c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: *tc.threshold}}
			}
			e := newEnv(t, nil, setup{routes: []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)}, clusters: []*clusterv3.Cluster{c}})
			// Two requests, so round robin over two hosts reaches both.
			var got response
			for range 2 {
				got = e.do("POST", "/", "x", nil)
			}
			if got.status != tc.want {
				t.Fatalf("status %d %q, want %d", got.status, got.body, tc.want)
			}
			if tc.want == 503 && got.body != "no healthy upstream" {
				t.Errorf("body %q", got.body)
			}
			hosts := 0
			for i := range calls {
				if calls[i].Load() > 0 {
					hosts++
				}
			}
			if hosts != tc.wantCalls {
				t.Errorf("%d hosts were called, want %d", hosts, tc.wantCalls)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
