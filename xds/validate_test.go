package xds_test

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// listenerWith returns a listener whose HTTP connection manager runs an
// ext_proc filter with the given config, then the router.
func listenerWith(t *testing.T, statPrefix string, ep *extprocfilterv3.ExternalProcessor) *listenerv3.Listener {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: "r",
			ConfigSource:    &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: wire.ExtProcFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, ep)}},
			{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}},
		},
	}
	return &listenerv3.Listener{
		Name: "l",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 10000},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)},
		}}}},
	}
}

func validExtProc() *extprocfilterv3.ExternalProcessor {
	return &extprocfilterv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: wire.ExtProcCluster},
		}},
		MessageTimeout: durationpb.New(5 * time.Second),
	}
}

func TestValidateDeep(t *testing.T) {
	tooLong := validExtProc()
	tooLong.MessageTimeout = durationpb.New(2 * time.Hour) // PGV: at most 1h

	for _, tc := range []struct {
		name string
		msg  proto.Message
		// shallowOK: the message passes its own ValidateAll, so only the
		// descent into Any can find the problem.
		shallowOK bool
		wantErr   []string // substrings of the error; none means valid
	}{
		{
			name:      "valid listener",
			msg:       listenerWith(t, "toolmesh", validExtProc()),
			shallowOK: true,
		},
		{
			name:      "invalid ext_proc config two Anys deep",
			msg:       listenerWith(t, "toolmesh", tooLong),
			shallowOK: true,
			wantErr: []string{
				"filter_chains[0].filters[0].typed_config<envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager>" +
					".http_filters[0].typed_config<envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor>",
				"MessageTimeout",
			},
		},
		{
			name:      "invalid HTTP connection manager one Any deep",
			msg:       listenerWith(t, "", validExtProc()),
			shallowOK: true,
			wantErr:   []string{"HttpConnectionManager>", "StatPrefix"},
		},
		{
			name: "invalid Any value in a map field",
			msg: &clusterv3.Cluster{
				Name:           "c",
				ConnectTimeout: durationpb.New(time.Second),
				TypedExtensionProtocolOptions: map[string]*anypb.Any{
					// upstream_protocol_options is a required oneof.
					"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(t, &upstreamhttpv3.HttpProtocolOptions{}),
				},
			},
			shallowOK: true,
			wantErr:   []string{`typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]`, "UpstreamProtocolOptions"},
		},
		{
			name: "Any of a type that is not linked in",
			msg: &listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
				Name:       "x",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type"}},
			}}}}},
			shallowOK: true,
			wantErr:   []string{"unpack type.googleapis.com/no.such.Type"},
		},
		{
			name:    "top-level violation",
			msg:     &clusterv3.Cluster{Name: ""},
			wantErr: []string{"Name"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.shallowOK {
				if err := tc.msg.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
					t.Fatalf("fixture is invalid at the top level already: %v", err)
				}
			}
			err := xds.ValidateDeep(tc.msg)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ValidateDeep: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("ValidateDeep accepted an invalid message")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// TestTranslateRejects covers inputs Translate must refuse rather than turn
// into configuration Envoy would misroute.
func TestTranslateRejects(t *testing.T) {
	svc := func(name, url string, cs *registry.ClusterSettings) registry.ToolService {
		return registry.ToolService{Name: name, URL: url, Cluster: cs}
	}
	ok := []registry.Route{{Key: "a", ToolServices: []registry.ToolService{svc("s", "http://10.0.0.1", nil)}}}
	for _, tc := range []struct {
		name   string
		routes []registry.Route
		opts   xds.Options
		want   string
	}{
		{name: "response limit over 32 bits", routes: ok, opts: xds.Options{MaxResponseBytes: 1 << 32}, want: "MaxResponseBytes"},
		{name: "message timeout over 1h", routes: ok, opts: xds.Options{MessageTimeout: 2 * time.Hour}, want: "MessageTimeout"},
		{name: "listen port over 65535", routes: ok, opts: xds.Options{ListenPort: 70000}, want: "ListenPort"},
		{
			name: "one tool service defined two ways",
			routes: []registry.Route{
				{Key: "a", ToolServices: []registry.ToolService{svc("s", "http://10.0.0.1:80", nil)}},
				{Key: "b", ToolServices: []registry.ToolService{svc("s", "http://10.0.0.1:80", &registry.ClusterSettings{MaxRetries: 1})}},
			},
			want: `tool service "s": routes "a" and "b" define it differently`,
		},
		{
			name: "two routes on one public path",
			routes: []registry.Route{
				{Key: "a", PublicPath: "/mcp/x", ToolServices: []registry.ToolService{svc("s", "http://10.0.0.1", nil)}},
				{Key: "b", PublicPath: "/mcp/x", ToolServices: []registry.ToolService{svc("t", "http://10.0.0.2", nil)}},
			},
			want: `share the public path "/mcp/x"`,
		},
		{
			name:   "tool service name that is no DNS label",
			routes: []registry.Route{{Key: "a", ToolServices: []registry.ToolService{svc("Bad_Name", "http://10.0.0.1", nil)}}},
			want:   `tool service name "Bad_Name"`,
		},
		{
			name:   "public path not UTF-8",
			routes: []registry.Route{{Key: "a", PublicPath: "/mcp/\xff", ToolServices: []registry.ToolService{svc("s", "http://10.0.0.1", nil)}}},
			want:   "absolute UTF-8 path",
		},
		{
			name:   "bad url",
			routes: []registry.Route{{Key: "a", ToolServices: []registry.ToolService{svc("s", "ftp://10.0.0.1", nil)}}},
			want:   `tool service "s": url`,
		},
		{
			name:   "percent-encoded host",
			routes: []registry.Route{{Key: "a", ToolServices: []registry.ToolService{svc("s", "http://tools%80.svc:8080", nil)}}},
			want:   "neither an IP address nor a DNS name",
		},
		{
			name:   "unknown lb policy",
			routes: []registry.Route{{Key: "a", ToolServices: []registry.ToolService{svc("s", "http://10.0.0.1", &registry.ClusterSettings{LBPolicy: "FASTEST"})}}},
			want:   `route "a": tool service "s": cluster.lbPolicy: "FASTEST" is not one of`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := xds.Translate(tc.routes, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Translate error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestTranslateSharedServiceOnce checks the "one Tool Service is one
// cluster" rule and that a trailing slash on the URL does not split it.
func TestTranslateSharedServiceOnce(t *testing.T) {
	s := registry.ToolService{Name: "search", URL: "http://search.svc:8080"}
	s2 := s
	s2.URL += "/"
	res, err := xds.Translate([]registry.Route{
		{Key: "a", ToolServices: []registry.ToolService{s}},
		{Key: "b", ToolServices: []registry.ToolService{s2}},
	}, xds.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Clusters) != 1 {
		t.Fatalf("got %d clusters, want 1", len(res.Clusters))
	}
}
