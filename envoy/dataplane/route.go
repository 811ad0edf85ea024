package dataplane

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// routeTable is a compiled RouteConfiguration.
type routeTable struct {
	name     string
	exact    map[string]*virtualHost
	suffix   []wildcardHost // "*.example.com", longest first
	prefix   []wildcardHost // "example.*", longest first
	fallback *virtualHost   // "*"
	reqAdd   []headerAdd
	reqDel   []string
	respAdd  []headerAdd
	respDel  []string
}

type wildcardHost struct {
	pattern string // without the '*'
	vh      *virtualHost
}

type virtualHost struct {
	name        string
	routes      []*route
	bufferLimit *uint64 // request_body_buffer_limit
	perRequest  *uint64 // deprecated per_request_buffer_limit_bytes
	perFilter   map[string]*perFilterConfig
	retry       *retryPolicy
	reqAdd      []headerAdd
	reqDel      []string
	respAdd     []headerAdd
	respDel     []string
}

type routeKind int

const (
	kindCluster routeKind = iota
	kindClusterHeader
	kindWeighted
	kindDirect
)

type weightedCluster struct {
	name   string
	weight uint32
}

type route struct {
	name   string
	vh     *virtualHost
	table  *routeTable
	match  routeMatch
	kind   routeKind
	target string // cluster name or cluster header
	// weighted clusters
	weighted    []weightedCluster
	totalWeight uint32
	notFound    int // cluster_not_found_response_code
	direct      struct {
		status int
		body   string
	}
	timeout       time.Duration  // 0: disabled
	idleTimeout   *time.Duration // idle_timeout, when set (0: disabled)
	hostRewrite   string
	prefixRewrite string
	regexRewrite  *regexp.Regexp
	regexSubst    string
	retry         *retryPolicy
	bufferLimit   *uint64
	perRequest    *uint64
	perFilter     map[string]*perFilterConfig
	reqAdd        []headerAdd
	reqDel        []string
	respAdd       []headerAdd
	respDel       []string
}

type routeMatch struct {
	kind          int // 0 prefix, 1 path, 2 regex, 3 path_separated_prefix
	s             string
	re            *regexp.Regexp
	caseSensitive bool
	headers       []*headerMatcher
	query         []queryMatcher
}

type queryMatcher struct {
	name    string
	present bool
	str     *stringMatcher
}

func compileRouteTable(rc *routev3.RouteConfiguration, filterNames map[string]bool) (*routeTable, error) {
	t := &routeTable{name: rc.GetName(), exact: map[string]*virtualHost{}}
	var err error
	if t.reqAdd, err = compileHeadersToAdd(rc.GetRequestHeadersToAdd()); err != nil {
		return nil, err
	}
	if t.respAdd, err = compileHeadersToAdd(rc.GetResponseHeadersToAdd()); err != nil {
		return nil, err
	}
	t.reqDel = lowerAll(rc.GetRequestHeadersToRemove())
	t.respDel = lowerAll(rc.GetResponseHeadersToRemove())
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
	if v.GetMatcher() != nil {
		return nil, errors.New("the matcher tree is not emulated")
	}
	vh := &virtualHost{name: v.GetName()}
	var err error
	if v.GetRequestBodyBufferLimit() != nil {
		n := v.GetRequestBodyBufferLimit().GetValue()
		vh.bufferLimit = &n
	}
	if v.GetPerRequestBufferLimitBytes() != nil {
		n := uint64(v.GetPerRequestBufferLimitBytes().GetValue())
		vh.perRequest = &n
	}
	if vh.perFilter, err = compilePerFilter(v.GetTypedPerFilterConfig(), filterNames); err != nil {
		return nil, err
	}
	if v.GetRetryPolicy() != nil {
		if vh.retry, err = compileRetryPolicy(v.GetRetryPolicy()); err != nil {
			return nil, err
		}
	}
	if vh.reqAdd, err = compileHeadersToAdd(v.GetRequestHeadersToAdd()); err != nil {
		return nil, err
	}
	if vh.respAdd, err = compileHeadersToAdd(v.GetResponseHeadersToAdd()); err != nil {
		return nil, err
	}
	vh.reqDel = lowerAll(v.GetRequestHeadersToRemove())
	vh.respDel = lowerAll(v.GetResponseHeadersToRemove())
	for i, r := range v.GetRoutes() {
		rt, err := compileRoute(t, vh, r, filterNames)
		if err != nil {
			return nil, fmt.Errorf("route %d (%q): %w", i, r.GetName(), err)
		}
		vh.routes = append(vh.routes, rt)
	}
	return vh, nil
}

func compileRoute(t *routeTable, vh *virtualHost, r *routev3.Route, filterNames map[string]bool) (*route, error) {
	rt := &route{name: r.GetName(), vh: vh, table: t, timeout: defaultRouteTimeout, notFound: 503}
	m := r.GetMatch()
	rt.match.caseSensitive = m.GetCaseSensitive() == nil || m.GetCaseSensitive().GetValue()
	switch p := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		rt.match.kind, rt.match.s = 0, p.Prefix
	case *routev3.RouteMatch_Path:
		rt.match.kind, rt.match.s = 1, p.Path
	case *routev3.RouteMatch_SafeRegex:
		re, err := compileRegex(p.SafeRegex)
		if err != nil {
			return nil, err
		}
		rt.match.kind, rt.match.re = 2, re
	case *routev3.RouteMatch_PathSeparatedPrefix:
		rt.match.kind, rt.match.s = 3, p.PathSeparatedPrefix
	default:
		return nil, fmt.Errorf("path specifier %T is not emulated", p)
	}
	if !rt.match.caseSensitive {
		rt.match.s = strings.ToLower(rt.match.s)
	}
	if m.GetRuntimeFraction() != nil || m.GetGrpc() != nil || len(m.GetDynamicMetadata()) > 0 ||
		len(m.GetCookies()) > 0 || len(m.GetFilterState()) > 0 {
		return nil, errors.New("runtime_fraction, grpc, dynamic_metadata, cookies and filter_state matches are not emulated")
	}
	for _, h := range m.GetHeaders() {
		hm, err := compileHeaderMatcher(h)
		if err != nil {
			return nil, err
		}
		rt.match.headers = append(rt.match.headers, hm)
	}
	for _, q := range m.GetQueryParameters() {
		qm := queryMatcher{name: q.GetName()}
		if q.GetPresentMatch() {
			qm.present = true
		} else if q.GetStringMatch() != nil {
			sm, err := compileStringMatcher(q.GetStringMatch())
			if err != nil {
				return nil, err
			}
			qm.str = sm
		} else {
			qm.present = true
		}
		rt.match.query = append(rt.match.query, qm)
	}
	var err error
	if rt.perFilter, err = compilePerFilter(r.GetTypedPerFilterConfig(), filterNames); err != nil {
		return nil, err
	}
	if rt.reqAdd, err = compileHeadersToAdd(r.GetRequestHeadersToAdd()); err != nil {
		return nil, err
	}
	if rt.respAdd, err = compileHeadersToAdd(r.GetResponseHeadersToAdd()); err != nil {
		return nil, err
	}
	rt.reqDel = lowerAll(r.GetRequestHeadersToRemove())
	rt.respDel = lowerAll(r.GetResponseHeadersToRemove())
	switch a := r.GetAction().(type) {
	case *routev3.Route_DirectResponse:
		rt.kind = kindDirect
		rt.direct.status = int(a.DirectResponse.GetStatus())
		if a.DirectResponse.GetBody() != nil {
			if rt.direct.body, err = dataSource(a.DirectResponse.GetBody()); err != nil {
				return nil, err
			}
		}
	case *routev3.Route_Route:
		if err := compileRouteAction(rt, a.Route); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("route action %T is not emulated", a)
	}
	if r.GetRequestBodyBufferLimit() != nil {
		n := r.GetRequestBodyBufferLimit().GetValue()
		rt.bufferLimit = &n
	}
	if r.GetPerRequestBufferLimitBytes() != nil {
		n := uint64(r.GetPerRequestBufferLimitBytes().GetValue())
		rt.perRequest = &n
	}
	return rt, nil
}

func compileRouteAction(rt *route, a *routev3.RouteAction) error {
	switch c := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		rt.kind, rt.target = kindCluster, c.Cluster
	case *routev3.RouteAction_ClusterHeader:
		rt.kind, rt.target = kindClusterHeader, strings.ToLower(c.ClusterHeader)
	case *routev3.RouteAction_WeightedClusters:
		rt.kind = kindWeighted
		for _, w := range c.WeightedClusters.GetClusters() {
			if w.GetName() == "" {
				return errors.New("weighted cluster without a name is not emulated")
			}
			wt := w.GetWeight().GetValue()
			rt.weighted = append(rt.weighted, weightedCluster{name: w.GetName(), weight: wt})
			rt.totalWeight += wt
		}
		if rt.totalWeight == 0 {
			return errors.New("weighted clusters: total weight is 0")
		}
	default:
		return fmt.Errorf("cluster specifier %T is not emulated", c)
	}
	switch a.GetClusterNotFoundResponseCode() {
	case routev3.RouteAction_NOT_FOUND:
		rt.notFound = 404
	case routev3.RouteAction_INTERNAL_SERVER_ERROR:
		rt.notFound = 500
	}
	if a.GetTimeout() != nil {
		rt.timeout = a.GetTimeout().AsDuration()
	}
	if a.GetIdleTimeout() != nil {
		d := a.GetIdleTimeout().AsDuration()
		rt.idleTimeout = &d
	}
	switch h := a.GetHostRewriteSpecifier().(type) {
	case nil:
	case *routev3.RouteAction_HostRewriteLiteral:
		rt.hostRewrite = h.HostRewriteLiteral
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
	if a.GetRetryPolicy() != nil {
		var err error
		if rt.retry, err = compileRetryPolicy(a.GetRetryPolicy()); err != nil {
			return err
		}
	} else {
		rt.retry = rt.vh.retry
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

// match returns the first route of the virtual host that matches (routes
// are tried in order; RouteMatcher::route).
func (t *routeTable) match(h *headerMap) *route {
	vh := t.selectVirtualHost(h.value(":authority"))
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

func (m *routeMatch) matches(h *headerMap) bool {
	full := h.value(":path")
	p := pathOnly(full)
	if !m.caseSensitive {
		p = strings.ToLower(p)
	}
	switch m.kind {
	case 0:
		if !strings.HasPrefix(p, m.s) {
			return false
		}
	case 1:
		if p != m.s {
			return false
		}
	case 2:
		if !m.re.MatchString(p) {
			return false
		}
	case 3:
		if p != m.s && !strings.HasPrefix(p, m.s+"/") {
			return false
		}
	}
	if !matchHeaders(m.headers, h) {
		return false
	}
	if len(m.query) > 0 {
		q := parseQuery(full)
		for _, qm := range m.query {
			v, ok := q[qm.name]
			if !ok {
				return false
			}
			if !qm.present && !qm.str.match(v) {
				return false
			}
		}
	}
	return true
}

func parseQuery(path string) map[string]string {
	out := map[string]string{}
	_, q, ok := strings.Cut(path, "?")
	if !ok {
		return out
	}
	q, _, _ = strings.Cut(q, "#")
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if _, seen := out[k]; !seen && k != "" {
			out[k] = v
		}
	}
	return out
}

// pickCluster returns the cluster name the route sends to. For
// cluster_header only the first value counts; a missing header gives "".
func (r *route) pickCluster(h *headerMap) string {
	switch r.kind {
	case kindCluster:
		return r.target
	case kindClusterHeader:
		v, _ := h.get(r.target)
		return v
	case kindWeighted:
		n := rand.Uint32N(r.totalWeight)
		for _, w := range r.weighted {
			if n < w.weight {
				return w.name
			}
			n -= w.weight
		}
	}
	return ""
}

// decoderLimit is the decoder buffer limit of a request whose first route
// match was r (nil: no route): request_body_buffer_limit on the route, else
// on the virtual host, else min(per_request_buffer_limit_bytes, listener
// limit), else the listener's per_connection_buffer_limit_bytes.
func (r *route) decoderLimit(listener uint64) uint64 {
	if r == nil {
		return listener
	}
	if r.bufferLimit != nil {
		return *r.bufferLimit
	}
	if r.vh.bufferLimit != nil {
		return *r.vh.bufferLimit
	}
	per := r.perRequest
	if per == nil {
		per = r.vh.perRequest
	}
	if per != nil && *per < listener {
		return *per
	}
	return listener
}

// rewritePath applies prefix_rewrite or regex_rewrite to :path.
func (r *route) rewritePath(h *headerMap) {
	full := h.value(":path")
	p, rest := pathOnly(full), full[len(pathOnly(full)):]
	switch {
	case r.prefixRewrite != "" && r.match.kind == 0 || r.prefixRewrite != "" && r.match.kind == 3:
		if len(p) >= len(r.match.s) {
			h.set(":path", r.prefixRewrite+p[len(r.match.s):]+rest)
		}
	case r.prefixRewrite != "" && r.match.kind == 1:
		h.set(":path", r.prefixRewrite+rest)
	case r.regexRewrite != nil:
		h.set(":path", r.regexRewrite.ReplaceAllString(p, r.regexSubst)+rest)
	}
}
