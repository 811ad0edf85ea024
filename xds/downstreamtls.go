package xds

import (
	"errors"
	"path/filepath"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// DownstreamTLS makes the MCP listener accept only mTLS: Envoy presents
// CertFile/KeyFile and requires a client certificate that chains to
// ClientCAFile (a sidecar behind a mesh's mTLS). The ext_proc filter then
// also sends the client certificate's first URI SAN, the caller's SPIFFE
// ID, to the extproc server (request_attributes; docs/operators.md, "Mesh
// identity"). The paths are on Envoy's file system; Envoy watches them
// (DataSource filename), so rotated certificates need no xDS push.
type DownstreamTLS struct {
	CertFile     string `json:"certFile"`
	KeyFile      string `json:"keyFile"`
	ClientCAFile string `json:"clientCAFile"`
}

// MeshIDAttribute is the request attribute the ext_proc filter sends when
// the listener has DownstreamTLS: the downstream peer certificate's first
// URI SAN (source/extensions/filters/common/expr/context.h in
// envoyproxy/envoy). extproc reads it as the caller's mesh identity.
const MeshIDAttribute = "connection.uri_san_peer_certificate"

func (t *DownstreamTLS) check() error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, f := range []struct{ name, v string }{{"certFile", t.CertFile}, {"keyFile", t.KeyFile}, {"clientCAFile", t.ClientCAFile}} {
		switch {
		case f.v == "":
			errs = append(errs, errors.New("options: downstreamTLS."+f.name+" is required"))
		case !filepath.IsAbs(f.v):
			errs = append(errs, errors.New("options: downstreamTLS."+f.name+" must be an absolute path on Envoy's file system"))
		}
	}
	return errors.Join(errs...)
}

// downstreamTransportSocket is the listener's DownstreamTlsContext:
// require_client_certificate with the client CA as trusted_ca, ALPN h2 and
// http/1.1 for the AUTO codec.
func downstreamTransportSocket(t *DownstreamTLS) (*corev3.TransportSocket, error) {
	file := func(p string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: p}}
	}
	return tlsTransportSocket(&tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols: []string{"h2", "http/1.1"},
			TlsCertificates: []*tlsv3.TlsCertificate{{
				CertificateChain: file(t.CertFile),
				PrivateKey:       file(t.KeyFile),
			}},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: file(t.ClientCAFile),
			}},
		},
	})
}
