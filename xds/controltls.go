package xds

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// ControlTLS is Envoy's side of the mutual TLS of toolmesh's control
// listeners (the extproc server's controlTLS): the client certificate
// Envoy presents on the clusters xDS programs to reach toolmesh (today
// wire.NotificationsCluster; toolmesh_extproc and the xDS cluster
// are in Envoy's bootstrap), the CA the server's certificate must chain
// to, and the SANs it must carry. The paths are on Envoy's file system;
// Envoy watches them (DataSource filename), so rotation needs no push.
type ControlTLS struct {
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	CAFile   string `json:"caFile"`
	// ServerSANs are the identities toolmesh's server certificate may
	// carry, any one of them: a URI (a SPIFFE ID) or a DNS name, exact.
	ServerSANs []string `json:"serverSANs"`
}

func (t *ControlTLS) check() error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, f := range []struct{ name, v string }{{"certFile", t.CertFile}, {"keyFile", t.KeyFile}, {"caFile", t.CAFile}} {
		switch {
		case f.v == "":
			errs = append(errs, errors.New("options: envoyControlTLS."+f.name+" is required"))
		case !filepath.IsAbs(f.v):
			errs = append(errs, errors.New("options: envoyControlTLS."+f.name+" must be an absolute path on Envoy's file system"))
		}
	}
	if len(t.ServerSANs) == 0 {
		errs = append(errs, errors.New("options: envoyControlTLS.serverSANs must name toolmesh's certificate (a SPIFFE ID or DNS name)"))
	}
	for i, s := range t.ServerSANs {
		if s == "" || strings.TrimSpace(s) != s {
			errs = append(errs, fmt.Errorf("options: envoyControlTLS.serverSANs[%d] %q is empty or has spaces", i, s))
		}
	}
	return errors.Join(errs...)
}

// controlTransportSocket is the UpstreamTlsContext of a cluster to a
// control listener: Envoy's client certificate, the CA and the server SANs
// (URI for one with a scheme, DNS otherwise), and ALPN alpn.
func controlTransportSocket(t *ControlTLS, alpn string) (*corev3.TransportSocket, error) {
	file := func(p string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: p}}
	}
	sans := make([]*tlsv3.SubjectAltNameMatcher, 0, len(t.ServerSANs))
	for _, s := range t.ServerSANs {
		typ := tlsv3.SubjectAltNameMatcher_DNS
		if strings.Contains(s, "://") {
			typ = tlsv3.SubjectAltNameMatcher_URI
		}
		sans = append(sans, &tlsv3.SubjectAltNameMatcher{SanType: typ, Matcher: exact(s)})
	}
	return tlsTransportSocket(&tlsv3.UpstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols: []string{alpn},
			TlsCertificates: []*tlsv3.TlsCertificate{{
				CertificateChain: file(t.CertFile),
				PrivateKey:       file(t.KeyFile),
			}},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa:                 file(t.CAFile),
				MatchTypedSubjectAltNames: sans,
			}},
		},
	})
}
