package xdsconfig

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
)

func named(name string, m *routev3.RouteMatch) *routev3.Route {
	return &routev3.Route{Name: name, Match: m, Action: &routev3.Route_DirectResponse{
		DirectResponse: &routev3.DirectResponseAction{Status: 200}}}
}

func TestRouteMatching(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{
		{Name: "exact", Domains: []string{"api.example.com", "api.example.com:8080"}, Routes: []*routev3.Route{
			named("exact-any", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}),
		}},
		{Name: "suffix", Domains: []string{"*.example.com"}, Routes: []*routev3.Route{
			named("suffix-any", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}),
		}},
		{Name: "longer-suffix", Domains: []string{"*.b.example.com"}, Routes: []*routev3.Route{
			named("longer-suffix-any", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}),
		}},
		{Name: "prefix", Domains: []string{"internal.*"}, Routes: []*routev3.Route{
			named("prefix-any", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}),
		}},
		{Name: "default", Domains: []string{"*"}, Routes: []*routev3.Route{
			named("path", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/exact"}}),
			named("header-exact", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/h"},
				Headers: []*routev3.HeaderMatcher{{Name: "x-mcp-cluster",
					HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
						MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "a"}}}}}}),
			named("header-prefix-inverted", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/h"},
				Headers: []*routev3.HeaderMatcher{{Name: "x-mcp-cluster", InvertMatch: true,
					HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
						MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "z"}}}}}}),
			named("header-absent", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/h"},
				Headers: []*routev3.HeaderMatcher{{Name: "x-mcp-cluster",
					HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}}}}),
			named("range", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/range"},
				Headers: []*routev3.HeaderMatcher{{Name: "x-n",
					HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 1, End: 10}}}}}),
			named("case-insensitive", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/CI"},
				CaseSensitive: wrapperspb.Bool(false)}),
		}},
	}}
	table, err := CompileRouteTable(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host, path string
		hdrs       map[string][]string
		want       string // route name; "" for no route
	}{
		{host: "API.example.com", path: "/x", want: "exact-any"},
		{host: "api.example.com:8080", path: "/x", want: "exact-any"},
		{host: "a.example.com", path: "/x", want: "suffix-any"},
		{host: "c.b.example.com", path: "/x", want: "longer-suffix-any"},
		{host: "internal.local", path: "/x", want: "prefix-any"},
		{host: "other", path: "/exact?q=1", want: "path"},
		{host: "other", path: "/exact/more", want: ""},
		{host: "other", path: "/h", hdrs: map[string][]string{"x-mcp-cluster": {"a"}}, want: "header-exact"},
		// Each value of a repeated header is matched on its own (Envoy
		// 1.39, match_headers_individually): "a" matches one of a, b, and
		// "a,b" of a joined value no longer does.
		{host: "other", path: "/h", hdrs: map[string][]string{"x-mcp-cluster": {"b", "a"}}, want: "header-exact"},
		{host: "other", path: "/h", hdrs: map[string][]string{"x-mcp-cluster": {"a,b"}}, want: "header-prefix-inverted"},
		{host: "other", path: "/h", hdrs: map[string][]string{"x-mcp-cluster": {"b", "c"}}, want: "header-prefix-inverted"},
		{host: "other", path: "/h", hdrs: map[string][]string{"x-mcp-cluster": {"b", "zz"}}, want: ""},
		{host: "other", path: "/range", hdrs: map[string][]string{"x-n": {"10", "3"}}, want: "range"},
		{host: "other", path: "/h", hdrs: map[string][]string{"x-mcp-cluster": {"zz"}}, want: ""},
		{host: "other", path: "/h", want: "header-absent"},
		{host: "other", path: "/range", hdrs: map[string][]string{"x-n": {"9"}}, want: "range"},
		{host: "other", path: "/range", hdrs: map[string][]string{"x-n": {"10"}}, want: ""},
		{host: "other", path: "/ci/x", want: "case-insensitive"},
	}
	for _, tt := range tests {
		h := &headers.Map{}
		h.Add(":authority", tt.host)
		h.Add(":path", tt.path)
		for k, vs := range tt.hdrs {
			for _, v := range vs {
				h.Add(k, v)
			}
		}
		got := ""
		if r := table.Match(h); r != nil {
			got = r.Name
		}
		if got != tt.want {
			t.Errorf("%s%s %v: route %q, want %q", tt.host, tt.path, tt.hdrs, got, tt.want)
		}
	}
}

func TestDuplicateDomains(t *testing.T) {
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{
		{Name: "a", Domains: []string{"*"}}, {Name: "b", Domains: []string{"*"}},
	}}
	if _, err := CompileRouteTable(rc, nil); err == nil {
		t.Fatal("duplicate domains accepted")
	}
}

func TestRewritePath(t *testing.T) {
	tests := []struct {
		name string
		m    *routev3.RouteMatch
		a    *routev3.RouteAction
		in   string
		want string
	}{
		{name: "prefix rewrite keeps the query",
			m: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/mcp/"}},
			a: &routev3.RouteAction{PrefixRewrite: "/tools/"}, in: "/mcp/x?a=1", want: "/tools/x?a=1"},
		{name: "regex rewrite",
			m: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			a: &routev3.RouteAction{RegexRewrite: &matcherv3.RegexMatchAndSubstitute{
				Pattern: &matcherv3.RegexMatcher{Regex: `^/mcp/([a-z]+)$`}, Substitution: `/svc/\1/call`}},
			in: "/mcp/core", want: "/svc/core/call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "c"}
			rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"},
				Routes: []*routev3.Route{{Match: tt.m, Action: &routev3.Route_Route{Route: tt.a}}}}}}
			table, err := CompileRouteTable(rc, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := &headers.Map{}
			h.Add(":authority", "h")
			h.Add(":path", tt.in)
			r := table.Match(h)
			r.RewritePath(h)
			if got := h.Value(":path"); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNormalizePath(t *testing.T) {
	tests := []struct {
		in             string
		canonical, mrg bool
		want           string
	}{
		{"/mcp/./core", true, false, "/mcp/core"},
		{"/mcp/x/../core?a=/../b", true, false, "/mcp/core?a=/../b"},
		{"/../../mcp", true, false, "/mcp"},
		{"/mcp/%63ore", true, false, "/mcp/core"},
		{"/mcp/a%2fb", true, false, "/mcp/a%2Fb"},
		{`/mcp\core`, true, false, "/mcp/core"},
		{"/mcp/.", true, false, "/mcp/"},
		{"//mcp///core", false, true, "/mcp/core"},
		{"//mcp/./core", false, false, "//mcp/./core"},
	}
	for _, tt := range tests {
		if got := headers.NormalizePath(tt.in, tt.canonical, tt.mrg); got != tt.want {
			t.Errorf("normalizePath(%q, %v, %v) = %q, want %q", tt.in, tt.canonical, tt.mrg, got, tt.want)
		}
	}
}
