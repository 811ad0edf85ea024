package xds

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/toolmesh/toolmesh/registry"
)

// Server serves the translated resources to Envoy over ADS (state of the
// world and delta) from a go-control-plane SnapshotCache in ADS mode. Each
// node group of Options.Nodes has its own snapshot and version (a content
// hash), so a sidecar gets only its routes and is pushed only when they
// change; a node that connects at any time is answered at once with its
// group's current snapshot.
type Server struct {
	log     *slog.Logger
	opts    Options // as given to NewServer, but for Overrides
	cache   cachev3.SnapshotCache
	xds     serverv3.Server
	groups  *nodeGroups
	metrics *metrics
	nodes   *nodeTracker

	mu         sync.Mutex       // serializes builds; guards the fields below
	routes     []registry.Route // routes of the last successful build
	haveRoutes bool             // routes is set
	overrides  *Overrides       // overrides in force
	// onOverrides is told every overrides put in force (OnOverrides).
	onOverrides func(*Overrides)
	lastInput   [sha256.Size]byte // hash of the input last built
	versions    map[string]string // group key → version pushed
	validated   map[digest]bool   // digests of the resources served, all validated
	unknown     string            // overridden services not in the Portal, last logged
	tracer      trace.Tracer      // nil: pushes are not traced (SetTracerProvider)

	current   atomic.Pointer[Resources]
	lastBuild atomic.Pointer[buildInput] // for Clusters
	state     atomic.Pointer[serverState]
	ovState   atomic.Pointer[OverridesStatus]
}

// serverState is what lock-free readers see of the last push.
type serverState struct {
	version  string            // of AllRoutesGroup
	versions map[string]string // group key → version
}

// GroupStatus is one node group and the version set for it.
type GroupStatus struct {
	// Key is the group's snapshot key (AllRoutesGroup or "group/<hash>").
	Key string `json:"key"`
	// Routes are the group's route keys, sorted; empty for every route.
	Routes []string `json:"routes,omitempty"`
	// Version is the version of the group's snapshot, "" before the first
	// push.
	Version string `json:"version,omitempty"`
}

// OverridesStatus describes the override file in force, for /health.
type OverridesStatus struct {
	// Path is the file WatchOverrides watches ("" when not watching).
	Path string `json:"path,omitempty"`
	// Version is the content hash of the overrides in force ("" for none).
	Version string `json:"version,omitempty"`
	// Services is how many Tool Services have an override entry.
	Services int `json:"services"`
	// LastError is why the newest file content was rejected; "" once a good
	// file is applied. The overrides in force are then the last good ones.
	LastError string `json:"lastError,omitempty"`
}

// NewServer returns a server with an empty cache: nodes that connect before
// the first Update wait for it. ctx bounds the xDS streams; log may be nil
// (no logging); reg, when not nil, receives the toolmesh_xds_* metrics.
// opts.Overrides are the initial overrides (SetOverrides replaces them);
// opts.Nodes are fixed for the server's life.
func NewServer(ctx context.Context, log *slog.Logger, opts Options, reg prometheus.Registerer) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		log:       log,
		opts:      opts,
		metrics:   newMetrics(reg, log),
		overrides: opts.Overrides,
		versions:  map[string]string{},
	}
	s.opts.Overrides = nil // s.overrides is what is in force
	s.groups = &nodeGroups{opts: s.opts}
	s.nodes = newNodeTracker(s.groups.ID, s.metrics.connectedNodes)
	s.state.Store(&serverState{versions: map[string]string{}})
	s.ovState.Store(&OverridesStatus{Version: opts.Overrides.Version(), Services: overriddenServices(opts.Overrides)})
	cpLog := controlPlaneLogger(log)
	s.cache = cachev3.NewSnapshotCache(true, s.groups, cpLog)
	s.xds = serverv3.NewServer(ctx, s.cache, s.callbacks(), sotw.WithOrderedADS(), sotw.WithLogger(cpLog))
	return s
}

// Register adds the aggregated discovery service (SotW and delta) and the
// per-type LDS, RDS, CDS and EDS services to gs.
func (s *Server) Register(gs *grpc.Server) {
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, s.xds)
	listenerservice.RegisterListenerDiscoveryServiceServer(gs, s.xds)
	routeservice.RegisterRouteDiscoveryServiceServer(gs, s.xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(gs, s.xds)
	endpointservice.RegisterEndpointDiscoveryServiceServer(gs, s.xds)
}

// Update translates routes with the overrides in force and, for every node
// group whose resources differ from its last push, validates them
// (ValidateDeep), checks each snapshot is consistent and sets it. It
// reports whether any group was pushed. Groups whose content hash did not
// change are not pushed again; routes and overrides identical to the last
// build are not even translated. An error leaves every last pushed
// snapshot in place. Update keeps routes (callers must not modify them
// afterwards) so SetOverrides can re-translate them.
func (s *Server) Update(ctx context.Context, routes []registry.Route) (pushed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	defer func() { s.metrics.buildSeconds.Observe(time.Since(start).Seconds()) }()
	pushed, err = s.build(ctx, routes, s.overrides)
	if err == nil {
		s.routes, s.haveRoutes = routes, true
	}
	return pushed, err
}

// SetOverrides replaces the overrides in force (nil: none) and re-translates
// the last routes with them. When o is invalid, or the routes cannot be
// translated with it, SetOverrides returns the error and the previous
// overrides stay in force. Before the first Update it only validates and
// keeps o.
func (s *Server) SetOverrides(ctx context.Context, o *Overrides) (pushed bool, err error) {
	if err := o.Validate(); err != nil {
		return false, prefixEach("overrides: ", unjoin(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.haveRoutes {
		start := time.Now()
		defer func() { s.metrics.buildSeconds.Observe(time.Since(start).Seconds()) }()
		if pushed, err = s.build(ctx, s.routes, o); err != nil {
			return false, err
		}
	}
	s.overrides = o
	if s.onOverrides != nil {
		s.onOverrides(o)
	}
	st := *s.ovState.Load()
	st.Version, st.Services, st.LastError = o.Version(), overriddenServices(o), ""
	s.ovState.Store(&st)
	s.log.InfoContext(ctx, "xds overrides in force", "overrides", o.Version(),
		"services", st.Services, "pushed", pushed)
	return pushed, nil
}

// build translates and pushes; s.mu is held.
func (s *Server) build(ctx context.Context, routes []registry.Route, ov *Overrides) (bool, error) {
	input := inputHash(routes, ov)
	if s.current.Load() != nil && input != ([sha256.Size]byte{}) && input == s.lastInput {
		// Translate is pure: the same input gives the same resources (the
		// usual case on a periodic refresh).
		return false, nil
	}
	opts := s.opts
	opts.Overrides = ov
	groups, err := TranslateGroups(routes, opts)
	if err != nil {
		s.metrics.buildErrors.Inc()
		return false, fmt.Errorf("translate: %w", err)
	}
	type change struct {
		group   Group
		version string
		snap    *cachev3.Snapshot
	}
	var changes []change
	digests := map[types.Resource]digest{}
	for _, g := range groups {
		if v := g.Resources.version(digests); v != s.versions[g.Key] {
			changes = append(changes, change{group: g, version: v})
		}
	}
	validated := map[digest]bool{}
	if len(changes) > 0 {
		for i, c := range changes {
			if err := s.validate(c.group.Resources, digests, validated); err != nil {
				s.metrics.buildErrors.Inc()
				return false, fmt.Errorf("validate %s version %s: %w", c.group.Key, c.version, err)
			}
			snap, err := cachev3.NewSnapshot(c.version, c.group.Resources.ByType())
			if err == nil {
				err = snap.Consistent()
			}
			if err != nil {
				s.metrics.buildErrors.Inc()
				return false, fmt.Errorf("snapshot %s version %s: %w", c.group.Key, c.version, err)
			}
			changes[i].snap = snap
		}
	}
	for _, c := range changes {
		pctx, span := s.startPush(ctx, c.group, c.version)
		err := s.cache.SetSnapshot(pctx, c.group.Key, c.snap)
		endPush(span, err)
		if err != nil {
			s.metrics.buildErrors.Inc()
			return false, fmt.Errorf("set snapshot %s version %s: %w", c.group.Key, c.version, err)
		}
		s.versions[c.group.Key] = c.version
		s.metrics.pushes.WithLabelValues(c.group.Key).Inc()
		s.log.InfoContext(ctx, "xds snapshot pushed", "group", c.group.Key, "version", c.version,
			"clusters", len(c.group.Resources.Clusters), "endpoints", len(c.group.Resources.Endpoints))
	}
	// Remember what is served and was validated, now or before, so the
	// next build validates only what changed.
	served := make(map[digest]bool, len(digests))
	for _, d := range digests {
		if validated[d] || s.validated[d] {
			served[d] = true
		}
	}
	s.validated = served
	s.lastInput = input
	s.current.Store(groups[0].Resources)
	s.lastBuild.Store(&buildInput{routes: routes, overrides: ov})
	s.state.Store(&serverState{version: s.versions[AllRoutesGroup], versions: maps.Clone(s.versions)})
	s.logUnknownOverrides(ctx, routes, ov)
	return len(changes) > 0, nil
}

// logUnknownOverrides warns, once per distinct list, about overridden Tool
// Services the Portal does not list: most likely a typo in the file.
func (s *Server) logUnknownOverrides(ctx context.Context, routes []registry.Route, ov *Overrides) {
	known := map[string]bool{}
	for _, r := range routes {
		for _, ts := range r.ToolServices {
			known[ts.Name] = true
		}
	}
	unknown := strings.Join(ov.unknownServices(known), ",")
	if unknown != "" && unknown != s.unknown {
		s.log.WarnContext(ctx, "xds overrides name tool services the Portal does not list", "services", unknown)
	}
	s.unknown = unknown
}

// Groups returns every node group with the version set for it, the
// all-routes group first.
func (s *Server) Groups() []GroupStatus {
	st := s.state.Load()
	gs := s.opts.groups()
	out := make([]GroupStatus, len(gs))
	for i, g := range gs {
		out[i] = GroupStatus{Key: g.Key, Routes: g.Routes, Version: st.versions[g.Key]}
	}
	return out
}

// NodeStatus returns every Envoy node that has connected (disconnected
// ones are kept, up to a bound, with Connected false), sorted by node id.
func (s *Server) NodeStatus() []NodeStatus {
	st := s.state.Load()
	return s.nodes.status(func(group string) string { return st.versions[group] })
}

// OnOverrides calls fn with the overrides in force now (nil: none) and
// again whenever SetOverrides (or the file watch) puts others in force, so
// a component that enforces part of them — the extproc server's
// per-Tool-Service body limits — follows the same file.
func (s *Server) OnOverrides(fn func(*Overrides)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onOverrides = fn
	fn(s.overrides)
}

// OverridesStatus returns the state of the overrides in force.
func (s *Server) OverridesStatus() OverridesStatus { return *s.ovState.Load() }

func overriddenServices(o *Overrides) int {
	if o == nil {
		return 0
	}
	return len(o.Services)
}

// inputHash hashes a build's input: the routes and the overrides; the zero
// hash (never matched) when the routes cannot be encoded.
func inputHash(routes []registry.Route, ov *Overrides) [sha256.Size]byte {
	b, err := json.Marshal(routes)
	if err != nil {
		return [sha256.Size]byte{}
	}
	ok := ov.key()
	return sha256.Sum256(append(append(b, 0), ok[:]...))
}

// validate runs ValidateDeep on every resource of res whose content was not
// validated before (ValidateDeep is a function of content), recording
// each in validated.
func (s *Server) validate(res *Resources, digests map[types.Resource]digest, validated map[digest]bool) error {
	for _, r := range res.all() {
		d := digests[r]
		if validated[d] || s.validated[d] {
			validated[d] = true
			continue
		}
		if err := ValidateDeep(r); err != nil {
			return fmt.Errorf("%s %q: %w", r.ProtoReflect().Descriptor().Name(), cachev3.GetResourceName(r), err)
		}
		validated[d] = true
	}
	return nil
}
