package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/toolmesh/toolmesh/internal/mtls"
)

// The control listeners: whoever reaches them can act as Envoy (ext_proc
// receives upstream credentials in header mutations and asserts mesh
// identities; notifications trusts its route and caller headers; xDS shows
// the whole topology).
var controlListeners = map[string]bool{"extproc": true, "xds": true, "notifications": true}

// checkPerimeter refuses a control listener on a non-loopback address
// without TLS, unless insecureListeners says so.
func (a *app) checkPerimeter(name, addr string) error {
	if !controlListeners[name] || a.cfg.ControlTLS != nil || a.cfg.InsecureListeners || loopback(addr) {
		return nil
	}
	key := serverKeys[name]
	return fmt.Errorf("%s listener on %s (--%s, config key %s) is not loopback and has no TLS: "+
		"set controlTLS (--control-tls-cert, --control-tls-key, --control-tls-client-ca, --control-tls-allowed-sans), "+
		"or accept plaintext with --insecure-listeners (config key insecureListeners)",
		name, addr, listenFlags[key], key)
}

// loopback reports whether addr's host is localhost or a loopback IP.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// controlTLS is the TLS configuration of control listener name; nil
// without controlTLS.
func (a *app) controlTLS(name string) (*tls.Config, error) {
	if a.cfg.ControlTLS == nil {
		return nil, nil
	}
	s, err := mtls.New(*a.cfg.ControlTLS, name, a.log.With(slog.String("component", "controlTLS")))
	if err != nil {
		return nil, fmt.Errorf("controlTLS.%w", err)
	}
	return s.TLSConfig(), nil
}

// controlGRPCOptions are the transport credentials of a gRPC control
// listener: mTLS with controlTLS, else none (plaintext).
func (a *app) controlGRPCOptions(name string) ([]grpc.ServerOption, error) {
	c, err := a.controlTLS(name)
	if err != nil || c == nil {
		return nil, err
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(c))}, nil
}

// errRunControlTLS: run's local data plane needs a client certificate for
// its own control listeners, the one envoyControlTLS gives Envoy.
var errRunControlTLS = errors.New("controlTLS: run's local data plane needs envoyControlTLS (certFile, keyFile, caFile, serverSANs) " +
	"to present a client certificate to its own ext_proc and xDS servers")

// dataPlaneTLS is the client TLS of run's local data plane towards the
// control listeners: envoyControlTLS, read here (the paths are on this
// machine, as the data plane is this process). nil without controlTLS.
func (a *app) dataPlaneTLS() (*tls.Config, error) {
	if a.cfg.ControlTLS == nil {
		return nil, nil
	}
	e := a.cfg.EnvoyControlTLS
	if e == nil {
		return nil, errRunControlTLS
	}
	c, err := mtls.Client(e.CertFile, e.KeyFile, e.CAFile, e.ServerSANs)
	if err != nil {
		return nil, fmt.Errorf("envoyControlTLS: %w", err)
	}
	return c, nil
}
