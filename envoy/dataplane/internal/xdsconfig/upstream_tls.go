package xdsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// commonTLS reads what upstream and downstream contexts share, as Envoy's
// one CommonTlsContext reader serves both
// (source/common/tls/context_config_impl.cc): the inline tls_certificates
// into cfg, and the inline validation_context (nil when there is none).
func commonTLS(cfg *tls.Config, common *tlsv3.CommonTlsContext) (*tlsv3.CertificateValidationContext, error) {
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
		cfg.Certificates = append(cfg.Certificates, pair)
	}
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
	vc, err := commonTLS(cfg, common)
	if err != nil {
		return nil, err
	}
	if len(vc.GetMatchSubjectAltNames()) > 0 {
		return nil, errors.New("match_subject_alt_names (deprecated) is not emulated: use match_typed_subject_alt_names")
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
	// Runs after the handshake parsed the chain, whatever InsecureSkipVerify.
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		certs := cs.PeerCertificates
		if len(certs) == 0 {
			return errors.New("no peer certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter}); err != nil {
			return err
		}
		if len(sans) == 0 || slices.ContainsFunc(sans, func(s sanMatcher) bool { return s.match(certs[0]) }) {
			return nil
		}
		return errors.New("no subject alternative name matched")
	}
	return cfg, nil
}

// sanMatcher is one SubjectAltNameMatcher (DefaultCertValidator): the SANs
// of the given type are matched; a DNS SAN with a leading wildcard label
// matches an exact matcher for a name in that domain (dnsNameMatch).
type sanMatcher struct {
	typ tlsv3.SubjectAltNameMatcher_SanType
	m   *stringMatcher
}

func (s sanMatcher) match(c *x509.Certificate) bool {
	var names []string
	switch s.typ {
	case tlsv3.SubjectAltNameMatcher_DNS:
		names = c.DNSNames
	case tlsv3.SubjectAltNameMatcher_EMAIL:
		names = c.EmailAddresses
	case tlsv3.SubjectAltNameMatcher_IP_ADDRESS:
		for _, ip := range c.IPAddresses {
			names = append(names, ip.String())
		}
	case tlsv3.SubjectAltNameMatcher_URI:
		for _, u := range c.URIs {
			names = append(names, u.String())
		}
	}
	return slices.ContainsFunc(names, func(n string) bool {
		return s.m.match(n) || (s.typ == tlsv3.SubjectAltNameMatcher_DNS && s.m.kind == 0 && wildcardDNSMatch(n, s.m.s))
	})
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
