package xds

import (
	"strconv"
	"time"

	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlyheadermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// Listener and HTTP connection manager settings:
//
//	field                               value
//	address                             Options.ListenAddress:ListenPort (0.0.0.0:10000)
//	per_connection_buffer_limit_bytes   Options.MaxResponseBytes (4 MiB): bounds buffered replies
//	hcm.stat_prefix                     toolmesh
//	hcm.codec_type                      AUTO (HTTP/1.1 and h2c)
//	hcm.rds                             wire.RouteConfigName over ADS
//	hcm.use_remote_address              true: x-forwarded-for gets the downstream peer
//	hcm.normalize_path, merge_slashes   true (public paths are matched exactly)
//	hcm.early_header_mutation           remove every client header starting with x-toolmesh-
//	hcm.http_filters                    ext_proc, router (router last)
//	hcm.local_reply_config              see localreply.go
//	ext_proc.failure_mode_allow         false: without ext_proc nothing may be routed
//	ext_proc.message_timeout            Options.MessageTimeout (5s; Envoy's default is 200ms)
//	ext_proc.processing_mode            request headers SEND, body BUFFERED, trailers SKIP;
//	                                    response headers SEND, body BUFFERED, trailers SKIP
//	ext_proc.allow_mode_override        true, only to response body STREAMED (rewritten
//	                                    streams) or NONE (streams passed through)
//	ext_proc.metadata_options           receiving_namespaces.untyped [toolmesh]
//	ext_proc.request_attributes         [connection.uri_san_peer_certificate] with
//	                                    Options.DownstreamTLS, else none
//	filter_chains[0].transport_socket   DownstreamTlsContext, require_client_certificate,
//	                                    with Options.DownstreamTLS, else none (plaintext)
const (
	statPrefix = "toolmesh"
	// earlyHeaderMutationName is the extension name of the early header
	// mutation that strips client-supplied x-toolmesh-* headers.
	earlyHeaderMutationName = "envoy.http.early_header_mutation.header_mutation"
)

func buildListener(opts Options) (*listenerv3.Listener, error) {
	hcm, err := buildHCM(opts)
	if err != nil {
		return nil, err
	}
	hcmAny, err := pack(hcm)
	if err != nil {
		return nil, err
	}
	chain := &listenerv3.FilterChain{
		Filters: []*listenerv3.Filter{{
			Name:       wellknown.HTTPConnectionManager,
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcmAny},
		}},
	}
	if opts.DownstreamTLS != nil {
		if chain.TransportSocket, err = downstreamTransportSocket(opts.DownstreamTLS); err != nil {
			return nil, err
		}
	}
	return &listenerv3.Listener{
		Name:    wire.ListenerName,
		Address: socketAddress(opts.ListenAddress, opts.ListenPort),
		// Bounds a buffered Tool Service reply (request bodies have their own
		// limit on the virtual host).
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(uint32(opts.MaxResponseBytes)),
		FilterChains:                  []*listenerv3.FilterChain{chain},
	}, nil
}

// stripOwnHeaders is the listener's early header mutation: it removes every
// client-supplied header with toolmesh's prefix. A prefix match covers every
// header toolmesh owns, including ones added later, so a client can never
// pre-set a routing decision.
func stripOwnHeaders() *earlyheadermutationv3.HeaderMutation {
	return &earlyheadermutationv3.HeaderMutation{
		Mutations: []*mutationrulesv3.HeaderMutation{{
			Action: &mutationrulesv3.HeaderMutation_RemoveOnMatch_{
				RemoveOnMatch: &mutationrulesv3.HeaderMutation_RemoveOnMatch{
					KeyMatcher: &matcherv3.StringMatcher{
						MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: wire.HeaderPrefix},
						IgnoreCase:   true,
					},
				},
			},
		}},
	}
}

func buildHCM(opts Options) (*hcmv3.HttpConnectionManager, error) {
	early, err := pack(stripOwnHeaders())
	if err != nil {
		return nil, err
	}
	extProc, err := pack(buildExtProc(opts))
	if err != nil {
		return nil, err
	}
	router, err := pack(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	tracing, err := buildTracing(opts)
	if err != nil {
		return nil, err
	}
	return &hcmv3.HttpConnectionManager{
		Tracing:    tracing, // nil unless Options.EnvoyTracing (envoytracing.go)
		StatPrefix: statPrefix,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: wire.RouteConfigName,
			ConfigSource:    adsConfigSource(),
		}},
		// Envoy is the first proxy toolmesh trusts in both modes: append the
		// downstream peer to x-forwarded-for and judge internal/external by
		// the connection, never by a client-supplied x-forwarded-for
		// (docs/operators.md).
		UseRemoteAddress: wrapperspb.Bool(true),
		// No downstream address is internal, so Envoy removes every
		// client-supplied x-envoy-retry-on, x-envoy-max-retries,
		// x-envoy-upstream-rq-timeout-ms (and the other x-envoy-* request
		// headers it honours) before the router reads them: tool calls keep
		// the timeouts and retries xds programs. Envoy strips them from every
		// request that is not internal (source/common/http/
		// conn_manager_utility.cc, ConnectionManagerUtility::
		// mutateRequestHeaders); the field being set, with no CIDR range,
		// makes that hold whatever the runtime guard
		// envoy.reloadable_features.explicit_internal_address_config says
		// (its default, since 1.33, is the same: no address is internal).
		InternalAddressConfig: &hcmv3.HttpConnectionManager_InternalAddressConfig{},
		// A client's own x-forwarded-client-cert never reaches a Tool
		// Service (Envoy's default, made explicit; mutateXfccRequestHeader
		// there removes it under SANITIZE).
		ForwardClientCertDetails: hcmv3.HttpConnectionManager_SANITIZE,
		// Request hardening: the route key comes from the path alone, so the
		// path Envoy routes on must be the path the extproc server sees.
		NormalizePath:                wrapperspb.Bool(true),
		MergeSlashes:                 true,
		PathWithEscapedSlashesAction: hcmv3.HttpConnectionManager_REJECT_REQUEST, // %2F, %5C → 400
		// MCP requests carry a handful of headers; bound what a client can
		// make Envoy hold before ext_proc even runs (with room for the
		// headers added before ext_proc re-checks the count).
		MaxRequestHeadersKb: wrapperspb.UInt32(maxRequestHeadersKB),
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{
			MaxHeadersCount:              wrapperspb.UInt32(maxRequestHeaders),
			HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_DROP_HEADER, // no x_toolmesh_cluster aliases
			IdleTimeout:                  durationpb.New(downstreamIdleTimeout),
		},
		// A client must send its headers promptly (slowloris).
		RequestHeadersTimeout: durationpb.New(requestHeadersTimeout),
		EarlyHeaderMutationExtensions: []*corev3.TypedExtensionConfig{{
			Name:        earlyHeaderMutationName,
			TypedConfig: early,
		}},
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: wire.ExtProcFilterName, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: extProc}},
			{Name: wellknown.Router, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}},
		},
		LocalReplyConfig: buildLocalReplyConfig(opts),
	}, nil
}

// Downstream limits of the MCP listener.
//
// max_headers_count is checked twice: by the codec on the client's headers,
// and by ext_proc after each header mutation on the whole request header
// map (MutationUtils::headerMutationResultCheck in
// source/extensions/filters/http/ext_proc/mutation_utils.cc), which by then
// also holds the pseudo headers (:method, :path, :scheme), what the HCM
// adds (x-request-id, x-forwarded-proto, x-forwarded-for, at most
// x-envoy-external-address) and what the extproc server adds to a routed
// tools/call (x-toolmesh-cluster, -route, -tool, -tool-version, plus any
// filter headers). A limit of 64 therefore failed calls from clients that
// sent about 55 headers with a 500. The limit is the client budget plus a
// reserve for those additions, so a client with up to maxClientHeaders
// headers is always served.
const (
	maxRequestHeadersKB = 32
	// maxClientHeaders is what a client may send and still be routed.
	maxClientHeaders = 64
	// routingHeaderReserve covers the headers added before ext_proc's check
	// (3 pseudo, up to 4 from the HCM, 4 routing headers) with room for
	// filter-added headers.
	routingHeaderReserve  = 32
	maxRequestHeaders     = maxClientHeaders + routingHeaderReserve
	downstreamIdleTimeout = 5 * time.Minute
	requestHeadersTimeout = 10 * time.Second
)

func buildExtProc(opts Options) *extprocfilterv3.ExternalProcessor {
	mode := &extprocfilterv3.ProcessingMode{
		RequestHeaderMode:   extprocfilterv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocfilterv3.ProcessingMode_BUFFERED,
		RequestTrailerMode:  extprocfilterv3.ProcessingMode_SKIP,
		ResponseHeaderMode:  extprocfilterv3.ProcessingMode_SEND,
		ResponseBodyMode:    extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
	}
	// The extproc server switches the response body to STREAMED (a stream it
	// rewrites) or NONE (one that passes unchanged) when a Tool Service
	// answers with a stream; nothing else may change. Envoy
	// (>= 1.34, ext_proc.cc effectiveModeOverride) fills the server's
	// override in from processing_mode before it compares it with this list
	// enum for enum (all fields but request_header_mode), so the entry must
	// be the whole effective mode: an entry naming response_body_mode alone
	// would never match and the override would be ignored.
	streamed := proto.Clone(mode).(*extprocfilterv3.ProcessingMode)
	streamed.ResponseBodyMode = extprocfilterv3.ProcessingMode_STREAMED
	var attrs []string
	if opts.DownstreamTLS != nil {
		// The caller's SPIFFE ID, on the request_headers message
		// (downstreamtls.go); without a peer certificate it cannot exist.
		attrs = []string{MeshIDAttribute}
	}
	// An event stream that passes unchanged needs no ext_proc message per
	// chunk: the server switches the response body to NONE.
	passThrough := proto.Clone(mode).(*extprocfilterv3.ProcessingMode)
	passThrough.ResponseBodyMode = extprocfilterv3.ProcessingMode_NONE
	// A federated server's event stream that the gateway must be able to
	// end itself, before the route timeout, with a final result
	// (docs/decisions/0013-federated-stream-deadline.md): the server then
	// streams the body back and may end it on its own. Envoy honours an
	// override to FULL_DUPLEX_STREAMED when the configured mode is not
	// that mode (ext_proc.cc onReceiveMessage); processing_mode.proto asks
	// for trailers SEND in it. The same entry serves the override in the
	// request-headers reply (routes with federated servers): request
	// header mode is not compared, and the rest is this effective mode.
	duplex := proto.Clone(mode).(*extprocfilterv3.ProcessingMode)
	duplex.ResponseBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	duplex.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SEND
	return &extprocfilterv3.ExternalProcessor{
		RequestAttributes: attrs,
		GrpcService: &corev3.GrpcService{
			// No grpc_service.timeout: it would bound the whole stream, that is
			// the whole HTTP request including the Tool Service's answer.
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: wire.ExtProcCluster},
			},
			// Tells the extproc server, on every stream, what this listener
			// allows (wire.ListenerLevelMetadata): Envoy's gRPC client
			// sends grpc_service.initial_metadata as request headers of each
			// stream (source/common/grpc/async_client_impl.cc
			// AsyncStreamImpl::initialize, metadata_parser_).
			InitialMetadata: []*corev3.HeaderValue{{
				Key: wire.ListenerLevelMetadata, Value: strconv.Itoa(wire.ListenerLevel),
			}},
		},
		FailureModeAllow:     false,
		MessageTimeout:       durationpb.New(opts.MessageTimeout),
		StatPrefix:           statPrefix,
		ProcessingMode:       mode,
		AllowModeOverride:    true,
		AllowedOverrideModes: []*extprocfilterv3.ProcessingMode{streamed, passThrough, duplex},
		// Dynamic metadata from the server is dropped unless its namespace is
		// listed; local_reply_config reads the JSON-RPC id from it.
		MetadataOptions: &extprocfilterv3.MetadataOptions{
			ReceivingNamespaces: &extprocfilterv3.MetadataOptions_MetadataNamespaces{
				Untyped: []string{wire.MetadataNamespace},
			},
		},
	}
}

func adsConfigSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      corev3.SocketAddress_TCP,
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}
