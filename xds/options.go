package xds

import (
	"cmp"
	"fmt"
	"math"
	"time"
)

// MinEnvoyVersion is the oldest Envoy release the generated configuration
// works with: from 1.37 a route's request_body_buffer_limit applies when the
// route is matched (changelogs/1.37.0.yaml in envoyproxy/envoy), so it
// bounds the body ext_proc buffers; before, only the router saw it and the
// listener's per_connection_buffer_limit_bytes bounded requests.
// .envoy-version (the release toolmesh is tested with) must not be older.
const MinEnvoyVersion = "v1.37.0"

// Listener-level defaults (see Options).
const (
	DefaultListenAddress   = "0.0.0.0"
	DefaultListenPort      = 10000
	DefaultMessageTimeout  = 5 * time.Second
	DefaultMaxRequestBytes = 1 << 20 // 1 MiB, docs/contracts/mcp.md
	// DefaultMaxResponseBytes matches the extproc server's default limit on
	// a Tool Service reply (internal/app maxResponseBytes).
	DefaultMaxResponseBytes = 4 << 20
	DefaultServerName       = "toolmesh"
	DefaultServerVersion    = "dev"
	// DefaultUpstreamCAFile is the CA bundle of the official (Debian/Ubuntu
	// based) Envoy image; https Tool Services are verified against it.
	DefaultUpstreamCAFile = "/etc/ssl/certs/ca-certificates.crt"
)

// Options are the deployment-wide settings of the generated Envoy
// configuration. Zero values mean the defaults above.
type Options struct {
	// ListenAddress and ListenPort are where Envoy's MCP listener binds
	// (default 0.0.0.0:10000).
	ListenAddress string
	ListenPort    uint32
	// MessageTimeout is ext_proc's per-message timeout (default 5s). Envoy's
	// own default of 200 ms is far too short for parsing and resolving a
	// call, and turns into 504s that look like Tool Service timeouts.
	MessageTimeout time.Duration
	// MaxRequestBytes is the virtual host's request_body_buffer_limit
	// (default 1 MiB): a larger request body is a 413 from Envoy.
	MaxRequestBytes uint64
	// MaxResponseBytes is the largest Tool Service reply Envoy buffers for
	// ext_proc (default 4 MiB). Envoy has no per-route response limit: the
	// listener's per_connection_buffer_limit_bytes bounds a buffered
	// response, and a larger reply becomes a 500 local reply, which
	// local_reply_config turns into an "unavailable" tool result. Must fit
	// in 32 bits.
	MaxResponseBytes uint64
	// ServerName and ServerVersion fill _meta.serverInfo in the local replies
	// Envoy shapes for 2026-era tool calls (defaults toolmesh, dev).
	ServerName, ServerVersion string
	// UpstreamCAFile is the CA bundle, on Envoy's file system, that https
	// Tool Services are verified against (default DefaultUpstreamCAFile);
	// the override field caFile changes it per service.
	UpstreamCAFile string
	// Overrides is the SRE override file in force (nil: none). Translate
	// validates it; Server.SetOverrides replaces it at run time.
	Overrides *Overrides
	// Nodes picks the routes each Envoy node is served (first match wins;
	// a node no selector matches gets every route). Nil: every node gets
	// every route.
	Nodes []NodeSelector
	// EnvoyTracing, when set, programs Envoy's OpenTelemetry tracer and
	// emits its collector's cluster (envoytracing.go); nil is no tracing.
	EnvoyTracing *EnvoyTracing
	// DownstreamTLS, when set, makes the MCP listener mTLS-only and has the
	// ext_proc filter send the caller's SPIFFE ID (downstreamtls.go); nil
	// is plaintext.
	DownstreamTLS *DownstreamTLS
	// ControlTLS, when set, has Envoy reach toolmesh's notifications
	// server over mTLS (ControlTLS).
	ControlTLS *ControlTLS
	// Notifications, when set, emits the notifications cluster and its route
	// (notifications.go); nil: change-notification streams are not served.
	Notifications *Notifications
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	o.ListenAddress = cmp.Or(o.ListenAddress, DefaultListenAddress)
	o.ListenPort = cmp.Or(o.ListenPort, DefaultListenPort)
	if o.MessageTimeout <= 0 {
		o.MessageTimeout = DefaultMessageTimeout
	}
	o.MaxRequestBytes = cmp.Or(o.MaxRequestBytes, DefaultMaxRequestBytes)
	o.MaxResponseBytes = cmp.Or(o.MaxResponseBytes, DefaultMaxResponseBytes)
	o.ServerName = cmp.Or(o.ServerName, DefaultServerName)
	o.ServerVersion = cmp.Or(o.ServerVersion, DefaultServerVersion)
	o.UpstreamCAFile = cmp.Or(o.UpstreamCAFile, DefaultUpstreamCAFile)
	return o
}

// Validate reports what Translate would reject in o itself (limits, node
// selectors, overrides) without any routes, so a configuration can be
// checked at start-up.
func (o Options) Validate() error { return o.withDefaults().check() }

// check rejects options Envoy cannot take.
func (o Options) check() error {
	if o.MaxResponseBytes > math.MaxUint32 {
		return fmt.Errorf("options: MaxResponseBytes %d does not fit Envoy's 32-bit per_connection_buffer_limit_bytes", o.MaxResponseBytes)
	}
	if o.MessageTimeout > time.Hour {
		return fmt.Errorf("options: MessageTimeout %s is over Envoy's 1h ceiling", o.MessageTimeout)
	}
	if o.ListenPort > math.MaxUint16 {
		return fmt.Errorf("options: ListenPort %d is not a TCP port", o.ListenPort)
	}
	if err := o.EnvoyTracing.check(); err != nil {
		return err
	}
	if err := o.ControlTLS.check(); err != nil {
		return err
	}
	if err := o.DownstreamTLS.check(); err != nil {
		return err
	}
	if err := o.Notifications.check(); err != nil {
		return err
	}
	if err := checkNodes(o.Nodes); err != nil {
		return prefixEach("options: ", unjoin(err))
	}
	if err := o.Overrides.Validate(); err != nil {
		return prefixEach("overrides: ", unjoin(err))
	}
	return nil
}

// unjoin returns the errors joined in err (errors.Join), or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
