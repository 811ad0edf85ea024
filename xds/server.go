package xds

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/toolmesh/toolmesh/registry"
)

// Server serves the translated resources to Envoy over ADS (state of the
// world and delta) from a go-control-plane SnapshotCache in ADS mode. Every
// node is served the snapshot of its node group; today there is one group
// with all routes, so a node that connects at any time is answered at once
// with the current snapshot.
type Server struct {
	log     *slog.Logger
	opts    Options
	cache   cachev3.SnapshotCache
	xds     serverv3.Server
	groups  *nodeGroups
	metrics *metrics

	mu        sync.Mutex        // serializes Update
	version   string            // version of the last pushed snapshot, under mu
	lastInput [sha256.Size]byte // hash of the routes last pushed, under mu
	current   atomic.Pointer[Resources]
}

// NewServer returns a server with an empty cache: nodes that connect before
// the first Update wait for it. ctx bounds the xDS streams; log may be nil
// (no logging); reg, when not nil, receives the toolmesh_xds_* metrics.
func NewServer(ctx context.Context, log *slog.Logger, opts Options, reg prometheus.Registerer) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		log:     log,
		opts:    opts,
		groups:  &nodeGroups{},
		metrics: newMetrics(reg),
	}
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

// Update translates routes and, when the result differs from the last push,
// validates every resource (ValidateDeep), checks the snapshot is
// consistent and sets it for every node group. It reports whether it pushed.
// Resources with the same content hash as the last push are not pushed
// again (nor validated again); routes identical to the last pushed ones are
// not even translated. An error leaves the last pushed snapshot in place.
func (s *Server) Update(ctx context.Context, routes []registry.Route) (pushed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	defer func() { s.metrics.buildSeconds.Observe(time.Since(start).Seconds()) }()

	// Translate is pure, so the same routes give the same resources: skip
	// the translation altogether when the Portal did not change (the usual
	// case on a periodic refresh).
	inputHash := hashRoutes(routes)
	if s.version != "" && inputHash != ([sha256.Size]byte{}) && inputHash == s.lastInput {
		return false, nil
	}

	res, err := Translate(routes, s.opts)
	if err != nil {
		s.metrics.buildErrors.Inc()
		return false, fmt.Errorf("translate: %w", err)
	}
	version := res.Version()
	if version == s.version {
		s.lastInput = inputHash
		return false, nil
	}
	if err := validateResources(res); err != nil {
		s.metrics.buildErrors.Inc()
		return false, fmt.Errorf("validate version %s: %w", version, err)
	}
	snap, err := cachev3.NewSnapshot(version, res.ByType())
	if err != nil {
		s.metrics.buildErrors.Inc()
		return false, fmt.Errorf("snapshot %s: %w", version, err)
	}
	if err := snap.Consistent(); err != nil {
		s.metrics.buildErrors.Inc()
		return false, fmt.Errorf("snapshot %s: %w", version, err)
	}
	for _, g := range s.groups.all() {
		if err := s.cache.SetSnapshot(ctx, g, snap); err != nil {
			return false, fmt.Errorf("set snapshot %s for %s: %w", version, g, err)
		}
	}
	s.version = version
	s.lastInput = inputHash
	s.current.Store(res)
	s.metrics.pushes.Inc()
	s.log.InfoContext(ctx, "xds snapshot pushed", "version", version,
		"clusters", len(res.Clusters), "endpoints", len(res.Endpoints))
	return true, nil
}

// Current returns the resources of the last pushed snapshot, nil before the
// first push. Callers must not modify them.
func (s *Server) Current() *Resources { return s.current.Load() }

// Version returns the version of the last pushed snapshot, "" before the
// first push.
func (s *Server) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// hashRoutes hashes the Update input; the zero hash (never matched) when it
// cannot be encoded.
func hashRoutes(routes []registry.Route) [sha256.Size]byte {
	b, err := json.Marshal(routes)
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(b)
}

func validateResources(res *Resources) error {
	for _, r := range res.all() {
		if err := ValidateDeep(r); err != nil {
			return fmt.Errorf("%s %q: %w", r.ProtoReflect().Descriptor().Name(), cachev3.GetResourceName(r), err)
		}
	}
	return nil
}

// allNodes is the snapshot key of the one node group that gets every route.
const allNodes = "group/all"

// nodeGroups is the cache's NodeHash: it maps a node to the key of the
// snapshot it is served. Every node maps to allNodes unless its id was
// pinned to a snapshot of its own; pinned keys are prefixed so that no node
// id can collide with a group key. Per-node route subsets will map node
// metadata to further group keys here.
type nodeGroups struct {
	pinned sync.Map // node id → struct{}
}

var _ cachev3.NodeHash = (*nodeGroups)(nil)

// ID implements [cachev3.NodeHash.ID].
func (g *nodeGroups) ID(node *corev3.Node) string {
	if id := node.GetId(); id != "" {
		if _, ok := g.pinned.Load(id); ok {
			return pinnedKey(id)
		}
	}
	return allNodes
}

// all returns the group keys Update sets snapshots for.
func (g *nodeGroups) all() []string { return []string{allNodes} }

func pinnedKey(nodeID string) string { return "node/" + nodeID }
