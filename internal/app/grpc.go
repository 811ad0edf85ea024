package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/toolmesh/toolmesh/extproc"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/xds"
)

// gRPC service names reported by the health service.
const (
	gRPCServiceExtProc = "envoy.service.ext_proc.v3.ExternalProcessor"
	gRPCServiceADS     = "envoy.service.discovery.v3.AggregatedDiscoveryService"
)

// startExtProc serves the ext_proc gRPC service and its gRPC health service.
func (a *app) startExtProc(ln net.Listener, metrics prometheus.Registerer, errc chan<- error) error {
	// The lister holds the header values federated MCP servers were listed
	// with; calls to them send the same.
	var upstreams extproc.Upstreams
	if u, ok := a.lister.(extproc.Upstreams); ok {
		upstreams = u
	}
	rt, err := a.startRuntime(metrics)
	if err != nil {
		return err
	}
	srv, err := extproc.New(extproc.Config{
		MCP: mcp.Config{
			ServerName:     a.cfg.ServerName,
			ServerVersion:  version,
			AllowedOrigins: a.cfg.AllowedOrigins,
			AllowedHosts:   a.cfg.AllowedHosts,
			MaxBodyBytes:   a.cfg.MaxBodyBytes,
			ListTTL:        a.listTTL(),
			// listChanged is declared only where streams are served.
			ListChanged: a.notify != nil,
		},
		MaxResponseBytes:           a.cfg.MaxResponseBytes,
		UpstreamCallTimeout:        upstreamCallTimeout(a.cfg.MessageTimeout.D()),
		FederatedStreamTimeout:     a.cfg.FederatedStreamTimeout.D(),
		FederatedStreamDeadlineOff: a.cfg.FederatedStreamDeadline == "off",
		TracerProvider:             a.tracer,
		ToolLabels:                 a.cfg.ToolLabelsPerRoute,
		Upstreams:                  upstreams,
		Runtime:                    rt,
	}, a.reg, a.log.With(slog.String("component", "extproc")), metrics)
	if err != nil {
		return fmt.Errorf("extproc server: %w", err)
	}
	a.extprocServer = srv
	a.extprocRef.Store(srv) // for the notifications server's handlers
	creds, err := a.controlGRPCOptions("extproc")
	if err != nil {
		return err
	}
	opts := append(append(srv.GRPCServerOptions(), keepaliveOptions(a.cfg)...), creds...)
	if a.extProcStream != nil {
		opts = append(opts, grpc.ChainStreamInterceptor(a.extProcStream))
	}
	gs := grpc.NewServer(opts...)
	srv.Register(gs)
	a.extprocHealth = newHealth(gs, gRPCServiceExtProc)
	a.components = append(a.components, component{"extproc", func() (bool, string) {
		return servingState(a.extprocHealth, gRPCServiceExtProc)
	}})
	go serveGRPC(gs, ln, "extproc", errc)
	a.stopGRPC = append(a.stopGRPC, func(ctx context.Context) { stopGRPC(ctx, gs) })
	return nil
}

// followBodyLimits gives the extproc server the per-Tool-Service body limits
// (maxRequestBytes) of the override file: those in force in the xDS server,
// following every reload, or — in extproc mode, without an xDS server — the
// file as it is at start.
func (a *app) followBodyLimits() error {
	if a.extprocServer == nil {
		return nil
	}
	set := func(o *xds.Overrides) {
		def, services := o.BodyLimits()
		l := extproc.BodyLimits{Default: int64(def), Services: make(map[string]int64, len(services))}
		for name, v := range services {
			l.Services[name] = int64(v)
		}
		// A change of the overrides file replaces the body limits alone.
		err := a.extprocServer.UpdateRuntime(func(cur *extproc.Runtime) (*extproc.Runtime, error) {
			next := *cur
			next.BodyLimits = l
			return &next, nil
		})
		if err != nil {
			a.log.Error("overrides: body limits not applied; the limits in force stay", slog.Any("error", err))
		}
	}
	switch {
	case a.xdsServer != nil:
		a.xdsServer.OnOverrides(set)
	case a.cfg.Overrides != "":
		o, err := xds.LoadOverrides(a.cfg.Overrides)
		if err != nil {
			return fmt.Errorf("overrides: %w", err)
		}
		set(o)
	}
	return nil
}

// listTTL is the ttlMs hint: configured, or the refresh interval.
func (a *app) listTTL() time.Duration {
	if a.cfg.ListTTL > 0 {
		return a.cfg.ListTTL.D()
	}
	return a.cfg.RefreshInterval.D()
}

// startXDS serves ADS and its gRPC health service.
func (a *app) startXDS(base context.Context, ls *listeners, metrics prometheus.Registerer, errc chan<- error) error {
	envoyAddr := a.cfg.EnvoyListen
	if ls.dataPlane != nil {
		// The local data plane is this node's Envoy: program its real address.
		envoyAddr = ls.dataPlane.Addr().String()
	}
	host, portStr, err := net.SplitHostPort(envoyAddr)
	if err != nil {
		return fmt.Errorf("envoy listen address %q: %w", envoyAddr, err)
	}
	// Cancelling ctx ends the ADS streams, so the graceful stop can finish.
	ctx, cancel := context.WithCancel(base)
	port, _ := strconv.ParseUint(portStr, 10, 32)
	var overrides *xds.Overrides
	if a.cfg.Overrides != "" {
		if overrides, err = xds.LoadOverrides(a.cfg.Overrides); err != nil {
			cancel()
			return fmt.Errorf("overrides: %w", err)
		}
	}
	a.xdsServer = xds.NewServer(ctx, a.log.With(slog.String("component", "xds")), xdsOptions(&a.cfg, xdsParts{
		overrides:     overrides,
		host:          host,
		port:          uint32(port),
		envoyTracing:  a.envoyTracing(),
		notifications: a.notificationsEndpoint(ls),
	}), metrics)
	a.xdsServer.SetTracerProvider(a.tracer)
	creds, err := a.controlGRPCOptions("xds")
	if err != nil {
		cancel()
		return err
	}
	gs := grpc.NewServer(append(keepaliveOptions(a.cfg), creds...)...)
	a.xdsServer.Register(gs)
	a.xdsHealth = newHealth(gs, gRPCServiceADS)
	a.components = append(a.components, component{"xds", func() (bool, string) {
		return servingState(a.xdsHealth, gRPCServiceADS)
	}})
	go serveGRPC(gs, ls.xds, "xds", errc)
	a.stopGRPC = append(a.stopGRPC, func(ctx context.Context) { cancel(); stopGRPC(ctx, gs) })
	return nil
}

// keepaliveOptions are the keepalive settings of both gRPC servers.
//
// Envoy pings every connection_keepalive interval (30s in our bootstraps),
// also when no stream is open. grpc-go's default enforcement (MinTime 5m,
// PermitWithoutStream false) answers that with GOAWAY too_many_pings. The
// rule, google.golang.org/grpc internal/transport/http2_server.go
// handlePing (v1.85.0): a ping arriving less than MinTime after the previous
// one (or, with no stream open and PermitWithoutStream false, less than 2h
// after it) is a strike; the strike count is cleared by the next ping after
// the server has sent headers or data; once the count exceeds
// maxPingStrikes (2), that is on the third strike, the server sends GOAWAY
// ENHANCE_YOUR_CALM "too_many_pings" and closes the connection. So MinTime must be below the
// ping interval, and PermitWithoutStream true, since idle ext_proc and ADS
// connections get pings too.
func keepaliveOptions(cfg Config) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             cfg.GRPCKeepaliveMinTime.D(),
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    cfg.GRPCKeepaliveTime.D(),
			Timeout: cfg.GRPCKeepaliveTimeout.D(),
		}),
	}
}

// newHealth registers a gRPC health service on gs, NOT_SERVING until sync
// says otherwise.
func newHealth(gs *grpc.Server, service string) *health.Server {
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	setServing(hs, service, false)
	return hs
}

// setServing sets the overall and the service's health status.
func setServing(hs *health.Server, service string, serving bool) {
	if hs == nil {
		return
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	hs.SetServingStatus("", st)
	hs.SetServingStatus(service, st)
}

// servingState reads a health status back for the admin endpoints.
func servingState(hs *health.Server, service string) (bool, string) {
	resp, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return false, err.Error()
	}
	st := resp.GetStatus()
	return st == healthpb.HealthCheckResponse_SERVING, strings.ToLower(st.String())
}

func serveGRPC(gs *grpc.Server, ln net.Listener, name string, errc chan<- error) {
	if err := gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		errc <- fmt.Errorf("%s server: %w", name, err)
	}
}

// stopGRPC stops gs gracefully, cutting the streams still open at ctx's end.
func stopGRPC(ctx context.Context, gs *grpc.Server) {
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		gs.Stop()
		<-done
	}
}

// upstreamCallTimeout bounds what the extproc server sends a federated
// server itself while Envoy waits for its reply (opening a legacy session,
// re-issuing a call whose session expired): a second below messageTimeout,
// so the gateway's own error reaches the client before Envoy's message
// timer fires, and an operator who raises messageTimeout for slow servers
// raises this with it. The default messageTimeout of 5 s gives
// extproc.DefaultUpstreamCallTimeout.
func upstreamCallTimeout(messageTimeout time.Duration) time.Duration {
	if messageTimeout <= 2*time.Second {
		return messageTimeout / 2
	}
	return messageTimeout - time.Second
}
