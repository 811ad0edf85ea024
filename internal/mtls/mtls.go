// Package mtls serves the control listeners (ext_proc, xDS, change
// notifications) over mutual TLS: the server certificate, its key and the
// client CA are read from files and read again when they change, as
// cert-manager and SPIRE rotate them, and a client is accepted only when its
// certificate chains to the CA and carries an allowed SPIFFE ID (URI SAN) or
// DNS SAN.
package mtls

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
)

// Config is the mTLS of the control listeners (config key controlTLS).
type Config struct {
	// CertFile and KeyFile are the server certificate (PEM, leaf first) and
	// its private key.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// ClientCAFile holds the CA certificates (PEM) client certificates
	// must chain to.
	ClientCAFile string `json:"clientCAFile"`
	// AllowedSANs lists the client identities accepted: a SPIFFE ID or other
	// URI (spiffe://cluster.local/ns/mesh/sa/envoy), matched exactly against
	// the certificate's URI SANs, or a DNS name, matched exactly against its
	// DNS SANs. A client whose certificate has none of them is refused.
	AllowedSANs []string `json:"allowedSANs"`
}

// Validate reports every problem of the keys, each naming its key.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, f := range []struct{ key, path string }{
		{"certFile", c.CertFile}, {"keyFile", c.KeyFile}, {"clientCAFile", c.ClientCAFile},
	} {
		if f.path == "" {
			errs = append(errs, fmt.Errorf("%s: must be set", f.key))
		}
	}
	if len(c.AllowedSANs) == 0 {
		errs = append(errs, errors.New("allowedSANs: must list at least one SPIFFE ID or DNS name: without it any certificate of the CA would do"))
	}
	for i, s := range c.AllowedSANs {
		if err := checkSAN(s); err != nil {
			errs = append(errs, fmt.Errorf("allowedSANs[%d]: %w", i, err))
		}
	}
	// The files are read by New, at start: a config can be checked where
	// they are not mounted.
	return errors.Join(errs...)
}

func checkSAN(s string) error {
	if strings.TrimSpace(s) != s || s == "" {
		return fmt.Errorf("%q is empty or has surrounding spaces", s)
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("%q is not a URI with a scheme and a host (spiffe://trust-domain/path)", s)
		}
		return nil
	}
	if strings.ContainsAny(s, "/:@ ") {
		return fmt.Errorf("%q is neither a URI (spiffe://...) nor a DNS name", s)
	}
	return nil
}

// state is one reading of the files: their bytes, to tell a change, and
// the server configuration built from them.
type state struct {
	cert, key, ca []byte
	pair          tls.Certificate
	pool          *x509.CertPool
	tls           *tls.Config
}

// Server hands out the TLS configuration of a control listener. Each
// handshake compares the files with the last reading and builds a new
// configuration only when they differ; the current one is swapped in
// atomically, so handshakes take no lock.
type Server struct {
	cfg     Config
	log     *slog.Logger
	name    string
	current atomic.Pointer[state]
}

// New reads the files once; an error names the file at fault.
func New(cfg Config, name string, log *slog.Logger) (*Server, error) {
	st, err := load(&cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, name: name}
	st.tls = s.build(st)
	s.current.Store(st)
	return s, nil
}

// TLSConfig is the listener's configuration: every handshake gets the
// configuration of the files as they are then.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.config(), nil },
	}
}

// config returns the configuration for the files as they are now. Should a
// file be half written mid-rotation (a certificate without its key yet),
// the last good configuration stays and the next handshake tries again.
func (s *Server) config() *tls.Config {
	cur := s.current.Load()
	cert, err1 := os.ReadFile(s.cfg.CertFile)
	key, err2 := os.ReadFile(s.cfg.KeyFile)
	ca, err3 := os.ReadFile(s.cfg.ClientCAFile)
	if err := errors.Join(err1, err2, err3); err != nil {
		s.log.Warn("control TLS files unreadable, keeping the last good ones", slog.String("server", s.name), slog.Any("error", err))
		return cur.tls
	}
	if bytes.Equal(cert, cur.cert) && bytes.Equal(key, cur.key) && bytes.Equal(ca, cur.ca) {
		return cur.tls
	}
	st, err := parse(&s.cfg, cert, key, ca)
	if err != nil {
		s.log.Warn("control TLS files invalid, keeping the last good ones", slog.String("server", s.name), slog.Any("error", err))
		return cur.tls
	}
	st.tls = s.build(st)
	// Concurrent handshakes may both build; either result is the files' state.
	s.current.Store(st)
	s.log.Info("control TLS files reloaded", slog.String("server", s.name))
	return st.tls
}

func (s *Server) build(st *state) *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS12,
		Certificates:     []tls.Certificate{st.pair},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        st.pool,
		NextProtos:       []string{"h2", "http/1.1"},
		VerifyConnection: func(cs tls.ConnectionState) error { return Allowed(cs.PeerCertificates, s.cfg.AllowedSANs) },
	}
}

// Allowed reports whether the leaf of chain carries one of the allowed SANs.
func Allowed(chain []*x509.Certificate, allowed []string) error {
	if len(chain) == 0 {
		return errors.New("no client certificate")
	}
	leaf := chain[0]
	for _, u := range leaf.URIs {
		if slices.Contains(allowed, u.String()) {
			return nil
		}
	}
	for _, d := range leaf.DNSNames {
		if slices.Contains(allowed, d) {
			return nil
		}
	}
	return fmt.Errorf("certificate %q has none of the allowed SANs", leaf.Subject.CommonName)
}

func load(c *Config) (*state, error) {
	cert, err := os.ReadFile(c.CertFile)
	if err != nil {
		return nil, fmt.Errorf("certFile: %w", err)
	}
	key, err := os.ReadFile(c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("keyFile: %w", err)
	}
	ca, err := os.ReadFile(c.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("clientCAFile: %w", err)
	}
	return parse(c, cert, key, ca)
}

func parse(c *Config, cert, key, ca []byte) (*state, error) {
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("certFile %s, keyFile %s: %w", c.CertFile, c.KeyFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("clientCAFile %s: no PEM certificate", c.ClientCAFile)
	}
	return &state{cert: cert, key: key, ca: ca, pair: pair, pool: pool}, nil
}

// Client is the client side of a control channel, as Envoy's clusters have
// it: the certificate in certFile and keyFile, and a server certificate
// that chains to caFile and carries one of serverSANs (not the dialled
// host name: Envoy's match_typed_subject_alt_names does the same). The
// files are read once.
func Client(certFile, keyFile, caFile string, serverSANs []string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certFile %s, keyFile %s: %w", certFile, keyFile, err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("caFile: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("caFile %s: no PEM certificate", caFile)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		// The chain and the SANs are checked in VerifyConnection instead
		// of against the host name.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no server certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return err
			}
			return Allowed(cs.PeerCertificates, serverSANs)
		},
	}, nil
}
