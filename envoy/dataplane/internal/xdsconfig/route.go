package xdsconfig

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// routeTable is a compiled RouteConfiguration.
type routeTable struct {
	name     string
	exact    map[string]*virtualHost
	suffix   []wildcardHost // "*.example.com", longest first
	prefix   []wildcardHost // "example.*", longest first
	fallback *virtualHost   // "*"
	HeaderOps
}

// HeaderOps are the request and response headers_to_add and
// headers_to_remove of a route, virtual host or route configuration.
type HeaderOps struct {
	ReqAdd, RespAdd []HeaderAdd
	ReqDel, RespDel []string
}

// compileHeaderOps compiles the header operations of s.
func compileHeaderOps(s interface {
	GetRequestHeadersToAdd() []*corev3.HeaderValueOption
	GetResponseHeadersToAdd() []*corev3.HeaderValueOption
	GetRequestHeadersToRemove() []string
	GetResponseHeadersToRemove() []string
}) (HeaderOps, error) {
	o := HeaderOps{ReqDel: lowerAll(s.GetRequestHeadersToRemove()), RespDel: lowerAll(s.GetResponseHeadersToRemove())}
	var err error
	if o.ReqAdd, err = compileHeadersToAdd(s.GetRequestHeadersToAdd()); err != nil {
		return o, err
	}
	o.RespAdd, err = compileHeadersToAdd(s.GetResponseHeadersToAdd())
	return o, err
}

type wildcardHost struct {
	pattern string // without the '*'
	vh      *virtualHost
}

type virtualHost struct {
	name        string
	routes      []*Route
	bufferLimit *uint64 // request_body_buffer_limit
	retry       *RetryPolicy
	HeaderOps
}

type routeKind int

const (
	kindCluster routeKind = iota
	kindClusterHeader
	KindDirect
)

type Route struct {
	Name     string
	VH       *virtualHost
	Table    *routeTable
	match    routeMatch
	Kind     routeKind
	target   string // cluster name or cluster header
	NotFound int    // cluster_not_found_response_code
	Direct   struct {
		Status int
		Body   string
	}
	Timeout       time.Duration  // 0: disabled
	IdleTimeout   *time.Duration // idle_timeout, when set (0: disabled)
	HostRewrite   string
	prefixRewrite string
	regexRewrite  *regexp.Regexp
	regexSubst    string
	Retry         *RetryPolicy
	bufferLimit   *uint64
	HeaderOps
}

type routeMatch struct {
	exact         bool // path; else prefix
	s             string
	caseSensitive bool
	headers       []*headerMatcher
}

func CompileRouteTable(rc *routev3.RouteConfiguration, filterNames map[string]bool) (*routeTable, error) {
	t := &routeTable{name: rc.GetName(), exact: map[string]*virtualHost{}}
	var err error
	if t.HeaderOps, err = compileHeaderOps(rc); err != nil {
		return nil, err
	}
	for _, v := range rc.GetVirtualHosts() {
		vh, err := compileVirtualHost(t, v, filterNames)
		if err != nil {
			return nil, fmt.Errorf("virtual host %q: %w", v.GetName(), err)
		}
		for _, d := range v.GetDomains() {
			d = strings.ToLower(d)
			var dup bool
			switch {
			case d == "*":
				dup = t.fallback != nil
				t.fallback = vh
			case strings.HasPrefix(d, "*"):
				t.suffix = append(t.suffix, wildcardHost{d[1:], vh})
			case strings.HasSuffix(d, "*"):
				t.prefix = append(t.prefix, wildcardHost{d[:len(d)-1], vh})
			default:
				_, dup = t.exact[d]
				t.exact[d] = vh
			}
			if dup {
				return nil, fmt.Errorf("only unique values for domains are permitted: %q", d)
			}
		}
	}
	// Longest wildcard wins (RouteMatcher::findWildcardVirtualHost).
	sort.SliceStable(t.suffix, func(i, j int) bool { return len(t.suffix[i].pattern) > len(t.suffix[j].pattern) })
	sort.SliceStable(t.prefix, func(i, j int) bool { return len(t.prefix[i].pattern) > len(t.prefix[j].pattern) })
	return t, nil
}

func lowerAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.ToLower(s)
	}
	return out
}

func compileVirtualHost(t *routeTable, v *routev3.VirtualHost, filterNames map[string]bool) (*virtualHost, error) {
	if v.GetMatcher() != nil || v.GetPerRequestBufferLimitBytes() != nil {
		return nil, errors.New("the matcher tree and per_request_buffer_limit_bytes are not emulated")
	}
	vh := &virtualHost{name: v.GetName(), bufferLimit: optUint64(v.GetRequestBodyBufferLimit())}
	var err error
	if err = rejectPerFilter(v.GetTypedPerFilterConfig(), filterNames); err != nil {
		return nil, err
	}
	if v.GetRetryPolicy() != nil {
		if vh.retry, err = compileRetryPolicy(v.GetRetryPolicy()); err != nil {
			return nil, err
		}
	}
	if vh.HeaderOps, err = compileHeaderOps(v); err != nil {
		return nil, err
	}
	for i, r := range v.GetRoutes() {
		rt, err := compileRoute(t, vh, r, filterNames)
		if err != nil {
			return nil, fmt.Errorf("route %d (%q): %w", i, r.GetName(), err)
		}
		vh.routes = append(vh.routes, rt)
	}
	return vh, nil
}

func compileRoute(t *routeTable, vh *virtualHost, r *routev3.Route, filterNames map[string]bool) (*Route, error) {
	rt := &Route{Name: r.GetName(), VH: vh, Table: t, Timeout: rules.DefaultRouteTimeout, NotFound: 503}
	var err error
	if rt.match, err = compileRouteMatch(r.GetMatch()); err != nil {
		return nil, err
	}
	if err = rejectPerFilter(r.GetTypedPerFilterConfig(), filterNames); err != nil {
		return nil, err
	}
	if rt.HeaderOps, err = compileHeaderOps(r); err != nil {
		return nil, err
	}
	switch a := r.GetAction().(type) {
	case *routev3.Route_DirectResponse:
		rt.Kind = KindDirect
		rt.Direct.Status = int(a.DirectResponse.GetStatus())
		if rt.Direct.Body, err = dataSource(a.DirectResponse.GetBody()); err != nil { // unset: ""
			return nil, err
		}
	case *routev3.Route_Route:
		if err := compileRouteAction(rt, a.Route); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("route action %T is not emulated", a)
	}
	if r.GetPerRequestBufferLimitBytes() != nil {
		return nil, errors.New("per_request_buffer_limit_bytes is not emulated")
	}
	rt.bufferLimit = optUint64(r.GetRequestBodyBufferLimit())
	return rt, nil
}

func optUint64(w *wrapperspb.UInt64Value) *uint64 {
	if w == nil {
		return nil
	}
	return new(w.GetValue())
}

func compileRouteAction(rt *Route, a *routev3.RouteAction) error {
	switch c := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		rt.Kind, rt.target = kindCluster, c.Cluster
	case *routev3.RouteAction_ClusterHeader:
		rt.Kind, rt.target = kindClusterHeader, strings.ToLower(c.ClusterHeader)
	default:
		return fmt.Errorf("cluster specifier %T is not emulated", c)
	}
	switch a.GetClusterNotFoundResponseCode() {
	case routev3.RouteAction_NOT_FOUND:
		rt.NotFound = 404
	case routev3.RouteAction_INTERNAL_SERVER_ERROR:
		rt.NotFound = 500
	}
	if a.GetTimeout() != nil {
		rt.Timeout = a.GetTimeout().AsDuration()
	}
	if a.GetIdleTimeout() != nil {
		rt.IdleTimeout = new(a.GetIdleTimeout().AsDuration())
	}
	switch h := a.GetHostRewriteSpecifier().(type) {
	case nil:
	case *routev3.RouteAction_HostRewriteLiteral:
		rt.HostRewrite = h.HostRewriteLiteral
	default:
		return fmt.Errorf("host rewrite %T is not emulated", h)
	}
	rt.prefixRewrite = a.GetPrefixRewrite()
	if rr := a.GetRegexRewrite(); rr != nil {
		re, err := regexp.Compile(rr.GetPattern().GetRegex())
		if err != nil {
			return fmt.Errorf("regex_rewrite: %w", err)
		}
		rt.regexRewrite = re
		// RE2 substitutions use \1; Go's Expand uses ${1}.
		rt.regexSubst = regexp.MustCompile(`\\(\d)`).ReplaceAllString(rr.GetSubstitution(), "$${$1}")
	}
	if a.GetPathRewritePolicy() != nil || a.GetPathRewrite() != "" {
		return errors.New("path_rewrite is not emulated")
	}
	rt.Retry = rt.VH.retry
	if a.GetRetryPolicy() != nil {
		var err error
		rt.Retry, err = compileRetryPolicy(a.GetRetryPolicy())
		return err
	}
	return nil
}

// selectVirtualHost is RouteMatcher::findVirtualHost: exact domain, then
// the longest suffix wildcard, then the longest prefix wildcard, then "*".
// Host matching is case-insensitive; the port is part of the host.
func (t *routeTable) selectVirtualHost(host string) *virtualHost {
	host = strings.ToLower(host)
	if vh, ok := t.exact[host]; ok {
		return vh
	}
	for _, w := range t.suffix {
		if len(host) > len(w.pattern) && strings.HasSuffix(host, w.pattern) {
			return w.vh
		}
	}
	for _, w := range t.prefix {
		if len(host) > len(w.pattern) && strings.HasPrefix(host, w.pattern) {
			return w.vh
		}
	}
	return t.fallback
}

// Match returns the first route of the virtual host that matches (routes
// are tried in order; RouteMatcher::route).
func (t *routeTable) Match(h *headers.Map) *Route {
	vh := t.selectVirtualHost(h.Value(":authority"))
	if vh == nil {
		return nil
	}
	for _, r := range vh.routes {
		if r.match.matches(h) {
			return r
		}
	}
	return nil
}

func (m *routeMatch) matches(h *headers.Map) bool {
	p := headers.PathOnly(h.Value(":path"))
	if !m.caseSensitive {
		p = strings.ToLower(p)
	}
	if m.exact && p != m.s || !m.exact && !strings.HasPrefix(p, m.s) {
		return false
	}
	return matchHeaders(m.headers, h)
}

// PickCluster returns the cluster name the route sends to. For
// cluster_header only the first value counts; a missing header gives "".
func (r *Route) PickCluster(h *headers.Map) string {
	switch r.Kind {
	case kindCluster:
		return r.target
	case kindClusterHeader:
		v, _ := h.Get(r.target)
		return v
	}
	return ""
}

// DecoderLimit is the decoder buffer limit of a request whose first route
// Match was r (nil: no route): request_body_buffer_limit on the route, else
// on the virtual host, else the listener's per_connection_buffer_limit_bytes.
func (r *Route) DecoderLimit(listener uint64) uint64 {
	if r == nil {
		return listener
	}
	return *cmp.Or(r.bufferLimit, r.VH.bufferLimit, &listener)
}

// RewritePath applies prefix_rewrite or regex_rewrite to :path.
func (r *Route) RewritePath(h *headers.Map) {
	full := h.Value(":path")
	p, rest := headers.PathOnly(full), full[len(headers.PathOnly(full)):]
	switch {
	case r.prefixRewrite != "" && !r.match.exact:
		if len(p) >= len(r.match.s) {
			h.Set(":path", r.prefixRewrite+p[len(r.match.s):]+rest)
		}
	case r.prefixRewrite != "":
		h.Set(":path", r.prefixRewrite+rest)
	case r.regexRewrite != nil:
		h.Set(":path", r.regexRewrite.ReplaceAllString(p, r.regexSubst)+rest)
	}
}

// compileRouteMatch compiles a route's match: the prefix or path, the case
// and headers, what toolmesh's routes use; the other match kinds (regex and
// path_separated_prefix paths, query parameters, ...) are not emulated.
func compileRouteMatch(m *routev3.RouteMatch) (routeMatch, error) {
	rm := routeMatch{caseSensitive: m.GetCaseSensitive() == nil || m.GetCaseSensitive().GetValue()}
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		rm.s = p.Prefix
	case *routev3.RouteMatch_Path:
		rm.exact, rm.s = true, p.Path
	default:
		return rm, fmt.Errorf("path specifier %T is not emulated", p)
	}
	if !rm.caseSensitive {
		rm.s = strings.ToLower(rm.s)
	}
	if m.GetRuntimeFraction() != nil || m.GetGrpc() != nil || len(m.GetDynamicMetadata()) > 0 ||
		len(m.GetCookies()) > 0 || len(m.GetFilterState()) > 0 || len(m.GetQueryParameters()) > 0 {
		return rm, errors.New("runtime_fraction, grpc, dynamic_metadata, cookies, filter_state and query_parameters matches are not emulated")
	}
	for _, h := range m.GetHeaders() {
		hm, err := compileHeaderMatcher(h)
		if err != nil {
			return rm, err
		}
		rm.headers = append(rm.headers, hm)
	}
	return rm, nil
}
