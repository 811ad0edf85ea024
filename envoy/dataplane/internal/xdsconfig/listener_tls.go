package xdsconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// listenerTLS compiles the transport socket of the filter chain that holds
// the listener's HTTP connection manager; nil for plaintext.
func listenerTLS(l *listenerv3.Listener) (*tls.Config, error) {
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) { // nil: no default chain
		ts := fc.GetTransportSocket()
		if ts == nil {
			continue
		}
		if ts.GetName() != tlsTransportSocket && ts.GetTypedConfig().GetTypeUrl() != "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext" {
			return nil, fmt.Errorf("transport socket %q is not emulated", ts.GetName())
		}
		var dtc tlsv3.DownstreamTlsContext
		if err := ts.GetTypedConfig().UnmarshalTo(&dtc); err != nil {
			return nil, fmt.Errorf("transport socket %q: %w", ts.GetName(), err)
		}
		c, err := compileDownstreamTLS(&dtc)
		if err != nil {
			return nil, fmt.Errorf("downstream TLS context: %w", err)
		}
		return c, nil
	}
	return nil, nil
}

// compileDownstreamTLS emulates the parts of a DownstreamTlsContext the
// translator emits (rules.go, "Downstream TLS"): the server certificate,
// trusted_ca for client certificates, and require_client_certificate.
func compileDownstreamTLS(d *tlsv3.DownstreamTlsContext) (*tls.Config, error) {
	common := d.GetCommonTlsContext()
	if len(common.GetTlsCertificateSdsSecretConfigs()) > 0 || d.GetSessionTicketKeysType() != nil ||
		d.GetRequireSni().GetValue() || d.GetFullScanCertsOnSniMismatch() != nil {
		return nil, errors.New("SDS, session ticket keys and SNI settings are not emulated")
	}
	if alpn := common.GetAlpnProtocols(); len(alpn) > 0 && !slices.Contains(alpn, "http/1.1") {
		return nil, fmt.Errorf("alpn_protocols %v: only http/1.1 is emulated downstream", alpn)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: rules.DownstreamALPN(common.GetAlpnProtocols())}
	vc, err := commonTLS(cfg, common)
	if err != nil {
		return nil, err
	}
	if len(cfg.Certificates) == 0 {
		return nil, errors.New("no tls_certificates")
	}
	if len(vc.GetMatchTypedSubjectAltNames()) > 0 || len(vc.GetMatchSubjectAltNames()) > 0 || vc.GetCrl() != nil ||
		len(vc.GetVerifyCertificateHash()) > 0 || len(vc.GetVerifyCertificateSpki()) > 0 {
		return nil, errors.New("client certificate SAN, hash, SPKI and CRL checks are not emulated")
	}
	require := d.GetRequireClientCertificate().GetValue()
	if vc.GetTrustedCa() == nil {
		if require {
			return nil, errors.New("require_client_certificate without validation_context.trusted_ca is not emulated")
		}
		return cfg, nil
	}
	pool, err := trustedCAPool(vc)
	if err != nil {
		return nil, err
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = rules.DownstreamClientAuth(require)
	return cfg, nil
}
