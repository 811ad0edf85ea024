package dataplane

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlymutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Names used by the hand-built test configuration.
const (
	testClusterHeader = "x-toolmesh-cluster"
	testNamespace     = "toolmesh"
	extProcName       = "envoy.filters.http.ext_proc"
)

// processFunc answers one ext_proc message. A nil response with a nil error
// means "never answer" (the stream stays open until the data plane closes
// it); errCloseStream ends the stream with status OK; another error ends it
// with that error's status.
type processFunc func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error)

// overrideDelay is how long the fake server answers after an
// override_message_timeout: three times the message timeout of
// TestMessageTimeoutOverride.
const overrideDelay = 300 * time.Millisecond

// errCloseStream makes the fake server end the stream with status OK.
var errCloseStream = errors.New("close stream cleanly")

// fakeExtProc is a scripted ext_proc server: it records every message and
// answers with fn. It is a test double for the extproc package, speaking
// only the ext_proc protocol.
type fakeExtProc struct {
	extprocv3.UnimplementedExternalProcessorServer
	fn processFunc

	mu           sync.Mutex
	seen         []*extprocv3.ProcessingRequest
	streams      int
	contentTypes []string      // of each stream, as the server received it
	authorities  []string      // :authority of each stream
	addr         string        // where it listens
	ended        chan struct{} // one value per finished stream
}

func (f *fakeExtProc) Process(ps extprocv3.ExternalProcessor_ProcessServer) error {
	md, _ := metadata.FromIncomingContext(ps.Context())
	f.mu.Lock()
	f.streams++
	f.contentTypes = append(f.contentTypes, md.Get("content-type")...)
	f.authorities = append(f.authorities, md.Get(":authority")...)
	f.mu.Unlock()
	defer func() { f.ended <- struct{}{} }()
	for {
		req, err := ps.Recv()
		if err != nil {
			return nil // EOF or Canceled: the data plane closed the stream
		}
		f.mu.Lock()
		f.seen = append(f.seen, req)
		f.mu.Unlock()
		resp, err := f.fn(req)
		if errors.Is(err, errCloseStream) {
			return nil
		}
		if err != nil {
			return err
		}
		if resp == nil {
			<-ps.Context().Done()
			return nil
		}
		if d := resp.GetOverrideMessageTimeout(); d != nil && resp.GetResponse() != nil {
			// A response carrying override_message_timeout is sent as the
			// override alone, then the response overrideDelay later.
			if err := ps.Send(&extprocv3.ProcessingResponse{OverrideMessageTimeout: d}); err != nil {
				return nil
			}
			time.Sleep(overrideDelay)
			resp = &extprocv3.ProcessingResponse{Response: resp.GetResponse()}
		}
		if err := ps.Send(resp); err != nil {
			return nil
		}
	}
}

func (f *fakeExtProc) messages() []*extprocv3.ProcessingRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*extprocv3.ProcessingRequest(nil), f.seen...)
}

// kinds lists the kinds of the messages received, e.g. "request_headers".
func (f *fakeExtProc) kinds() []string {
	var out []string
	for _, m := range f.messages() {
		switch m.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			out = append(out, "request_headers")
		case *extprocv3.ProcessingRequest_RequestBody:
			out = append(out, "request_body")
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			out = append(out, "response_headers")
		case *extprocv3.ProcessingRequest_ResponseBody:
			out = append(out, "response_body")
		default:
			out = append(out, "other")
		}
	}
	return out
}

// waitEnded waits until n streams have ended on the server side, which
// proves the data plane closed them.
func (f *fakeExtProc) waitEnded(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-f.ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("ext_proc stream %d did not end", i+1)
		}
	}
}

// startExtProc serves fn on 127.0.0.1 and returns a client connection.
func startExtProc(t *testing.T, fn processFunc) (*fakeExtProc, *grpc.ClientConn) {
	t.Helper()
	f := &fakeExtProc{fn: fn, ended: make(chan struct{}, 100)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	extprocv3.RegisterExternalProcessorServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return f, cc
}

// upstream is a recording test Tool Service.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recordedRequest
}

type recordedRequest struct {
	method, path, host string
	header             http.Header
	body               string
}

func startUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, recordedRequest{r.Method, r.URL.RequestURI(), r.Host, r.Header.Clone(), string(b)})
		u.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []recordedRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recordedRequest(nil), u.reqs...)
}

func (u *upstream) addr() string { return strings.TrimPrefix(u.URL, "http://") }

// setup describes one hand-built xDS configuration.
type setup struct {
	extProc    *extprocfilterv3.ExternalProcessor // nil: no ext_proc filter
	early      bool                               // strip x-toolmesh-* early
	routes     []*routev3.Route
	vhost      func(*routev3.VirtualHost)
	localReply *hcmv3.LocalReplyConfig
	clusters   []*clusterv3.Cluster
	endpoints  []*endpointv3.ClusterLoadAssignment
	// listenerLimit sets per_connection_buffer_limit_bytes when non-zero.
	listenerLimit uint32
	// hcm, when set, adjusts the HTTP connection manager.
	hcm func(*hcmv3.HttpConnectionManager)
}

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// toolmeshMode is the processing_mode toolmesh configures.
func toolmeshMode() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestHeaderMode:   extprocfilterv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocfilterv3.ProcessingMode_BUFFERED,
		RequestTrailerMode:  extprocfilterv3.ProcessingMode_SKIP,
		ResponseHeaderMode:  extprocfilterv3.ProcessingMode_SEND,
		ResponseBodyMode:    extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
	}
}

// streamedEntry is toolmesh's allowed_override_modes entry: the whole
// effective mode with the response body STREAMED.
func streamedEntry() *extprocfilterv3.ProcessingMode {
	m := toolmeshMode()
	m.ResponseBodyMode = extprocfilterv3.ProcessingMode_STREAMED
	return m
}

// defaultExtProc is the configuration toolmesh uses (xds/listener.go
// buildExtProc), with a short but safe message timeout.
func defaultExtProc() *extprocfilterv3.ExternalProcessor {
	return &extprocfilterv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "toolmesh_extproc"}}},
		MessageTimeout:       durationpb.New(5 * time.Second),
		ProcessingMode:       toolmeshMode(),
		AllowModeOverride:    true,
		AllowedOverrideModes: []*extprocfilterv3.ProcessingMode{streamedEntry()},
		MetadataOptions: &extprocfilterv3.MetadataOptions{
			ReceivingNamespaces: &extprocfilterv3.MetadataOptions_MetadataNamespaces{Untyped: []string{testNamespace}},
		},
		MutationRules: &mutationrulesv3.HeaderMutationRules{},
	}
}

func (s setup) resources(t testing.TB) map[resourcev3.Type][]types.Resource {
	t.Helper()
	var filters []*hcmv3.HttpFilter
	if s.extProc != nil {
		filters = append(filters, &hcmv3.HttpFilter{Name: extProcName,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, s.extProc)}})
	}
	filters = append(filters, &hcmv3.HttpFilter{Name: "envoy.filters.http.router",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}})
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "mcp",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: "routes",
			ConfigSource: &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
		}},
		HttpFilters:      filters,
		LocalReplyConfig: s.localReply,
	}
	if s.hcm != nil {
		s.hcm(h)
	}
	if s.early {
		h.EarlyHeaderMutationExtensions = []*corev3.TypedExtensionConfig{{
			Name: "envoy.http.early_header_mutation.header_mutation",
			TypedConfig: mustAny(t, &earlymutationv3.HeaderMutation{Mutations: []*mutationrulesv3.HeaderMutation{{
				Action: &mutationrulesv3.HeaderMutation_RemoveOnMatch_{RemoveOnMatch: &mutationrulesv3.HeaderMutation_RemoveOnMatch{
					KeyMatcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x-toolmesh-"}},
				}},
			}}}),
		}}
	}
	lis := &listenerv3.Listener{
		Name: "toolmesh_mcp",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 10000}}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, h)},
		}}}},
	}
	if s.listenerLimit > 0 {
		lis.PerConnectionBufferLimitBytes = wrapperspb.UInt32(s.listenerLimit)
	}
	vh := &routev3.VirtualHost{Name: "mcp", Domains: []string{"*"}, Routes: s.routes}
	if s.vhost != nil {
		s.vhost(vh)
	}
	res := map[resourcev3.Type][]types.Resource{
		resourcev3.ListenerType: {lis},
		resourcev3.RouteType:    {&routev3.RouteConfiguration{Name: "routes", VirtualHosts: []*routev3.VirtualHost{vh}}},
	}
	for _, c := range s.clusters {
		res[resourcev3.ClusterType] = append(res[resourcev3.ClusterType], c)
	}
	for _, e := range s.endpoints {
		res[resourcev3.EndpointType] = append(res[resourcev3.EndpointType], e)
	}
	return res
}

// staticCluster is a STATIC cluster with one endpoint at addr ("ip:port").
func staticCluster(t testing.TB, name, addr string) *clusterv3.Cluster {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment:       cla(name, host, uint32(p)),
	}
}

func cla(name, host string, port uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}},
			}},
		}}}},
	}
}

// clusterHeaderRoute routes any request carrying the cluster header by it.
func clusterHeaderRoute() *routev3.Route {
	return &routev3.Route{
		Name: "by_cluster_header",
		Match: &routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
			Headers: []*routev3.HeaderMatcher{{Name: testClusterHeader,
				HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}},
		},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_ClusterHeader{ClusterHeader: testClusterHeader},
		}},
	}
}

// directRoute answers prefix with a direct response.
func directRoute(prefix string, status uint32, body string) *routev3.Route {
	dr := &routev3.DirectResponseAction{Status: status}
	if body != "" {
		dr.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}}
	}
	return &routev3.Route{
		Name:   "direct",
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_DirectResponse{DirectResponse: dr},
	}
}

// clusterRoute sends prefix to cluster.
func clusterRoute(prefix, cluster string, mod func(*routev3.RouteAction)) *routev3.Route {
	a := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}
	if mod != nil {
		mod(a)
	}
	return &routev3.Route{
		Name:   "to_" + cluster,
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
		Action: &routev3.Route_Route{Route: a},
	}
}

// jsonRPCMapper shapes local replies with the given flags into a JSON-RPC
// error with the id from dynamic metadata, the way toolmesh's listener does.
func jsonRPCMapper(flags ...string) *hcmv3.ResponseMapper {
	return &hcmv3.ResponseMapper{
		Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
			ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: flags}}},
		StatusCode: wrapperspb.UInt32(200),
		BodyFormatOverride: &corev3.SubstitutionFormatString{
			ContentType: "application/json",
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: `{"jsonrpc":"2.0","id":%DYNAMIC_METADATA(toolmesh:jsonrpc_id)%,"result":{"isError":true,"content":[{"type":"text","text":"%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%"}]}}`}}},
		},
	}
}

// env is a data plane under test behind a real HTTP server on 127.0.0.1.
type env struct {
	t   *testing.T
	dp  *DataPlane
	srv *httptest.Server
	ext *fakeExtProc
}

func newEnv(t *testing.T, fn processFunc, s setup) *env {
	t.Helper()
	e := &env{t: t}
	var opts Options
	if fn != nil {
		var cc *grpc.ClientConn
		e.ext, cc = startExtProc(t, fn)
		opts.ExtProcConn = cc
	}
	dp, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	if err := dp.Apply(s.resources(t)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	e.dp = dp
	e.srv = httptest.NewServer(dp)
	t.Cleanup(e.srv.Close)
	return e
}

// response is a completed client exchange.
type response struct {
	status int
	header http.Header
	body   string
}

func (e *env) do(method, path string, body string, hdr map[string]string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("read body: %v", err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

// Builders for ext_proc responses.

func set(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

func reqHeadersResp(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: cr}}}
}

func reqBodyResp(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
		RequestBody: &extprocv3.BodyResponse{Response: cr}}}
}

func respHeadersResp(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}}}
}

func respBodyResp(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{Response: cr}}}
}

// continueAll answers every message with an empty (CONTINUE) response.
func continueAll(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return reqHeadersResp(nil), nil
	case *extprocv3.ProcessingRequest_RequestBody:
		return reqBodyResp(nil), nil
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return respHeadersResp(nil), nil
	case *extprocv3.ProcessingRequest_ResponseBody:
		return respBodyResp(nil), nil
	}
	return nil, errors.New("unexpected message")
}

func metadataStruct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// headerValue returns the raw value of key in an ext_proc header map.
func headerValue(hm *corev3.HeaderMap, key string) (string, bool) {
	for _, h := range hm.GetHeaders() {
		if h.GetKey() == key {
			return string(h.GetRawValue()), true
		}
	}
	return "", false
}

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func edsConfig() *clusterv3.Cluster_EdsClusterConfig {
	return &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}}
}
