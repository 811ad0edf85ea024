// Package xds programs Envoy from the Portal (ADR 0001). Translate is a pure
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

	"github.com/toolmesh/toolmesh/internal/wire"
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
func (r *Resources) Version() string { return r.version(nil) }

// digest is the hash of one resource's content.
type digest [sha256.Size]byte

// version computes Version from per-resource digests, taking them from and
// adding them to memo when it is not nil (the groups of one build share
// most resources, by pointer).
func (r *Resources) version(memo map[types.Resource]digest) string {
	h := sha256.New()
	var buf []byte
	for _, group := range [][]types.Resource{r.Listeners, r.Routes, r.Clusters, r.Endpoints} {
		for _, res := range group {
			d, ok := memo[res]
			if !ok {
				d, buf = digestOf(res, buf)
				if memo != nil {
					memo[res] = d
				}
			}
			h.Write(d[:])
		}
		h.Write([]byte{'|'})
	}
	return hex.EncodeToString(h.Sum(nil)[:10])
}

// digestOf hashes the deterministic encoding of res, reusing buf.
func digestOf(res types.Resource, buf []byte) (digest, []byte) {
	buf, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(buf[:0], res)
	if err != nil {
		// Translate's resources always marshal (it rejects non-UTF-8 input);
		// a hand-built one that does not still gets a digest that is stable
		// within this process.
		buf = append(buf[:0], fmt.Sprint(res)...)
	}
	return sha256.Sum256(buf), buf
}

// upstream is one Tool Service as the translator needs it: parsed URL and
// effective cluster settings (every layer merged, every default filled in).
type upstream struct {
	name      string // Tool Service name
	cluster   string // wire.ClusterName(name)
	scheme    string // http or https
	host      string // DNS name or IP literal, no brackets
	port      uint32
	ip        bool   // host is an IP literal: EDS instead of a DNS cluster
	authority string // host[:port] as the Tool Service expects in Host
	mcp       bool   // a federated MCP server (registry.ProtocolMCP)
	settings  settings
}

// portalRoute is one Portal route as the route configuration needs it.
type portalRoute struct {
	key      string
	path     string
	services []string // Tool Service names
}

// translation is the work shared by every node group: the listener, every
// Tool Service's cluster and the Portal routes, built once.
type translation struct {
	opts          Options
	collector     types.Resource // the OTLP collector of Envoy's tracer, nil with tracing off
	notifications types.Resource // the notifications cluster, nil without Options.Notifications
	listener      types.Resource
	ups           []upstream // sorted by cluster name
	clusters      []types.Resource
	endpoints     []types.Resource // per ups entry; nil for DNS clusters
	index         map[string]int   // Tool Service name → ups index
	routes        []portalRoute    // sorted by path
}

// Translate builds the Envoy resources for every one of the Portal's routes
// (the configuration of a gateway, or of a node no Options.Nodes selector
// picks). It is pure and deterministic: the same routes and options always
// give the same resources in the same order (and so the same Version). A
// Tool Service named by several routes must be defined identically in
// each; it becomes one cluster. Options.Overrides tunes the clusters; an
// invalid override or Portal value is an error naming the route, Tool
// Service and field, and nothing is produced.
func Translate(routes []registry.Route, opts Options) (*Resources, error) {
	t, err := newTranslation(routes, opts)
	if err != nil {
		return nil, err
	}
	return t.resources(nil), nil
}

func newTranslation(routes []registry.Route, opts Options) (*translation, error) {
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	ups, err := collectUpstreams(routes, opts)
	if err != nil {
		return nil, err
	}
	prs, err := portalRoutes(routes)
	if err != nil {
		return nil, err
	}
	lis, err := buildListener(opts)
	if err != nil {
		return nil, fmt.Errorf("build listener: %w", err)
	}
	cc, err := buildCollectorCluster(opts)
	if err != nil {
		return nil, fmt.Errorf("build collector cluster: %w", err)
	}
	var collector types.Resource
	if cc != nil { // never a typed nil in the interface
		collector = cc
	}
	nc, err := buildNotificationsCluster(opts)
	if err != nil {
		return nil, fmt.Errorf("build notifications cluster: %w", err)
	}
	var notifications types.Resource
	if nc != nil {
		notifications = nc
	}
	t := &translation{
		collector:     collector,
		notifications: notifications,
		opts:          opts,
		listener:      lis,
		ups:           ups,
		clusters:      make([]types.Resource, len(ups)),
		endpoints:     make([]types.Resource, len(ups)),
		index:         make(map[string]int, len(ups)),
		routes:        prs,
	}
	for i, u := range ups {
		c, cla, err := buildCluster(u)
		if err != nil {
			return nil, fmt.Errorf("build cluster for tool service %q: %w", u.name, err)
		}
		t.clusters[i] = c
		if cla != nil {
			t.endpoints[i] = cla
		}
		t.index[u.name] = i
	}
	return t, nil
}

// resources assembles the configuration of the routes with these keys
// (sorted); nil means every route.
func (t *translation) resources(keys []string) *Resources {
	prs := t.routes
	used := make([]bool, len(t.ups))
	if keys != nil {
		prs = make([]portalRoute, 0, len(keys))
		for _, r := range t.routes {
			if _, ok := slices.BinarySearch(keys, r.key); ok {
				prs = append(prs, r)
			}
		}
	}
	for _, r := range prs {
		for _, s := range r.services {
			used[t.index[s]] = true
		}
	}
	res := &Resources{
		Listeners: []types.Resource{t.listener},
		Clusters:  make([]types.Resource, 0, len(t.ups)),
	}
	ups := make([]upstream, 0, len(t.ups))
	for i, u := range t.ups {
		if !used[i] {
			continue
		}
		ups = append(ups, u)
		res.Clusters = append(res.Clusters, t.clusters[i])
		if t.endpoints[i] != nil {
			res.Endpoints = append(res.Endpoints, t.endpoints[i])
		}
	}
	if t.collector != nil { // every group's listener traces
		res.Clusters = insertCluster(res.Clusters, t.collector)
	}
	if t.notifications != nil { // every group's routes can stream
		res.Clusters = insertCluster(res.Clusters, t.notifications)
	}
	res.Routes = []types.Resource{buildRouteConfig(ups, prs, t.bodyLimits(prs), t.opts)}
	return res
}

// bodyLimits returns, per Portal route, the request body limit of its
// public path: the largest maxRequestBytes of its Tool Services, since
// Envoy buffers the body before the extproc server picks one of them.
func (t *translation) bodyLimits(prs []portalRoute) []uint64 {
	out := make([]uint64, len(prs))
	for i, r := range prs {
		for _, s := range r.services {
			out[i] = max(out[i], t.ups[t.index[s]].settings.maxRequestBytes)
		}
	}
	return out
}

// collectUpstreams returns the distinct Tool Services of all routes, sorted
// by cluster name, with their effective settings.
func collectUpstreams(routes []registry.Route, opts Options) ([]upstream, error) {
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
			u, err := newUpstream(s, opts)
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

func newUpstream(s registry.ToolService, opts Options) (upstream, error) {
	// Protobuf strings must be UTF-8; anything else would only fail later,
	// when the snapshot is marshaled for Envoy.
	if !utf8.ValidString(s.URL) {
		return upstream{}, errors.New("url: not valid UTF-8")
	}
	if errs := checkPortal(s.Cluster); len(errs) > 0 {
		return upstream{}, prefixEach("cluster.", errs)
	}
	scheme, host, port, _, err := s.Endpoint()
	if err != nil {
		return upstream{}, fmt.Errorf("url: %w", err)
	}
	if !isIP(host) && !validHostname(host) {
		return upstream{}, fmt.Errorf("url: host %q is neither an IP address nor a DNS name", host)
	}
	svc := opts.Overrides.service(s.Name)
	u := upstream{
		name:     s.Name,
		cluster:  wire.ClusterName(s.Name),
		scheme:   scheme,
		host:     host,
		port:     port,
		ip:       isIP(host),
		mcp:      s.Protocol == registry.ProtocolMCP,
		settings: resolveSettings(s.Cluster, opts, opts.Overrides.defaults(), svc),
	}
	origin := func(field string) string { return fieldOrigin(field, s, opts.Overrides) }
	if errs := u.settings.crossCheck(opts, origin); len(errs) > 0 {
		return upstream{}, errors.Join(errs...)
	}
	u.authority = authority(scheme, host, port)
	return u, nil
}

// fieldOrigin names the layer that set a field's effective value.
func fieldOrigin(field string, s registry.ToolService, o *Overrides) string {
	if t := o.service(s.Name); t != nil && setIn(t, field) {
		return "overrides services." + s.Name
	}
	if t := o.defaults(); t != nil && setIn(t, field) {
		return "overrides defaults"
	}
	if s.Cluster != nil && setIn(s.Cluster, field) {
		return "the Portal cluster object"
	}
	return "the built-in default"
}

// setIn reports whether the field with this JSON name is set (non-zero) in
// the struct v points to.
func setIn(v any, jsonName string) bool {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
		if name == jsonName {
			return !rv.Field(i).IsZero()
		}
	}
	return false
}

// prefixEach joins errs, each prefixed.
func prefixEach(prefix string, errs []error) error {
	out := make([]error, len(errs))
	for i, err := range errs {
		out[i] = fmt.Errorf("%s%w", prefix, err)
	}
	return errors.Join(out...)
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

// portalRoutes returns every route's public path and Tool Services, sorted
// by path, and fails on a duplicate path (two routes cannot share an
// endpoint).
func portalRoutes(routes []registry.Route) ([]portalRoute, error) {
	seen := make(map[string]string, len(routes))
	out := make([]portalRoute, 0, len(routes))
	for _, r := range routes {
		p := r.Path()
		if !strings.HasPrefix(p, "/") || !utf8.ValidString(p) {
			return nil, fmt.Errorf("route %q: public path %q must be an absolute UTF-8 path", r.Key, p)
		}
		if other, dup := seen[p]; dup {
			return nil, fmt.Errorf("routes %q and %q share the public path %q", other, r.Key, p)
		}
		seen[p] = r.Key
		pr := portalRoute{key: r.Key, path: p, services: make([]string, 0, len(r.ToolServices))}
		for _, s := range r.ToolServices {
			pr.services = append(pr.services, s.Name)
		}
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b portalRoute) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// validName is the registry's rule for Tool Service names (docs/contracts/portal.md); the
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
