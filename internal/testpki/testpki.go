// Package testpki makes certificates for tests: a CA, a server certificate
// for 127.0.0.1 and client certificates carrying a URI SAN (a SPIFFE ID),
// written as PEM files under a test's temporary directory.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority of one test.
type CA struct {
	t    testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate, PEM.
	CertFile string
	// Pool holds the CA certificate.
	Pool *x509.CertPool
}

// Pair is an issued certificate: its files and its tls.Certificate.
type Pair struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
}

var serial atomic.Int64

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          next(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key, Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.CertFile = ca.write(name+"-ca.crt", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(name string) Pair {
	return ca.issue(name, &x509.Certificate{
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client issues a client certificate whose URI SANs are uris (a SPIFFE ID
// such as spiffe://example.org/ns/a/sa/b); none for no URI SAN.
func (ca *CA) Client(name string, uris ...string) Pair {
	ca.t.Helper()
	tmpl := &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			ca.t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return ca.issue(name, tmpl)
}

func (ca *CA) issue(name string, tmpl *x509.Certificate) Pair {
	t := ca.t
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = next()
	tmpl.Subject = pkix.Name{CommonName: name}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{CertFile: ca.write(name+".crt", "CERTIFICATE", der), KeyFile: ca.write(name+".key", "EC PRIVATE KEY", kder)}
	if p.TLS, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
		t.Fatal(err)
	}
	return p
}

func (ca *CA) write(name, typ string, der []byte) string {
	ca.t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func next() *big.Int {
	return big.NewInt(time.Now().UnixNano() + serial.Add(1))
}
