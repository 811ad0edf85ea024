package dataplane

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/internal/testpki"
)

const uriSANAttr = "connection.uri_san_peer_certificate"

// mtlsEnv is a data plane whose listener requires client certificates of
// ca (when ca is set) and whose ext_proc filter asks for the peer's URI SAN.
func mtlsEnv(t *testing.T, ca *testpki.CA, server testpki.Pair) (*fakeExtProc, *httptest.Server) {
	t.Helper()
	ep := defaultExtProc()
	ep.RequestAttributes = []string{uriSANAttr}
	res := setup{extProc: ep, routes: []*routev3.Route{directRoute("/", 200, "ok")}}.resources(t)
	if ca != nil {
		lis := res[resourcev3.ListenerType][0].(*listenerv3.Listener)
		file := func(p string) *corev3.DataSource {
			return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: p}}
		}
		lis.FilterChains[0].TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &tlsv3.DownstreamTlsContext{
				RequireClientCertificate: wrapperspb.Bool(true),
				CommonTlsContext: &tlsv3.CommonTlsContext{
					AlpnProtocols:   []string{"h2", "http/1.1"},
					TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: file(server.CertFile), PrivateKey: file(server.KeyFile)}},
					ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
						TrustedCa: file(ca.CertFile)}},
				},
			})}}
	}
	ext, cc := startExtProc(t, continueAll)
	dp, err := New(Options{ExtProcConn: cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	if err := dp.Apply(res); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	srv := httptest.NewUnstartedServer(dp)
	if ca != nil {
		srv.TLS = dp.TLSConfig()
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return ext, srv
}

func mtlsGet(t *testing.T, srv *httptest.Server, roots *testpki.CA, cert *testpki.Pair, hdr map[string]string) (int, error) {
	t.Helper()
	tr := &http.Transport{}
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots.Pool}
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{cert.TLS}
		}
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/mcp/core", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestDownstreamMTLSAttributes: the peer certificate's first URI SAN
// reaches ext_proc in the request_headers message's attributes, under
// envoy.filters.http.ext_proc, and only there (rules.go, "Request
// attributes of the ext_proc filter").
func TestDownstreamMTLSAttributes(t *testing.T) {
	ca := testpki.NewCA(t, "mesh")
	ext, srv := mtlsEnv(t, ca, ca.Server("envoy"))
	client := ca.Client("client", "spiffe://example.org/ns/a/sa/b", "spiffe://example.org/ns/a/sa/second")
	if code, err := mtlsGet(t, srv, ca, &client, map[string]string{"x-forwarded-client-cert": "URI=spiffe://example.org/ns/evil/sa/x"}); err != nil || code != 200 {
		t.Fatalf("mTLS request: %d, %v", code, err)
	}
	ext.waitEnded(t, 1)
	msgs := ext.messages()
	if len(msgs) < 2 {
		t.Fatalf("messages %v, want request headers and body", ext.kinds())
	}
	got := msgs[0].GetAttributes()[rules.ExtProcAttrNamespace].GetFields()[uriSANAttr].GetStringValue()
	if msgs[0].GetRequestHeaders() == nil || got != "spiffe://example.org/ns/a/sa/b" {
		t.Errorf("request_headers attributes %v, want %s = the first URI SAN", msgs[0].GetAttributes(), uriSANAttr)
	}
	for _, m := range msgs[1:] {
		if m.GetAttributes() != nil {
			t.Errorf("%T carries attributes %v; only the first request message does", m.GetRequest(), m.GetAttributes())
		}
	}
}

// TestDownstreamMTLSRejects: no client certificate, or one of another CA,
// fails the handshake; ext_proc never sees the request.
func TestDownstreamMTLSRejects(t *testing.T) {
	ca := testpki.NewCA(t, "mesh")
	other := testpki.NewCA(t, "other")
	ext, srv := mtlsEnv(t, ca, ca.Server("envoy"))
	stranger := other.Client("stranger", "spiffe://example.org/ns/a/sa/b")
	for name, cert := range map[string]*testpki.Pair{"no certificate": nil, "another CA": &stranger} {
		if code, err := mtlsGet(t, srv, ca, cert, nil); err == nil {
			t.Errorf("%s: got %d, want a failed handshake", name, code)
		}
	}
	if n := len(ext.messages()); n != 0 {
		t.Errorf("ext_proc got %d messages", n)
	}
}

// TestPlaintextAttributes: on a plaintext listener the attribute cannot
// exist: Envoy still sends the (empty) Struct, and no client header fills
// it.
func TestPlaintextAttributes(t *testing.T) {
	ext, srv := mtlsEnv(t, nil, testpki.Pair{})
	if code, err := mtlsGet(t, srv, nil, nil, map[string]string{"x-forwarded-client-cert": "URI=spiffe://example.org/ns/evil/sa/x",
		uriSANAttr: "spiffe://example.org/ns/evil/sa/x"}); err != nil || code != 200 {
		t.Fatalf("request: %d, %v", code, err)
	}
	ext.waitEnded(t, 1)
	attrs := ext.messages()[0].GetAttributes()
	s, ok := attrs[rules.ExtProcAttrNamespace]
	if !ok || len(s.GetFields()) != 0 {
		t.Errorf("attributes %v, want an empty Struct under %s", attrs, rules.ExtProcAttrNamespace)
	}
}
