package dataplane

import (
	"net"
	"net/http"
	"time"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// The downstream idle timeout is the HTTP connection manager's
// common_http_protocol_options.idle_timeout (protocol.proto
// HttpProtocolOptions.idle_timeout): "the period in which there are no
// active requests. When the idle timeout is reached the connection will be
// closed. ... If not specified, this defaults to 1 hour. To disable idle
// timeouts explicitly set this to 0." (rules.DefaultIdleTimeout). The listener's
// value arrives over xDS after the server has started, so it is applied
// per connection from ConnState, not as the fixed http.Server.IdleTimeout.
// A connection that never sends a request is bounded by the server's
// ReadHeaderTimeout instead.

// ConnState is the http.Server's ConnState of the data plane's listener:
// a connection without an active request is closed after the listener's
// idle timeout.
func (d *DataPlane) ConnState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateIdle:
		timeout := d.idleTimeout()
		if timeout <= 0 {
			return
		}
		t := time.AfterFunc(timeout, func() {
			if _, ok := d.idle.LoadAndDelete(c); ok {
				_ = c.Close()
			}
		})
		if old, ok := d.idle.Swap(c, t); ok {
			old.(*time.Timer).Stop()
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		if t, ok := d.idle.LoadAndDelete(c); ok {
			t.(*time.Timer).Stop()
		}
	}
}

// idleTimeout is the idle timeout of the listener in force (Envoy's
// default before one is configured).
func (d *DataPlane) idleTimeout() time.Duration {
	if cfg := d.cfg.Load(); cfg != nil && cfg.HCM != nil {
		return cfg.HCM.IdleTimeout
	}
	return rules.DefaultIdleTimeout
}
