package rules

// Envoy's rules for the data plane's connections, router, retries and
// timeouts (see rules.go).

import "time"

// HTTP/2 connection keepalive of the data plane's gRPC connections (ADS and
// ext_proc), as the bootstraps' connection_keepalive on toolmesh_xds and
// toolmesh_extproc makes Envoy do (api config/core/v3/protocol.proto
// KeepaliveSettings; source/common/http/http2/codec_impl.cc ConnectionImpl):
//   - The constructor schedules the first PING at interval plus jitter
//     (onKeepaliveResponse), from the moment the connection exists, whether
//     or not a stream is open.
//   - sendKeepalive skips the PING while one is awaiting its ACK, otherwise
//     sends it (payload: milliseconds since the epoch) and arms the timeout.
//   - A PING ACK (onPing → onKeepaliveResponse) stops the timeout and
//     schedules the next PING at interval + random() % (interval_jitter% of
//     interval), so PINGs are never closer than interval.
//   - Any frame received other than a PING ACK re-arms a running timeout
//     (onBeforeFrameReceived: HOL blocking must not look like a dead peer).
//   - onKeepaliveResponseTimeout closes the connection (h2_ping_timeout);
//     its streams fail (Unavailable) and the next stream connects again.
//
// [choice] grpc-go's own client keepalive (keepalive.ClientParameters) is
// not used: it raises Time below 10s to 10s (dialoptions.go
// WithKeepaliveParams, internal.KeepaliveMinPingTime), pings only after
// Time without reading anything instead of on a fixed cadence, and has no
// jitter. The ADS and ext_proc connections are wrapped instead
// (keepalive.go pingConn): PINGs go out between grpc-go's
// frames, and their ACKs, recognised by payload, are taken out before
// grpc-go reads. Only ACKs of our own PINGs count as keepalive responses.
// connection_idle_interval (a PING before a new stream on an idle
// connection) is not emulated: the bootstraps do not set it. The settings'
// meaning and the 15% jitter default are in protocol.proto
// KeepaliveSettings at v1.40.0 [verify:
// source/common/http/http2/codec_impl.cc ConnectionImpl::sendKeepalive and
// onKeepaliveResponse: read on a recent envoyproxy/envoy main and in stored
// copies that predate 1.37 (their reasonToReset has no reset_with_error);
// no copy at v1.40.0 was available].
//
// ext_proc gRPC client connection. Envoy's ext_proc filter talks to its
// server through Envoy's own gRPC client (Grpc::AsyncClientImpl) over the
// cluster's HTTP/2 connection pool; the data plane uses grpc-go's client
// (dataplane.go New) with Envoy's windows and keepalive, and maps what the
// server can tell apart. Options.ExtProcConn may be any
// grpc.ClientConnInterface (tests inject their own).
//   - :authority is envoy_grpc.authority, else the cluster name
//     (grpc_service.proto EnvoyGrpc.authority at v1.40.0: "If this field
//     is not set, the authority header value will be cluster_name";
//     source/common/grpc/async_client_impl.cc AsyncStreamImpl::initialize;
//     xdsconfig ExtProcFilter.CallOptions). Envoy also sends x-envoy-internal and
//     x-forwarded-for (source/common/http/async_client_impl.cc
//     AsyncStreamImpl::sendHeaders) and no user-agent; grpc-go sends its
//     user-agent and neither of those [choice: the extproc server reads
//     none of them]. initial_metadata goes as headers.
//   - Receive limit: none unless max_receive_message_length is set
//     (api/envoy/config/core/v3/grpc_service.proto,
//     GrpcService.EnvoyGrpc.max_receive_message_length at v1.40.0:
//     "Defaults to 0, which means unlimited"); here grpc-go's largest, math.MaxInt32.
//   - Windows: stream 16 MiB and connection 24 MiB
//     (EnvoyHTTP2StreamWindow). Concurrent streams: Envoy opens at most
//     Http2ProtocolOptions.max_concurrent_streams on a connection
//     (protocol.proto at v1.40.0: "defaults to 1024 for safety ... For
//     upstream connections, this also limits how many streams Envoy will
//     initiate concurrently on a single connection. If the limit is
//     reached, Envoy may queue requests or establish additional
//     connections (as allowed per circuit breaker limits)"; 1024 since
//     1.36, down from 2^31-1, behind
//     envoy.reloadable_features.safe_http2_options; changelogs/1.40.0.yaml
//     removes that guard: "HTTP/2 connections now always fall back to the
//     safe defaults (max concurrent streams of 1024, 16 MiB initial stream
//     window and 24 MiB initial connection window) when the corresponding
//     options are unset"), and follows the server's
//     SETTINGS_MAX_CONCURRENT_STREAMS below that. The data plane's
//     ext_proc client (extProcPool in dataplane) opens another grpc-go
//     connection once every open one carries MaxConcurrentStreams streams;
//     grpc-go itself follows the server's setting on each (toolmesh's
//     server sets none). The cluster's max_connections circuit breaker
//     (1024) is not applied to this pool [choice: at 1024 streams each,
//     it would bind past a million concurrent requests]. An injected
//     Options.ExtProcConn is used as it is.
//   - Closing: ExternalProcessorStreamImpl::close
//     (source/extensions/filters/http/ext_proc/client_impl.cc) half-closes
//     and then resets the stream. Since 1.37 a reset goes out as RST_STREAM
//     INTERNAL_ERROR instead of NO_ERROR (changelogs/1.37.0.yaml,
//     behavior_changes, area http: "Changed the default reset code from
//     NO_ERROR to INTERNAL_ERROR", reverted by the runtime guard
//     envoy.reloadable_features.reset_with_error). The code is chosen by
//     reasonToReset, which ConnectionImpl::StreamImpl::resetStreamWorker
//     passes to SubmitRst; the stored copies read predate the guard and
//     answer NO_ERROR for a local reset [verify:
//     source/common/http/http2/codec_impl.cc reasonToReset and
//     ConnectionImpl::StreamImpl::resetStreamWorker: no copy with the
//     reset_with_error guard was available].
//     grpc-go's cancel sends CANCEL [choice]: a grpc-go server reports
//     either code to its handler alike, a cancelled stream context
//     (http2_server.go handleRSTStream).
//   - Statuses (extprocfilter Filter.envoyStatus): a connect failure is the router's
//     local reply, Unavailable with its body and response code details
//     appended (source/common/grpc/async_client_impl.cc enhancedGrpcMessage)
//     [inferred]; a reset stream, and a connection lost after the response
//     headers, are Internal: AsyncStreamImpl::onReset calls
//     streamError(Status::GrpcStatus::Internal) unless the stream was
//     already reset (source/common/grpc/async_client_impl.cc
//     AsyncStreamImpl::onReset: the same in every stored copy, from the v2
//     API to a recent one with enhancedGrpcMessage and
//     waiting_to_delete_on_remote_close_; the async client's change in 1.40,
//     changelogs/1.40.0.yaml bug_fixes area ext_proc, guards re-entrant
//     resets against notifying remote close twice and keeps the status);
//     grpc-go's Unavailable is kept for a connection lost before them (the
//     router's 503).
//   - Not emulated: retries (no retry_policy in the bootstraps), the
//     cluster's circuit breakers and idle_timeout on this connection, TLS.
const (
	// The bootstraps' interval and timeout (envoy/*.yaml, deploy/); Envoy
	// itself sends no PINGs without connection_keepalive.
	DefaultKeepaliveInterval = 30 * time.Second
	DefaultKeepaliveTimeout  = 5 * time.Second
	// protocol.proto KeepaliveSettings.interval_jitter: "The default value
	// is 15%."
	DefaultKeepaliveJitterPercent = 15.0
)

// The initial HTTP/2 stream and connection windows of Envoy's codec unless
// http2_protocol_options set them (api/envoy/config/core/v3/protocol.proto,
// Http2ProtocolOptions.initial_stream_window_size: "defaults to 16MiB",
// initial_connection_window_size: "The default is 24MiB"; changelog 1.36,
// down from 256 MiB); the bootstraps set none for toolmesh_extproc.
// Envoy's windows are static: unlike grpc-go's default dynamic window, it
// sends no BDP-estimation PINGs, and grpc-go sends none either once a
// window is set (dialoptions.go WithInitialWindowSize).
const (
	EnvoyHTTP2StreamWindow = 16 << 20
	EnvoyHTTP2ConnWindow   = 24 << 20
)

// MaxConcurrentStreams is Http2ProtocolOptions.max_concurrent_streams'
// default (protocol.proto at v1.40.0), the most streams Envoy opens on one
// HTTP/2 connection to an upstream such as the extproc server.
const MaxConcurrentStreams = 1024

// Upstream response header limits (api/envoy/config/core/v3/protocol.proto
// at v1.40.0, HttpProtocolOptions.max_response_headers_kb: "If
// unconfigured, the default is 60 KiB, except for HTTP/1 response headers
// which have a default of 80 KiB"; "Responses that exceed this limit will
// result in a HTTP 503 response"; max_headers_count: 100, "Upstream
// responses that exceed this limit will result in a HTTP 502 response").
// The cluster's own values are not emulated. net/http counts HTTP/1 header
// bytes as read and HTTP/2 ones as decoded field sizes; Envoy's HTTP/1 codec
// counts the names and values parsed so far (getHeadersSize: the current
// field and value plus the map's byteSize, no separators), which is not
// emulated [verify: source/common/http/http1/codec_impl.cc
// ConnectionImpl::checkMaxHeadersSize: read in stored copies, none at
// v1.40.0].
const (
	MaxResponseHeadersH1 = 80 << 10
	MaxResponseHeadersH2 = 60 << 10
)

// ResponseHeaderLimits are the limits (count, KiB) of a response header map
// that ext_proc's header mutations are checked against
// (MutationUtils::headerMutationResultCheck reads the map's own
// maxHeadersCount and maxHeadersKb): an upstream response's map carries its
// codec's limits, 80 KiB for HTTP/1 and 60 KiB otherwise (above) [inferred:
// the codec creates the map with its limits]; a local reply's (proto 0) the
// defaults.
func ResponseHeaderLimits(proto int) (count, kb int) {
	if proto == 1 {
		return DefaultMaxHeadersCount, MaxResponseHeadersH1 >> 10
	}
	return DefaultMaxHeadersCount, DefaultMaxHeadersKB
}

// MaxIdlePerHost bounds the idle upstream connections per endpoint [choice:
// Envoy keeps every connection the max_connections circuit breaker allows].
const MaxIdlePerHost = 64

// Router rules (source/common/router/router.cc, config_impl.cc):
//
//   - No route: 404, flag NR, details route_not_found, empty body.
//   - cluster_header: only the first value is used; a missing header gives an
//     empty cluster name. An unknown (or empty) cluster is a local reply with
//     RouteAction.cluster_not_found_response_code (route_components.proto
//     at v1.40.0: "The default response code is 503 Service Unavailable";
//     the older "Envoy will return a 404 response" sentence on
//     cluster_header, still there at v1.40.0, predates that field), flag
//     NC, details cluster_not_found, empty body (Filter::decodeHeaders:
//     setResponseFlag(NoClusterFound), then sendLocalReply with
//     clusterNotFoundResponseCode(), body "" and details ClusterNotFound)
//     [verify: source/common/router/router.cc Filter::decodeHeaders: read in
//     a stored copy with CoreResponseFlag and retryShadowBufferLimit, none
//     at v1.40.0].
//   - direct_response: a local reply (details direct_response) with the
//     route's response_headers_to_add.
//   - response_headers_to_add (route, virtual host, route configuration) on
//     an upstream response: added before the encoder filters run
//     (Filter::onUpstreamHeaders: route_entry_->finalizeResponseHeaders,
//     then callbacks_->encodeHeaders), so ext_proc's response_headers
//     message carries them (activestream.go encode).
//   - No healthy endpoint: 503, flag UH, body "no healthy upstream".
//   - Circuit breaker overflow (max_requests, max_pending_requests,
//     max_retries when a retry is wanted): 503, flag UO.
//   - Connect failure or timeout: 503, flag UF; connection closed before
//     response headers: 503, flag UC; stream reset (h2): 503, flag UR. Body
//     "upstream connect error or disconnect/reset before headers. [retried
//     and the latest ]reset reason: <reason>", details
//     upstream_reset_before_response_started{<reason>[|<why>]} with spaces
//     as '_'. Exhausted retries add URX. The transport failure reason <why>
//     left the body in 1.39 (changelogs/1.39.0.yaml, minor_behavior_changes,
//     area router: "The upstream transport failure reason (e.g. TLS
//     certificate validation errors) is no longer included in the HTTP
//     response body sent to downstream clients", runtime guard
//     envoy.reloadable_features.hide_transport_failure_reason_in_response_body)
//     and stays in the details. The emulation's body has no transport
//     failure reason (router.Call resetReply). [verify:
//     source/common/router/router.cc Filter::onUpstreamReset and
//     onUpstreamAbort, where the body is built: no stored copy has the 1.39
//     guard]
//   - Route timeout (default 15s, spanning all retries): 504, flag UT, body
//     "upstream request timeout", details upstream_response_timeout. The
//     router sends that local reply even after the upstream response headers
//     arrived (Router::onResponseTimeout → onUpstreamTimeoutAbort →
//     onUpstreamAbort); FilterManager::sendLocalReply then decides
//     (source/common/http/filter_manager.cc): no response headers yet → a
//     local reply through the encoder filters; headers received but not yet
//     sent downstream (an ext_proc filter holding them for a BUFFERED body)
//     → sendDirectLocalReply, which skips the filters but still applies
//     local_reply_config (local_reply_.rewrite); headers already sent → a
//     downstream reset. The local data plane starts the timer when the
//     router starts, which is when the request is complete except for
//     bodies over the buffer limit.
//   - Upstream reset after the response headers (connection closed or
//     stream reset mid-body, Router::onUpstreamReset): the same three-way
//     choice, with 503, the reset's flag, the "before headers" body text
//     and details upstream_reset_after_response_started{<reason>} (the
//     router has set downstream_response_started_).
//   - Request headers: request_headers_to_remove/add of route, virtual host
//     and route configuration in that order, host_rewrite_literal, prefix or
//     regex rewrite (x-envoy-original-path keeps the old path) and
//     x-envoy-expected-rq-timeout-ms, unless the router suppresses Envoy
//     headers.
//
// Retry conditions (source/common/router/retry_state_impl.cc):
// "5xx" retries 5xx responses and every reset/connect failure;
// "gateway-error" retries 502/503/504 and every reset/connect failure;
// "reset" retries resets and connect failures; "connect-failure" only
// connect failures; "reset-before-request" connect failures and resets
// before the request headers were encoded (wouldRetryFromReset with
// upstream_request_started: Filter::maybeRetryReset in router.cc reads
// first_upstream_tx_byte_sent, which UpstreamCodecFilter::decodeHeaders sets
// once the headers went to the codec) — here an HTTP/2 pooled connection
// net/http found closed before writing (errServerClosedIdle); an HTTP/1.1
// request written to a connection that then closes is started (see
// "Upstream connections"); "refused-stream" only REFUSED_STREAM resets;
// "retriable-4xx" 409; "retriable-status-codes" the listed codes. A retry is
// not attempted when the request body was larger than the buffer limit
// (the router stops buffering for retries). Back-off is full-jitter
// exponential from base_interval (25ms) up to max_interval (10x base).
//
// Upstream connections (xdsconfig NewTransport, cluster.go) are net/http's Transport,
// for HTTP/1.1 and HTTP/2, compared with Envoy's pools and codec client
// (source/common/http/http1/conn_pool.cc, source/common/http/codec_client.cc)
// [verify: source/common/http/http1/conn_pool.cc
// ConnPoolImpl::onResponseComplete: read on a recent envoyproxy/envoy main
// and in stored copies, the newest built on HttpConnPoolImplBase (a
// response complete before its request, a close header or a remote close
// closes the connection, otherwise it goes back to the pool); no copy at
// v1.40.0 was available]:
//   - HTTP/1.1: one request at a time per connection; a connection goes
//     back to the pool when its response is complete unless either side
//     asked to close (HeaderUtility::shouldCloseConnection), and a stream
//     reset before the response is complete closes it
//     (ConnPoolImpl::onDownstreamReset). net/http does the same.
//   - Idle connections close after the cluster's
//     common_http_protocol_options.idle_timeout (IdleConnTimeout; Envoy's
//     default 1h, 0 none); at most MaxIdlePerHost stay idle per endpoint.
//   - A connection that closes after the request was written and before any
//     response byte: 503, flag UC, "reset reason: connection termination"
//     (CodecClient::onEvent, Filter::onUpstreamReset); the route's retry
//     policy decides a retry (wouldRetryFromReset). [choice] net/http
//     itself resends a request on a reused connection that failed before
//     anything of it was written, or an idempotent one without a body;
//     Envoy resends neither. An MCP request is a POST with a body.
//   - A malformed response is reported the same way [choice: Envoy's codec
//     reports a protocol error, 502 UPE]; response headers over
//     MaxResponseHeadersH1 (HTTP/1) or MaxResponseHeadersH2 are 503 UPE
//     "protocol error" (router classifyUpstreamError).
//   - Interim 1xx responses other than 101 are read and dropped [choice:
//     Envoy's router passes them on (Filter::onUpstream1xxHeaders →
//     encode1xxHeaders), subject to the connection manager's
//     proxy_100_continue].

// Stream idle timeout (route_components.proto RouteAction.idle_timeout,
// which overrides http_connection_manager.proto stream_idle_timeout; 0
// disables): "Each time an encode/decode event for headers or data is
// processed for the stream, the timer will be reset. If the timeout fires,
// the stream is terminated with a 408 Request Timeout error code if no
// upstream response header has been received, otherwise a stream reset
// occurs" (source/common/http/conn_manager_impl.cc
// ActiveStream::onIdleTimeout; flag SI, details stream_idle_timeout). It
// is what bounds a FULL_DUPLEX_STREAMED response whose server stalls: no
// message timer runs in that mode, and once the upstream response is
// complete the router's timeout is gone too. The emulation arms it only
// there (extprocfilter duplexReader.step, re-armed by each upstream chunk and server
// message [inferred: Envoy re-arms it on the downstream stream's encode
// and decode events]); everywhere else net/http's server has its own
// timeouts. Upstream response headers have always been received on that
// path, so it resets the stream.
