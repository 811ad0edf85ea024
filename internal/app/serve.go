package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/toolmesh/toolmesh/demo"
	"github.com/toolmesh/toolmesh/envoy/dataplane"
	"github.com/toolmesh/toolmesh/extproc"
	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/notify"
	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/internal/heapfloor"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/fetch"
	"github.com/toolmesh/toolmesh/registry/memstore"
	"github.com/toolmesh/toolmesh/registry/redisstore"
	"github.com/toolmesh/toolmesh/registry/refresher"
	"github.com/toolmesh/toolmesh/xds"
)

// mode is what a serving command runs.
type mode int

const (
	modeRun     mode = iota // everything, plus the local data plane
	modeExtProc             // registry + ext_proc server
	modeXDS                 // registry + xDS server
)

func (m mode) String() string {
	switch m {
	case modeExtProc:
		return "extproc"
	case modeXDS:
		return "xds"
	}
	return "run"
}

// Shutdown budget: draining requests in flight, then stopping gRPC streams
// gracefully. Envoy retries on the next ext_proc or ADS connection, so a
// stream cut after the deadline costs one retry, not a wrong answer.
const (
	drainTimeout      = 5 * time.Second
	gracefulGRPCStop  = 5 * time.Second
	readHeaderTimeout = 10 * time.Second
)

// app is one running toolmesh process.
type app struct {
	// approvalLedger remembers used approvals across reloads: the Redis
	// store when configured (shared by the replicas), else in-process.
	approvalLedger approval.Ledger
	mode           mode
	tracer         trace.TracerProvider // nil: tracing off
	cfg            Config
	log            *slog.Logger
	reg            *refresher.Registry
	lister         registry.MCPLister // lists federated MCP servers; holds their header values for calls
	components     []component
	stopping       atomic.Bool
	everReady      atomic.Bool           // health has said SERVING at least once
	drainWait      func(d time.Duration) // the drain delay's sleep; nil is time.Sleep
	adminToken     string                // "": the admin endpoints need no token
	// reloadConfig reads the configuration again on SIGHUP; nil: no reload.
	reloadConfig func() (Config, error)
	// upstreamAuth is the upstreamAuth in force, for the registry's
	// listings (the extproc server holds its own copy); swapped on SIGHUP.
	upstreamAuth atomic.Pointer[upstreamcred.Auth]

	extProcStream grpc.StreamServerInterceptor // tests only (hooks)
	xdsGate       func() bool                  // tests only (hooks)
	idleOverride  time.Duration                // tests only (hooks)

	// Set by the parts the mode runs.
	extprocHealth *health.Server
	xdsHealth     *health.Server
	xdsServer     *xds.Server
	extprocServer *extproc.Server
	filters       *filters.Set         // the filter chains of the ext_proc server
	auth          *authn.Authenticator // the ext_proc server's authentication
	notify        *notify.Server       // change-notification streams; nil when not served
	// rateLimitMetrics are the limiters' series, shared across reloads.
	rateLimitMetrics *ratelimit.Metrics
	notifyHTTP       *http.Server

	// What shutdown stops, in this order.
	admin         *http.Server
	dataPlane     *http.Server
	stopDataPlane func()
	stopGRPC      []func(context.Context)
	shutdownOnce  sync.Once

	// extprocRef is extprocServer for other servers' handlers, which run
	// before it is set (the notifications server starts first).
	extprocRef atomic.Pointer[extproc.Server]
}

// listeners are the sockets of one process, bound before anything serves so
// a taken port fails the start at once.
type listeners struct {
	admin, extproc, xds, dataPlane, notify net.Listener
}

func (l *listeners) close() {
	for _, ln := range []net.Listener{l.admin, l.extproc, l.xds, l.dataPlane, l.notify} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// serve runs the components of m until ctx is done, then shuts them down
// gracefully. It returns nil after a clean shutdown.
func serve(ctx context.Context, m mode, cfg Config, log *slog.Logger, h hooks) error {
	log = log.With(slog.String("mode", m.String()))
	// SIGHUP first, before anything slow: its default action ends the
	// process, and the start-up (Portal listing, manifests, Redis) can take
	// long. A SIGHUP before the registry's first cycle ends waits here and
	// reloads the filters once the loops run.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// Components run on a context that the signal does not cancel: shutdown
	// stops them in order, so requests in flight can finish.
	base := context.WithoutCancel(ctx)

	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()

	// A small live heap would be collected every hundred or so requests
	// (ADR 0014). xds is not on the request path and runs in less memory.
	if m != modeXDS {
		defer heapfloor.Hold(uint64(cfg.GCHeapFloorBytes))()
	}

	metrics := newMetricsRegistry()
	a, err := newApp(base, m, cfg, log, h, metrics, &cleanups)
	if err != nil {
		return err
	}

	ls, err := a.listen(ctx, h)
	if err != nil {
		return err
	}
	cleanups = append(cleanups, ls.close)
	// From here on every exit goes through shutdown, exactly once.
	defer a.shutdown()

	errc := make(chan error, 5) // one per server: the first failure ends the process

	if err := a.startServers(base, ls, metrics, errc, &cleanups); err != nil {
		return err
	}

	// Registry first cycle: Portal listing, warm start, manifests.
	sub, unsubscribe := a.reg.Subscribe()
	defer unsubscribe()
	if err := a.reg.Start(ctx); err != nil {
		log.Info("stopped during start-up")
		return nil
	}
	defer a.runLoops(base, sub, hup)()

	log.Info("toolmesh started", slog.String("version", version))
	select {
	case <-ctx.Done():
		log.Info("shutting down", slog.Any("cause", context.Cause(ctx)))
		return nil
	case err := <-errc:
		log.Error("server failed, shutting down", slog.Any("error", err))
		return err
	}
}

// startServers starts the servers of a.mode on ls: the filter chains, the
// notifications, ext_proc and xDS servers, the local data plane, and the
// admin server last, since its handlers read the component list the others
// build. The first server failure goes to errc.
func (a *app) startServers(base context.Context, ls *listeners, metrics *prometheus.Registry, errc chan error, cleanups *[]func()) error {
	var err error
	if a.mode != modeXDS {
		fcfg := filters.DefaultConfig()
		if a.cfg.Filters != nil {
			fcfg = *a.cfg.Filters
		}
		a.filters, err = filters.Build(base, fcfg, a.log.With(slog.String("component", "filters")), metrics)
		if err != nil {
			return fmt.Errorf("filters: %w", err)
		}
		*cleanups = append(*cleanups, func() {
			ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
			defer cancel()
			if err := a.filters.Close(ctx); err != nil {
				a.log.Warn("close filters", slog.Any("error", err))
			}
		})
	}

	if ls.notify != nil {
		if err := a.startNotify(ls.notify, metrics, errc); err != nil {
			return err
		}
	}
	if ls.extproc != nil {
		if err := a.startExtProc(ls.extproc, metrics, errc); err != nil {
			return err
		}
	}
	if ls.xds != nil {
		if err := a.startXDS(base, ls, metrics, errc); err != nil {
			return err
		}
	}
	if err := a.followBodyLimits(); err != nil {
		return err
	}
	// The data plane serves at once; it is not ready until ADS programs it,
	// which happens after the registry's first cycle.
	if ls.dataPlane != nil {
		if err := a.startDataPlane(base, ls, errc); err != nil {
			return err
		}
	}

	// Admin last: its handlers read the component list built above. It
	// answers /healthz (and 503 on /readyz) during the registry's start.
	a.admin = &http.Server{Handler: a.adminHandler(metrics), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: a.idle(adminIdleTimeout),
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	go serveHTTP(a.admin, ls.admin, "admin", errc)
	return nil
}

// newApp builds the process's parts that every mode has: the Portal source,
// the clients, the snapshot store, tracing and the registry. What it starts
// that needs stopping goes on cleanups.
func newApp(base context.Context, m mode, cfg Config, log *slog.Logger, h hooks, metrics *prometheus.Registry, cleanups *[]func()) (*app, error) {
	src, err := portalSource(base, cfg, m, log, metrics, cleanups)
	if err != nil {
		return nil, err
	}
	client := newHTTPClient()
	*cleanups = append(*cleanups, client.CloseIdleConnections)
	a := &app{mode: m, cfg: cfg, log: log, drainWait: h.drainWait, reloadConfig: h.reloadConfig, extProcStream: h.extProcStream, xdsGate: h.xdsGate, idleOverride: h.idleTimeout}
	if a.adminToken, err = readAdminToken(cfg.AdminToken); err != nil {
		return nil, err
	}
	if a.tracer, err = startTracing(base, cfg, m, log, cleanups); err != nil {
		return nil, err
	}
	store, err := snapshotStore(cfg, log, metrics)
	if err != nil {
		return nil, err
	}
	if c, ok := store.(interface{ Close() error }); ok {
		*cleanups = append(*cleanups, func() { _ = c.Close() })
	}
	a.approvalLedger = approval.NewMemoryLedger(nil)
	if l, ok := store.(approval.Ledger); ok {
		a.approvalLedger = l
	}
	a.lister = fetch.NewMCPLister(client, 0, cfg.Credentials)
	// The token clients of upstreamAuth's oauth entries are built with it
	// and shared by calls (the Runtime, built from this one) and listings;
	// a SIGHUP builds them again.
	ua, err := upstreamcred.Build(cfg.UpstreamAuth, cfg.Credentials, nil)
	if err != nil {
		return nil, err
	}
	a.upstreamAuth.Store(ua)
	if l, ok := a.lister.(*fetch.HTTPLister); ok {
		l.SetListingBounds(cfg.ListingBounds.Over(registry.DefaultLimits()))
		// The gateway's own listings send a federated server's upstreamAuth
		// credential too, as its calls do; an oauth entry's 401 evicts the
		// token or discovers the authorization server, and lists again.
		l.SetListingHeaders(func(service string) (map[string]string, error) {
			return upstreamcred.ListingCredentials(*a.upstreamAuth.Load(), service)
		})
		l.SetListingUnauthorized(func(ctx context.Context, service, url string, challenges []string) bool {
			return upstreamcred.ListingUnauthorized(ctx, *a.upstreamAuth.Load(), service, url, challenges)
		})
	}
	if a.reg, err = newRegistry(&cfg, registryParts{
		source:  src,
		fetcher: fetch.NewHTTPFetcher(client, 0),
		lister:  a.lister,
		store:   store,
		pins:    pinStore(cfg, store),
		client:  client,
		log:     log.With(slog.String("component", "registry")),
		tracer:  a.tracer,
		metrics: metrics,
	}); err != nil {
		return nil, err
	}
	a.components = append(a.components, component{"registry", func() (bool, string) {
		if a.reg.Ready() {
			return true, "ready"
		}
		return false, "no route snapshot yet"
	}})
	return a, nil
}

// runLoops starts the loops of a started process: registry refreshes,
// following its changes (xds.Runner: xDS pushes through the debouncer and
// the gRPC health states), notifications, the xDS override watch, and
// SIGHUP reloads. The function it returns stops them and waits.
func (a *app) runLoops(base context.Context, sub <-chan struct{}, hup <-chan os.Signal) func() {
	var wg sync.WaitGroup
	loopCtx, stopLoops := context.WithCancel(base)
	wg.Go(func() { a.reg.Run(loopCtx) })
	runner := xds.NewRunner(xds.RunnerOptions{Server: a.xdsServer, Routes: a.reg.Routes, Ready: a.reg.Ready,
		Health: a.setHealth, Gate: a.xdsGate, Log: a.log})
	wg.Go(func() { runner.Run(loopCtx, sub) })
	if a.notify != nil {
		wg.Go(func() { a.notify.Run(loopCtx) })
	}
	if a.xdsServer != nil && a.cfg.Overrides != "" {
		wg.Go(func() { a.xdsServer.WatchOverrides(loopCtx, a.cfg.Overrides, 0) })
	}
	wg.Go(func() { a.reloadOnHangup(loopCtx, hup) })
	return func() { stopLoops(); wg.Wait() }
}

// listen binds the listeners m needs and reports them to h.
func (a *app) listen(ctx context.Context, h hooks) (_ *listeners, err error) {
	ls := &listeners{}
	defer func() {
		if err != nil {
			ls.close()
		}
	}()
	if a.mode == modeRun && a.cfg.ControlTLS != nil && a.cfg.EnvoyControlTLS == nil {
		return nil, errRunControlTLS
	}
	var lc net.ListenConfig
	bind := func(name, addr string) (net.Listener, error) {
		if err := a.checkPerimeter(name, addr); err != nil {
			return nil, err
		}
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, listenError(name, addr, err)
		}
		a.log.Info("listening", slog.String("server", name), slog.String("addr", ln.Addr().String()))
		if h.listening != nil {
			h.listening(name, ln.Addr().String())
		}
		return ln, nil
	}
	if ls.admin, err = bind("admin", a.cfg.AdminListen); err != nil {
		return nil, err
	}
	if a.mode != modeXDS {
		if ls.extproc, err = bind("extproc", a.cfg.ExtProcListen); err != nil {
			return nil, err
		}
		if a.cfg.NotificationsListen != "" {
			if ls.notify, err = bind("notifications", a.cfg.NotificationsListen); err != nil {
				return nil, err
			}
		}
	}
	if a.mode != modeExtProc {
		if ls.xds, err = bind("xds", a.cfg.XDSListen); err != nil {
			return nil, err
		}
	}
	if a.mode == modeRun {
		if ls.dataPlane, err = bind("dataplane", a.cfg.Listen); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// startDataPlane starts the local data plane: it watches our own ADS server
// for its configuration, as Envoy does, and calls our ext_proc server.
func (a *app) startDataPlane(base context.Context, ls *listeners, errc chan<- error) error {
	log := a.log.With(slog.String("component", "dataplane"))
	ctlTLS, err := a.dataPlaneTLS()
	if err != nil {
		return err
	}
	dp, err := dataplane.New(dataplane.Options{
		ExtProcTarget: ls.extproc.Addr().String(),
		Logger:        log,
		ControlTLS:    ctlTLS,
	})
	if err != nil {
		return fmt.Errorf("local data plane: %w", err)
	}
	a.components = append(a.components, component{"dataPlane", func() (bool, string) {
		if dp.Ready() {
			return true, "ready"
		}
		return false, "waiting for xDS resources"
	}})
	ctx, cancel := context.WithCancel(base)
	var wg sync.WaitGroup
	node := &corev3.Node{Id: a.cfg.NodeID, Cluster: "toolmesh"}
	wg.Go(func() {
		if err := dp.WatchADS(ctx, ls.xds.Addr().String(), node); err != nil && ctx.Err() == nil {
			log.Error("ADS watch ended", slog.Any("error", err))
		}
	})
	a.dataPlane = &http.Server{Handler: dp, ReadHeaderTimeout: readHeaderTimeout, ConnState: dp.ConnState, // the listener's idle_timeout
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	ln := ls.dataPlane
	if a.cfg.DownstreamTLS != nil {
		// The listener xDS programs is mTLS-only: its socket is served with
		// the TLS context the listener carries.
		ln = tls.NewListener(ln, dp.TLSConfig())
	}
	go serveHTTP(a.dataPlane, ln, "dataplane", errc)
	a.stopDataPlane = func() {
		cancel()
		wg.Wait()
		if err := dp.Close(); err != nil {
			log.Warn("close local data plane", slog.Any("error", err))
		}
	}
	return nil
}

// startNotify serves the change-notification streams (ADR 0012).
func (a *app) startNotify(ln net.Listener, metrics prometheus.Registerer, errc chan<- error) error {
	log := a.log.With(slog.String("component", "notifications"))
	srv, err := notify.New(a.reg, notify.Options{
		KeepAlive:           a.cfg.NotificationsKeepAlive.D(),
		MaxStreams:          a.cfg.NotificationsMaxStreams,
		MaxStreamsPerClient: a.cfg.NotificationsMaxStreamsPerClient,
		Logger:              log,
		Registerer:          metrics,
		Upstreams:           a.followUpstreams(),
	})
	if err != nil {
		return fmt.Errorf("notifications server: %w", err)
	}
	a.notify = srv
	// No write timeout: a stream lives until the client, Envoy or Drain ends it.
	a.notifyHTTP = &http.Server{Handler: srv, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: a.idle(notificationsIdleTimeout),
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	tc, err := a.controlTLS("notifications")
	if err != nil {
		return err
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	go serveHTTP(a.notifyHTTP, ln, "notifications", errc)
	return nil
}

// followUpstreams lets legacy GET streams follow their clients' upstream
// sessions (ADR 0025) with the lister's MCP client and the session keys of
// the extproc server's current runtime (nil before it started).
func (a *app) followUpstreams() *notify.Upstreams {
	l, ok := a.lister.(*fetch.HTTPLister)
	if !ok {
		return nil
	}
	return &notify.Upstreams{
		Client: l.Client(),
		Keys: func() *session.Keys {
			if s := a.extprocRef.Load(); s != nil {
				return s.Runtime().SessionKeys
			}
			return nil
		},
		Relist: func(ctx context.Context, route string) error { return a.reg.RefreshRoutes(ctx, route) },
	}
}

// notificationsEndpoint is where Envoy reaches the notifications servers:
// the configured addresses, else in run this process's own (nil: none).
func (a *app) notificationsEndpoint(ls *listeners) *xds.Notifications {
	addrs := a.cfg.NotificationsAddresses
	if len(addrs) == 0 && ls.notify != nil && a.mode == modeRun {
		addrs = []string{ls.notify.Addr().String()}
	}
	if len(addrs) == 0 {
		return nil
	}
	return &xds.Notifications{Addresses: addrs,
		MaxStreams: uint32(min(a.cfg.NotificationsMaxStreams*len(addrs), math.MaxUint32))}
}

// setHealth sets the gRPC health states: the ext_proc side serves when
// ready, ADS when ready and the last xDS update succeeded.
func (a *app) setHealth(ready, synced bool) {
	ready = ready && !a.stopping.Load()
	if ready {
		a.everReady.Store(true)
	}
	setServing(a.extprocHealth, gRPCServiceExtProc, ready)
	setServing(a.xdsHealth, gRPCServiceADS, ready && synced)
}

// reloadOnHangup reloads, on SIGHUP, the filters' WebAssembly modules (they
// also reload by themselves when their files change) and the configuration
// blocks of reloadBlocks.
func (a *app) reloadOnHangup(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		a.log.Info("SIGHUP: reloading filters")
		if a.filters != nil {
			if err := a.filters.Reload(ctx); err != nil {
				a.log.Error("filter reload failed; the loaded modules stay in force", slog.Any("error", err))
			}
		}
		a.reloadBlocks()
	}
}

// reloadBlocks reads the configuration (file and flags) once and builds the
// extproc Runtime from it (runtime.go): all its blocks reload together, or,
// when one does not build, none does.
func (a *app) reloadBlocks() {
	if a.reloadConfig == nil {
		return
	}
	cfg, err := a.reloadConfig()
	if err != nil {
		a.log.Error("SIGHUP: the configuration does not load; every reloadable block keeps its last good configuration",
			slog.Any("error", err))
		return
	}
	a.reloadRuntime(cfg)
	a.reloadSurface(cfg) // the registry's, not the runtime's (surface.go)
}

// shutdown stops serving in order: readiness and gRPC health off; the drain
// delay, while everything still serves, so Envoy's health checks and load
// balancers see NOT_SERVING and stop sending; the data plane drained, then
// its ADS watch and ext_proc connections closed; the gRPC servers stopped
// (gracefully, with a deadline); the admin server last, so probes see
// "stopping" until the end. Every step is bounded.
func (a *app) shutdown() {
	a.shutdownOnce.Do(func() {
		a.stopping.Store(true)
		for _, hs := range []*health.Server{a.extprocHealth, a.xdsHealth} {
			if hs != nil {
				hs.Shutdown() // NOT_SERVING, so health-checking clients move away
			}
		}
		// A process that never said SERVING has no traffic to move away.
		if d := a.cfg.DrainDelay.D(); d > 0 && a.everReady.Load() {
			a.log.Info("not serving; waiting before draining", slog.Duration("drainDelay", d))
			if a.drainWait != nil {
				a.drainWait(d)
			} else {
				time.Sleep(d)
			}
		}
		// Change-notification streams first: they never end by themselves,
		// and an open one would hold the data plane's drain to its deadline.
		if a.notify != nil {
			ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
			if err := a.notify.Drain(ctx); err != nil {
				a.log.Warn("notification streams not drained", slog.Any("error", err))
			}
			cancel()
			drain(a.notifyHTTP, "notifications", a.log)
		}
		if a.dataPlane != nil {
			drain(a.dataPlane, "dataplane", a.log)
			a.stopDataPlane()
		}
		var wg sync.WaitGroup
		for _, stop := range a.stopGRPC {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), gracefulGRPCStop)
				defer cancel()
				stop(ctx)
			})
		}
		wg.Wait()
		if a.admin != nil {
			drain(a.admin, "admin", a.log)
		}
		a.log.Info("toolmesh stopped")
	})
}

// drain stops srv accepting and waits for requests in flight, closing what
// is left after drainTimeout.
func drain(srv *http.Server, name string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("drain incomplete, closing connections", slog.String("server", name), slog.Any("error", err))
		_ = srv.Close()
	}
}

// snapshotStore is Redis when configured, else the in-memory store.
func snapshotStore(cfg Config, log *slog.Logger, metrics prometheus.Registerer) (registry.Store, error) {
	if cfg.Redis == "" {
		return memstore.New(), nil
	}
	// go-redis logs failed dials through a process-wide logger; keep them in
	// our structured log instead of bare lines on stderr.
	redis.SetLogger(redisLog{log.With(slog.String("component", "redis"))})
	store, err := redisstore.NewRedisStore(redisstore.RedisOptions{
		URL:        cfg.Redis,
		Prefix:     cfg.RedisPrefix,
		OpTimeout:  cfg.RedisTimeout.D(),
		Logger:     log.With(slog.String("component", "redis")),
		Registerer: metrics,
	})
	if err != nil {
		return nil, fmt.Errorf("redis store: %w", err)
	}
	return store, nil
}

// redisLog adapts slog to go-redis's logger.
type redisLog struct{ log *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}

// portalSource picks the Portal: a URL, a file, or the demo, which it starts.
// A Portal file must be valid at start-up (see checkPortalFile); a Portal
// URL is not asked yet: the registry retries one that is down.
func portalSource(ctx context.Context, cfg Config, m mode, log *slog.Logger, metrics prometheus.Registerer, cleanups *[]func()) (registry.Source, error) {
	dec := registry.ListingDecoder{
		Strict:         cfg.PortalStrict,
		OnUnknownField: registry.NewUnknownFieldReporter(log.With(slog.String("component", "registry")), metrics),
	}
	switch {
	case strings.HasPrefix(cfg.Portal, "http://"), strings.HasPrefix(cfg.Portal, "https://"):
		src := fetch.NewHTTPSource(cfg.Portal, newHTTPClient())
		src.Decoder = dec
		return src, nil
	case cfg.Portal != "":
		src := fetch.NewFileSource(cfg.Portal)
		src.Decoder = dec
		return checkPortalFile(ctx, src, cfg)
	case m != modeRun:
		return nil, fmt.Errorf("%s needs a Portal", m)
	}
	svcs, err := demo.Start(ctx, log.With(slog.String("component", "demo")))
	if err != nil {
		return nil, fmt.Errorf("demo tool services: %w", err)
	}
	*cleanups = append(*cleanups, func() { _ = svcs.Close() })
	log.Info("serving the demo Portal", slog.String("clock", svcs.Clock),
		slog.String("calc", svcs.Calc), slog.String("text", svcs.Text))
	return memorySource(demo.Portal(svcs)), nil
}

// checkPortalFile reads the Portal file once before anything serves. An
// invalid file (bad syntax, a typo'd field under portalStrict, a bad value,
// no routes) ends the start with every problem at its file:line:column,
// instead of a gateway that serves no route and is never ready. Once
// started, an invalid file keeps the last good routes (registry.Refresh).
// The listing read here is the one the registry's first cycle uses.
func checkPortalFile(ctx context.Context, src *fetch.FileSource, cfg Config) (registry.Source, error) {
	l, err := src.List(ctx)
	if err != nil {
		var le *registry.ListingError
		if errors.As(err, &le) {
			err = le // its problems name the file; drop the "list routes" context
		}
		return nil, fmt.Errorf("invalid Portal file %s (portal):\n%w", cfg.Portal, err)
	}
	if len(l.Routes) == 0 && !cfg.AllowEmptyListing {
		return nil, fmt.Errorf("the Portal file %s (portal) lists no routes; add one, or set allowEmptyListing to start without any", cfg.Portal)
	}
	p := &primedSource{Source: src}
	p.first.Store(l)
	return p, nil
}

// primedSource answers its first List with a listing already read.
type primedSource struct {
	registry.Source
	first atomic.Pointer[registry.Listing]
}

// List implements [registry.Source.List].
func (s *primedSource) List(ctx context.Context) (*registry.Listing, error) {
	if l := s.first.Swap(nil); l != nil {
		return l, nil
	}
	return s.Source.List(ctx)
}

// memorySource is a Portal document held in memory (the rendered demo Portal).
type memorySource []byte

// List implements [registry.Source.List].
func (s memorySource) List(context.Context) (*registry.Listing, error) {
	return registry.DecodeListing(s)
}

// newHTTPClient is the client for the Portal and the manifests. It has its
// own transport (never http.DefaultTransport) with bounded dials; whole
// requests are bounded by the registry's fetch timeout.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
	}}
}

func serveHTTP(srv *http.Server, ln net.Listener, name string, errc chan<- error) {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		errc <- fmt.Errorf("%s server: %w", name, err)
	}
}
