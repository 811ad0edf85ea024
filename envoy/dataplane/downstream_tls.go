package dataplane

import (
	"crypto/tls"
	"errors"
)

// TLSConfig is what the data plane's listener socket must be served with
// (tls.NewListener, httptest.Server.TLS) when the listener may carry a
// DownstreamTlsContext: every handshake takes the context in force then
// (compileDownstreamTLS). While the listener has none, handshakes fail,
// as they would on a plaintext Envoy listener; serve a plaintext socket
// for a plaintext listener.
func (d *DataPlane) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cfg := d.cfg.Load()
			if cfg == nil || cfg.DownstreamTLS == nil {
				return nil, errors.New("the listener has no downstream TLS context")
			}
			return cfg.DownstreamTLS, nil
		},
	}
}
