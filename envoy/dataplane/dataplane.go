package dataplane

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/extprocfilter"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// Options configures a [DataPlane].
type Options struct {
	// ExtProcTarget is the gRPC target of the extproc server, for example
	// "127.0.0.1:9002". Every ext_proc filter in the configuration talks to
	// it, whatever cluster its grpc_service names.
	ExtProcTarget string
	// ExtProcConn is an existing connection to the extproc server; it takes
	// precedence over ExtProcTarget and is not closed by Close.
	ExtProcConn grpc.ClientConnInterface
	// Logger receives debug logs of requests and xDS updates; nil discards.
	Logger *slog.Logger
	// Keepalive is the HTTP/2 keepalive of the ADS and ext_proc connections
	// (zero: the bootstraps' 30s interval, 5s timeout, 15% jitter).
	Keepalive Keepalive
	// Transport, if set, carries every upstream request instead of the
	// per-cluster connection pools. Cluster TLS, HTTP/2 and connect_timeout
	// settings are then the Transport's business.
	Transport http.RoundTripper
	// ControlTLS, if set, is the client TLS of the ADS and ext_proc
	// connections (toolmesh's controlTLS listeners; the clusters' transport
	// sockets of a real Envoy's bootstrap); nil: plaintext.
	ControlTLS *tls.Config
}

// DataPlane is the local stand-in for Envoy: its ServeHTTP is the listener's
// HTTP connection manager. It is not a production proxy; see the package
// documentation.
type DataPlane struct {
	log       *slog.Logger
	conn      grpc.ClientConnInterface
	client    extprocfilter.Client // on conn, made once
	pool      *extProcPool         // the connections the data plane dialled itself
	transport http.RoundTripper
	keepalive Keepalive
	ctlTLS    *tls.Config

	cfg  atomic.Pointer[xdsconfig.Config]
	idle sync.Map // net.Conn → *time.Timer of an idle downstream connection (idle.go)

	mu         sync.Mutex // serializes Apply and Close; never taken by requests
	runtimes   map[string]*xdsconfig.ClusterRuntime
	limits     map[string]xdsconfig.ClusterLimits
	transports map[string]*http.Transport // by xdsconfig.TransportKey
	closed     bool
}

// New returns a data plane with no configuration; it answers 503 until
// Apply (or WatchADS) gives it a listener.
func New(opts Options) (*DataPlane, error) {
	d := &DataPlane{
		log:        cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		conn:       opts.ExtProcConn,
		transport:  opts.Transport,
		keepalive:  keepaliveDefaults(opts.Keepalive),
		ctlTLS:     opts.ControlTLS,
		runtimes:   map[string]*xdsconfig.ClusterRuntime{},
		limits:     map[string]xdsconfig.ClusterLimits{},
		transports: map[string]*http.Transport{},
	}
	if d.conn == nil && opts.ExtProcTarget != "" {
		// grpc-go's client with the windows of Envoy's HTTP/2 codec, which
		// are static (a window option turns grpc-go's BDP estimation off),
		// and Envoy's keepalive (rules.go, "ext_proc gRPC client
		// connection"). It never retries a stream: Envoy retries an
		// ext_proc stream only under a retry policy, which toolmesh's
		// grpc_service does not set (api/envoy/config/core/v3/
		// grpc_service.proto, GrpcService.retry_policy: "If not specified,
		// no default retry policy is applied at the client level").
		target, log := opts.ExtProcTarget, d.log.With("grpc", "ext_proc")
		d.pool = &extProcPool{max: rules.MaxConcurrentStreams, dial: func() (*grpc.ClientConn, error) {
			cc, err := grpc.NewClient(target,
				grpc.WithTransportCredentials(controlCreds(opts.ControlTLS)),
				grpc.WithInitialWindowSize(rules.EnvoyHTTP2StreamWindow),
				grpc.WithInitialConnWindowSize(rules.EnvoyHTTP2ConnWindow),
				grpc.WithDisableRetry(),
				keepaliveDialOption(d.keepalive, log))
			if err != nil {
				return nil, fmt.Errorf("connect to extproc %q: %w", target, err)
			}
			return cc, nil
		}}
		// The first connection is made now, so that a bad target fails New.
		pc, err := d.pool.acquire()
		if err != nil {
			return nil, err
		}
		d.pool.release(pc)
		d.conn = pc.cc // the first connection (keepalive tests use it)
		d.client = extprocfilter.Client{Processor: d.pool, Own: true}
	}
	if d.conn != nil && d.pool == nil {
		d.client = extprocfilter.Client{Processor: extprocfilter.Unpooled{ExternalProcessorClient: extprocv3.NewExternalProcessorClient(d.conn)}}
	}
	return d, nil
}

// Apply validates a complete set of listeners, route configurations,
// clusters and cluster load assignments (keyed by the go-control-plane
// resource type URLs) and, if it is valid and every construct in it is
// emulated, makes it the configuration for new requests. On error the
// previous configuration stays in force.
func (d *DataPlane) Apply(res map[resourcev3.Type][]types.Resource) error {
	cfg, err := xdsconfig.Compile(res)
	if err != nil {
		return fmt.Errorf("apply configuration: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("apply configuration: data plane closed")
	}
	keep := map[string]bool{}
	for name, cl := range cfg.Clusters {
		rt, ok := d.runtimes[name]
		if !ok || d.limits[name] != cl.Limits {
			rt = xdsconfig.NewClusterRuntime(cl.Limits)
			d.runtimes[name], d.limits[name] = rt, cl.Limits
		}
		cl.RT = rt
		if d.transport != nil {
			cl.Transport = d.transport
			continue
		}
		key := xdsconfig.TransportKey(cl)
		tr, ok := d.transports[key]
		if !ok {
			tr = xdsconfig.NewTransport(cl)
			d.transports[key] = tr
		}
		cl.Transport = tr
		keep[key] = true
	}
	for key, tr := range d.transports {
		if !keep[key] { // no configuration uses the pool any more
			tr.CloseIdleConnections()
			delete(d.transports, key)
		}
	}
	for name := range d.runtimes {
		if _, ok := cfg.Clusters[name]; !ok {
			delete(d.runtimes, name)
			delete(d.limits, name)
		}
	}
	if cfg.HCM != nil {
		for _, f := range cfg.HCM.Filters {
			for _, note := range f.Ignored {
				d.log.Warn("ext_proc setting not emulated by the local data plane", "filter", f.Name, "setting", note)
			}
		}
	}
	d.cfg.Store(cfg)
	d.log.Debug("data plane configuration applied", "listener", cfg.Listener, "clusters", len(cfg.Clusters))
	return nil
}

// Ready reports whether the data plane has a listener with a route
// configuration.
func (d *DataPlane) Ready() bool {
	cfg := d.cfg.Load()
	return cfg != nil && cfg.HCM != nil && cfg.Routes != nil
}

// Close releases the upstream connection pools and the extproc connection
// it opened.
func (d *DataPlane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	for _, tr := range d.transports {
		tr.CloseIdleConnections()
	}
	if d.pool != nil {
		return d.pool.close()
	}
	return nil
}

// ServeHTTP implements [http.Handler]: it is the listener's HTTP connection
// manager, running early header mutations, the ext_proc filters and the
// router for one request, the way Envoy does.
func (d *DataPlane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cfg := d.cfg.Load()
	if cfg == nil || cfg.HCM == nil {
		// Envoy would not be listening yet.
		http.Error(w, "no listener configured", http.StatusServiceUnavailable)
		return
	}
	if cfg.DownstreamTLS != nil && r.TLS == nil {
		// A TLS listener never reads plaintext HTTP: the connection fails
		// (rules.go, "Downstream TLS").
		panic(http.ErrAbortHandler)
	}
	x := &activeStream{
		d: d, cfg: cfg, log: d.log, w: w, r: r, ctx: r.Context(), start: time.Now(),
	}
	x.serve()
}

// controlCreds are the transport credentials of a connection to toolmesh:
// TLS with c, else plaintext.
func controlCreds(c *tls.Config) credentials.TransportCredentials {
	if c == nil {
		return insecure.NewCredentials()
	}
	return sanVerifiedCreds{credentials.NewTLS(c)}
}

// sanVerifiedCreds are TLS credentials whose connections accept any
// per-call authority. The data plane calls with the cluster name as
// :authority, as Envoy does (toolmesh_extproc); Envoy checks the server's
// identity once, in the handshake, against the SANs of its
// UpstreamTlsContext (c's VerifyConnection here), never against a call's
// :authority, which grpc-go would otherwise check against the host names
// of the certificate.
type sanVerifiedCreds struct {
	credentials.TransportCredentials
}

func (c sanVerifiedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, ai, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	if ti, ok := ai.(credentials.TLSInfo); ok {
		return conn, sanVerified{ti}, nil
	}
	return conn, ai, nil
}

func (c sanVerifiedCreds) Clone() credentials.TransportCredentials {
	return sanVerifiedCreds{c.TransportCredentials.Clone()}
}

type sanVerified struct{ credentials.TLSInfo }

// ValidateAuthority accepts every authority: the SANs were checked in the
// handshake.
func (sanVerified) ValidateAuthority(string) error { return nil }
