package xdsconfig

import (
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlymutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestNotEmulatedIsRejected: configuration toolmesh never emits and the data
// plane does not emulate fails to compile (so ADS NACKs it) instead of being
// ignored.
func TestNotEmulatedIsRejected(t *testing.T) {
	filter := func(f *accesslogv3.AccessLogFilter) func() error {
		return func() error { _, err := compileLogFilter(f); return err }
	}
	value := func(m *matcherv3.ValueMatcher) func() error {
		return func() error { _, err := compileValueMatcher(m); return err }
	}
	routeMatch := func(m *routev3.RouteMatch) func() error {
		return func() error { _, err := compileRouteMatch(m); return err }
	}
	early := func(mu *mutationrulesv3.HeaderMutation) func() error {
		return func() error {
			a, err := anypb.New(&earlymutationv3.HeaderMutation{Mutations: []*mutationrulesv3.HeaderMutation{mu}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = compileEarlyMutations([]*corev3.TypedExtensionConfig{{Name: "early", TypedConfig: a}})
			return err
		}
	}
	tests := []struct {
		name    string
		compile func() error
		wantErr string
	}{
		{"weighted clusters", func() error {
			return compileRouteAction(&Route{VH: &virtualHost{}}, &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{
				WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{{Name: "a", Weight: wrapperspb.UInt32(1)}}},
			}})
		}, "cluster specifier"},
		{"inline route configuration", func() error {
			hcm, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: "s", RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{
				RouteConfig: &routev3.RouteConfiguration{Name: "inline"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = ListenerHCM(&listenerv3.Listener{FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
				Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
			}}}}})
			return err
		}, "route specifier"},
		{"per-route ext_proc configuration", func() error {
			pr, err := anypb.New(&extprocfilterv3.ExtProcPerRoute{Override: &extprocfilterv3.ExtProcPerRoute_Disabled{Disabled: true}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = CompileRouteTable(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
				Name: "vh", Domains: []string{"*"}, TypedPerFilterConfig: map[string]*anypb.Any{"ext_proc": pr},
			}}}, map[string]bool{"ext_proc": true})
			return err
		}, "typed_per_filter_config"},
		{"forward_rules", func() error {
			_, err := compileExtProc("ext_proc", false, &extprocfilterv3.ExternalProcessor{
				GrpcService:  &corev3.GrpcService{},
				ForwardRules: &extprocfilterv3.HeaderForwardingRules{},
			})
			return err
		}, "forward_rules"},
		{"path_separated_prefix", routeMatch(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/mcp"}}), "path specifier"},
		{"regex path", routeMatch(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/r/[0-9]+"}}}), "path specifier"},
		{"query parameters", routeMatch(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			QueryParameters: []*routev3.QueryParameterMatcher{{Name: "tool"}}}), "query_parameters"},
		{"deprecated header matcher field", routeMatch(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers: []*routev3.HeaderMatcher{{Name: "x", HeaderMatchSpecifier: &routev3.HeaderMatcher_PrefixMatch{PrefixMatch: "z"}}}}), "header matcher"},
		{"json_format", func() error {
			_, err := compileBodyFormat(&corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{
				JsonFormat: &structpb.Struct{Fields: map[string]*structpb.Value{"code": structpb.NewStringValue("%RESPONSE_CODE%")}},
			}})
			return err
		}, "not emulated"},
		{"%DURATION%", func() error { _, err := ParseTextFormat("%DURATION%"); return err }, "not supported"},
		{"%HOSTNAME%", func() error { _, err := ParseTextFormat("%HOSTNAME%"); return err }, "not supported"},
		{"per_request_buffer_limit_bytes on a virtual host", func() error {
			_, err := CompileRouteTable(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
				Name: "vh", Domains: []string{"*"}, PerRequestBufferLimitBytes: wrapperspb.UInt32(1),
			}}}, nil)
			return err
		}, "per_request_buffer_limit_bytes"},
		{"per_request_buffer_limit_bytes on a route", func() error {
			_, err := CompileRouteTable(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
				Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{{
					Match:                      &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action:                     &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200}},
					PerRequestBufferLimitBytes: wrapperspb.UInt32(1),
				}},
			}}}, nil)
			return err
		}, "per_request_buffer_limit_bytes"},
		{"unescape escaped slashes", func() error {
			return compileHCMRequestRules(&hcmConfig{}, &hcmv3.HttpConnectionManager{
				PathWithEscapedSlashesAction: hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD,
			})
		}, "path_with_escaped_slashes_action"},
		{"server_header_transformation other than OVERWRITE", func() error {
			return compileHCMRequestRules(&hcmConfig{}, &hcmv3.HttpConnectionManager{
				ServerHeaderTransformation: hcmv3.HttpConnectionManager_PASS_THROUGH,
			})
		}, "server_header_transformation"},
		{"forwarding namespaces", func() error {
			_, err := compileExtProc("ext_proc", false, &extprocfilterv3.ExternalProcessor{
				GrpcService: &corev3.GrpcService{},
				MetadataOptions: &extprocfilterv3.MetadataOptions{ForwardingNamespaces: &extprocfilterv3.MetadataOptions_MetadataNamespaces{
					Untyped: []string{"ns"},
				}},
			})
			return err
		}, "forwarding_namespaces"},
		{"duration filter", filter(&accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_DurationFilter{
			DurationFilter: &accesslogv3.DurationFilter{Comparison: &accesslogv3.ComparisonFilter{}},
		}}), "not emulated"},
		{"not health check filter", filter(&accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_NotHealthCheckFilter{
			NotHealthCheckFilter: &accesslogv3.NotHealthCheckFilter{},
		}}), "not emulated"},
		{"traceable filter", filter(&accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_TraceableFilter{
			TraceableFilter: &accesslogv3.TraceableFilter{},
		}}), "not emulated"},
		{"header filter", filter(&accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_HeaderFilter{
			HeaderFilter: &accesslogv3.HeaderFilter{Header: &routev3.HeaderMatcher{Name: "x"}},
		}}), "not emulated"},
		{"and of a filter that is not emulated", filter(&accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{
			AndFilter: &accesslogv3.AndFilter{Filters: []*accesslogv3.AccessLogFilter{
				{FilterSpecifier: &accesslogv3.AccessLogFilter_TraceableFilter{TraceableFilter: &accesslogv3.TraceableFilter{}}},
			}},
		}}), "not emulated"},
		{"null value match", value(&matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_NullMatch_{
			NullMatch: &matcherv3.ValueMatcher_NullMatch{},
		}}), "not emulated"},
		{"double value match", value(&matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_DoubleMatch{
			DoubleMatch: &matcherv3.DoubleMatcher{MatchPattern: &matcherv3.DoubleMatcher_Exact{Exact: 1}},
		}}), "not emulated"},
		{"list value match", value(&matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_ListMatch{
			ListMatch: &matcherv3.ListMatcher{},
		}}), "not emulated"},
		{"early remove", early(&mutationrulesv3.HeaderMutation{Action: &mutationrulesv3.HeaderMutation_Remove{Remove: "x"}}), "not emulated"},
		{"early append", early(&mutationrulesv3.HeaderMutation{Action: &mutationrulesv3.HeaderMutation_Append{
			Append: &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x", Value: "y"}},
		}}), "not emulated"},
		{"deprecated upstream SAN matchers", func() error {
			_, err := compileUpstreamTLS(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
				ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					TrustedCa:            &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "x"}},
					MatchSubjectAltNames: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "a"}}},
				}},
			}}, false)
			return err
		}, "match_subject_alt_names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.compile(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
