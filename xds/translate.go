// Package xds programs Envoy from the Portal (SPEC §6). Translate is a pure
// function from the Portal's routes to Envoy resources (one listener, one
// route configuration, one cluster per Tool Service, endpoints for the
// clusters that use EDS); Server serves them over ADS with go-control-plane,
// versioned by content hash so an unchanged Portal pushes nothing.
package xds

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/toolmesh/toolmesh/registry"
)

// Resources is one complete, internally consistent set of Envoy resources.
// Each list is sorted by resource name.
type Resources struct {
	Listeners []types.Resource // *listenerv3.Listener
	Routes    []types.Resource // *routev3.RouteConfiguration
	Clusters  []types.Resource // *clusterv3.Cluster
	Endpoints []types.Resource // *endpointv3.ClusterLoadAssignment
}

// ByType returns the resources keyed by xDS type URL, the shape
// cachev3.NewSnapshot takes.
func (r *Resources) ByType() map[resourcev3.Type][]types.Resource {
	return map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: r.Listeners,
		resourcev3.RouteType:    r.Routes,
		resourcev3.ClusterType:  r.Clusters,
		resourcev3.EndpointType: r.Endpoints,
	}
}

// all returns every resource, in type order then name order.
func (r *Resources) all() []types.Resource {
	out := make([]types.Resource, 0, len(r.Listeners)+len(r.Routes)+len(r.Clusters)+len(r.Endpoints))
	out = append(out, r.Listeners...)
	out = append(out, r.Routes...)
	out = append(out, r.Clusters...)
	return append(out, r.Endpoints...)
}

// Version is a content hash of every resource (deterministic proto
// marshaling, Anys included since they are packed deterministically too), so
// equal inputs give equal versions and the server can skip a push.
func (r *Resources) Version() string {
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	var buf []byte
	for _, group := range [][]types.Resource{r.Listeners, r.Routes, r.Clusters, r.Endpoints} {
		for _, res := range group {
			var err error
			buf, err = opts.MarshalAppend(buf[:0], res)
			if err != nil {
				// Translate's resources always marshal (it rejects non-UTF-8
				// input); a hand-built one that does not still gets a
				// version that is stable within this process.
				buf = append(buf[:0], []byte(fmt.Sprint(res))...)
			}
			fmt.Fprintf(h, "%d:", len(buf))
			h.Write(buf)
		}
		h.Write([]byte{'|'})
	}
	return hex.EncodeToString(h.Sum(nil)[:10])
}

// upstream is one Tool Service as the translator needs it: parsed URL and
// cluster settings with every default filled in.
type upstream struct {
	name      string // Tool Service name
	cluster   string // registry.ClusterName(name)
	scheme    string // http or https
	host      string // DNS name or IP literal, no brackets
	port      uint32
	ip        bool   // host is an IP literal: EDS instead of STRICT_DNS
	authority string // host[:port] as the Tool Service expects in Host
	settings  registry.ClusterSettings
}

// Translate builds the Envoy resources for the Portal's routes. It is pure
// and deterministic: the same routes and options always give the same
// resources in the same order (and so the same Version). A Tool Service
// named by several routes must be defined identically in each; it becomes
// one cluster.
func Translate(routes []registry.Route, opts Options) (*Resources, error) {
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	ups, err := collectUpstreams(routes)
	if err != nil {
		return nil, err
	}
	paths, err := publicPaths(routes)
	if err != nil {
		return nil, err
	}

	lis, err := buildListener(opts)
	if err != nil {
		return nil, fmt.Errorf("build listener: %w", err)
	}
	rc := buildRouteConfig(ups, paths, opts)
	res := &Resources{
		Listeners: []types.Resource{lis},
		Routes:    []types.Resource{rc},
		Clusters:  make([]types.Resource, 0, len(ups)),
	}
	for _, u := range ups {
		c, cla, err := buildCluster(u, opts)
		if err != nil {
			return nil, fmt.Errorf("build cluster for tool service %q: %w", u.name, err)
		}
		res.Clusters = append(res.Clusters, c)
		if cla != nil {
			res.Endpoints = append(res.Endpoints, cla)
		}
	}
	return res, nil
}

// collectUpstreams returns the distinct Tool Services of all routes, sorted
// by cluster name.
func collectUpstreams(routes []registry.Route) ([]upstream, error) {
	byName := map[string]upstream{}
	owner := map[string]string{}
	defs := map[string]registry.ToolService{}
	for _, r := range routes {
		for _, s := range r.ToolServices {
			if !validName(s.Name) {
				return nil, fmt.Errorf("route %q: tool service name %q must match [a-z0-9][a-z0-9-]{0,62}", r.Key, s.Name)
			}
			if first, seen := defs[s.Name]; seen {
				if !sameDefinition(first, s) {
					return nil, fmt.Errorf("tool service %q: routes %q and %q define it differently (one Tool Service is one cluster)",
						s.Name, owner[s.Name], r.Key)
				}
				continue
			}
			u, err := newUpstream(s)
			if err != nil {
				return nil, fmt.Errorf("route %q: tool service %q: %w", r.Key, s.Name, err)
			}
			defs[s.Name], owner[s.Name], byName[s.Name] = s, r.Key, u
		}
	}
	ups := make([]upstream, 0, len(byName))
	for _, u := range byName {
		ups = append(ups, u)
	}
	slices.SortFunc(ups, func(a, b upstream) int { return cmp.Compare(a.cluster, b.cluster) })
	return ups, nil
}

func newUpstream(s registry.ToolService) (upstream, error) {
	// Protobuf strings must be UTF-8; anything else would only fail later,
	// when the snapshot is marshaled for Envoy.
	if !utf8.ValidString(s.URL) {
		return upstream{}, errors.New("url: not valid UTF-8")
	}
	if hc := s.Cluster; hc != nil && hc.HealthCheck != nil && !utf8.ValidString(hc.HealthCheck.Path) {
		return upstream{}, errors.New("cluster.healthCheck.path: not valid UTF-8")
	}
	scheme, host, port, _, err := s.Endpoint()
	if err != nil {
		return upstream{}, fmt.Errorf("url: %w", err)
	}
	if !isIP(host) && !validHostname(host) {
		return upstream{}, fmt.Errorf("url: host %q is neither an IP address nor a DNS name", host)
	}
	var cs registry.ClusterSettings
	if s.Cluster != nil {
		cs = *s.Cluster
	}
	u := upstream{
		name:     s.Name,
		cluster:  registry.ClusterName(s.Name),
		scheme:   scheme,
		host:     host,
		port:     port,
		ip:       isIP(host),
		settings: cs.WithDefaults(),
	}
	u.authority = authority(scheme, host, port)
	return u, nil
}

// sameDefinition reports whether two entries of one Tool Service name make
// the same cluster (the manifest path does not matter to Envoy).
func sameDefinition(a, b registry.ToolService) bool {
	if strings.TrimRight(a.URL, "/") != strings.TrimRight(b.URL, "/") {
		return false
	}
	var ca, cb registry.ClusterSettings
	if a.Cluster != nil {
		ca = *a.Cluster
	}
	if b.Cluster != nil {
		cb = *b.Cluster
	}
	return reflect.DeepEqual(ca.WithDefaults(), cb.WithDefaults())
}

// publicPaths returns every route's public path, sorted, and fails on a
// duplicate (two routes cannot share an endpoint).
func publicPaths(routes []registry.Route) ([]string, error) {
	seen := make(map[string]string, len(routes))
	paths := make([]string, 0, len(routes))
	for _, r := range routes {
		p := r.Path()
		if !strings.HasPrefix(p, "/") || !utf8.ValidString(p) {
			return nil, fmt.Errorf("route %q: public path %q must be an absolute UTF-8 path", r.Key, p)
		}
		if other, dup := seen[p]; dup {
			return nil, fmt.Errorf("routes %q and %q share the public path %q", other, r.Key, p)
		}
		seen[p] = r.Key
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths, nil
}

// validName is the registry's rule for Tool Service names (SPEC §3); the
// name becomes part of an Envoy cluster name and a header value.
func validName(n string) bool {
	if n == "" || len(n) > 63 {
		return false
	}
	for i, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) {
			return false
		}
	}
	return true
}

// validHostname accepts what Envoy can resolve as a DNS name: letters,
// digits, '-', '_' and '.', at most 253 bytes. url.Parse would also pass
// percent-encoded bytes through.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, c := range []byte(h) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// pack wraps m in an Any with deterministic marshaling, so that Version is a
// function of content only (map fields would otherwise marshal in random
// order).
func pack(m proto.Message) (*anypb.Any, error) {
	a := new(anypb.Any)
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, fmt.Errorf("pack %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return a, nil
}
