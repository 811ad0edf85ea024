// Package rules is the single place where the Envoy behaviour emulated by
// the local data plane is written down: this file (the connection manager,
// local replies, defaults), rules_upstream.go (connections, router, retries,
// timeouts) and rules_extproc.go (the ext_proc filter), with the constants
// and checks the other data-plane packages apply. A reference
// `rules.go, "Section"` names a section in one of the three. Every rule
// names the Envoy source file, proto comment or document it follows (paths
// are relative to the envoyproxy/envoy repository, protos to
// data-plane-api), so the set can be re-checked against a real Envoy. Rules
// marked [inferred] were derived from reading the source, not observed on a
// binary; rules marked [choice] are deliberate decisions where Envoy
// versions differ; [verify: <file> <function>: <why>] names the Envoy source
// still to be read at the pinned version and what was read instead. No copy
// of Envoy's C++ at the v1.40.0 tag was available to read; the newest read
// are from the 1.37 range or older. The gap is covered by the v1.40.0
// protos and by changelogs/1.37.0.yaml, 1.38.0.yaml, 1.39.0.yaml and
// 1.40.0.yaml, read whole: they record no change to what an open marker
// covers beyond what that rule itself cites.
package rules

import (
	"crypto/tls"
	"strings"
	"time"
)

// Defaults taken from the Envoy API protos.
const (
	// ext_proc.proto message_timeout: "If not set, the default is 200 milliseconds."
	DefaultMessageTimeout = 200 * time.Millisecond
	// listener.proto per_connection_buffer_limit_bytes: default 1MiB. It is the
	// decoder/encoder buffer limit unless the route or virtual host sets
	// request_body_buffer_limit (route_components.proto).
	DefaultBufferLimit = 1 << 20
	// route_components.proto RouteAction.timeout: "defaults to 15 seconds";
	// 0 disables it.
	DefaultRouteTimeout = 15 * time.Second
	// cluster.proto connect_timeout: "If not set, a default value of 5s will be used."
	DefaultConnectTimeout = 5 * time.Second
	// protocol.proto HttpProtocolOptions.idle_timeout (a cluster's or the
	// HTTP connection manager's common_http_protocol_options, idle.go):
	// "If not specified, this defaults to
	// 1 hour. To disable idle timeouts explicitly set this to 0."
	DefaultIdleTimeout = time.Hour
	// http_connection_manager.proto stream_idle_timeout: "If not specified,
	// this defaults to 5 minutes"; 0 disables it.
	DefaultStreamIdleTimeout = 5 * time.Minute
	// circuit_breaker.proto thresholds defaults.
	DefaultMaxConnections = 1024
	DefaultMaxPending     = 1024
	DefaultMaxRequests    = 1024
	DefaultMaxRetries     = 3
	// cluster.proto CommonLbConfig.healthy_panic_threshold: "If not
	// specified, the default is 50%. To disable panic mode, set to 0%."
	DefaultPanicThreshold  = 50.0
	DefaultNumRetries      = 1 // route_components.proto RetryPolicy.num_retries default
	DefaultRetryBase       = 25 * time.Millisecond
	DefaultRetryMaxFactor  = 10 // max_interval defaults to 10 x base_interval
	defaultImmediateStatus = 200
	// source/common/http/headers.h: Headers::get().prefix() is "x-envoy"
	// unless the bootstrap changes header_prefix.
	envoyHeaderPrefix = "x-envoy"
	// Http::DEFAULT_MAX_HEADERS_COUNT and DEFAULT_MAX_REQUEST_HEADERS_KB
	// (envoy/http/codec.h): the header limits of a map no configuration
	// sets (a local reply's). At v1.40.0 they are still 100 and 60 KiB:
	// api/envoy/config/core/v3/protocol.proto HttpProtocolOptions.
	// max_headers_count ("If unconfigured, the default maximum number of
	// headers allowed is 100") and http_connection_manager.proto
	// max_request_headers_kb ("If unconfigured, the default max request
	// headers allowed is 60 KiB"), read in go-control-plane/envoy v1.40.0.
	// (A later Envoy raises both, to 1000 and 128, for CVE-2026-47774; v1.40
	// does not have that.)
	DefaultMaxHeadersCount = 100
	DefaultMaxHeadersKB    = 60
	// ext_proc.cc ErrorPrefix.
	extProcErrorPrefix = "ext_proc_error"
	// HCM server_name default.
	DefaultServerName = "envoy"
	// Unspecified value of a command operator in a text format
	// (substitution_formatter.cc DefaultUnspecifiedValueStringView).
	UnspecifiedValue = "-"
)

// Response codes details, bodies and flags of the local replies Envoy's
// router and filter manager send (source/common/stream_info/utility.h
// ResponseCodeDetailValues; source/common/router/router.cc;
// source/common/http/filter_manager.cc).
const (
	DetailsRouteNotFound      = "route_not_found"
	DetailsClusterNotFound    = "cluster_not_found"
	DetailsNoHealthyUpstream  = "no_healthy_upstream"
	DetailsUpstreamTimeout    = "upstream_response_timeout"
	DetailsPerTryTimeout      = "upstream_per_try_timeout"
	DetailsDirectResponse     = "direct_response"
	DetailsRequestTooLarge    = "request_payload_too_large"
	DetailsResponseTooLarge   = "response_payload_too_large"
	DetailsMessageTimeout     = extProcErrorPrefix + "_per-message_timeout_exceeded"
	DetailsStreamIdleTimeout  = "stream_idle_timeout"
	DetailsResetBeforeStarted = "upstream_reset_before_response_started"
	DetailsResetAfterStarted  = "upstream_reset_after_response_started"

	BodyNoHealthyUpstream = "no healthy upstream"
	BodyUpstreamTimeout   = "upstream request timeout"
	BodyPayloadTooLarge   = "Payload Too Large"               // CodeUtility::toString(413)
	BodyInternalError     = "Internal Server Error"           // CodeUtility::toString(500)
	BodyBadRequest        = "Bad Request"                     // CodeUtility::toString(400)
	BodyHeadersTooLarge   = "Request Header Fields Too Large" // CodeUtility::toString(431)
)

// ResponseFlags is the set of Envoy response flags of one stream.
type ResponseFlags uint32

// The flags in StreamInfo::CoreResponseFlag order
// (envoy/stream_info/stream_info.h), which is the order %RESPONSE_FLAGS%
// prints them in (source/common/stream_info/utility.cc).
const (
	flagLH ResponseFlags = 1 << iota
	FlagUH
	FlagUT
	flagLR
	FlagUR
	FlagUF
	FlagUC
	FlagUO
	FlagNR
	flagDI
	flagFI
	flagRL
	flagUAEX
	flagRLSE
	flagDC
	FlagURX
	FlagSI
	flagIH
	flagDPE
	flagUMSDR
	flagRFCF
	flagNFCF
	flagDT
	FlagUPE
	FlagNC
	flagOM
	flagDF
	flagDO
	flagDR
)

var ResponseFlagNames = []string{
	"LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE",
	"DC", "URX", "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF",
	"DO", "DR",
}

// String renders the flags the way %RESPONSE_FLAGS% does: short names joined
// by commas, "" when none is set.
func (f ResponseFlags) String() string {
	var b strings.Builder
	for i, name := range ResponseFlagNames {
		if f&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
	}
	return b.String()
}

// ParseResponseFlag maps a short flag name (response_flag_filter) to its bit.
func ParseResponseFlag(name string) (ResponseFlags, bool) {
	for i, n := range ResponseFlagNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// Local replies and ext_proc. Envoy 1.34 (CVE-2025-30157, runtime guard
// envoy.reloadable_features.skip_ext_proc_on_local_reply) kept local
// replies from the ext_proc server: Filter::onLocalReply in
// source/extensions/filters/http/ext_proc/ext_proc.h set
// processing_complete_, and Filter::encodeHeaders (ext_proc.cc) sends
// response headers only while !processing_complete_. Envoy PR #41769
// ("ext_proc: re-enable sending local replies to the ext_proc server",
// 1.37) removed that override: the Filter class of later ext_proc.h (read
// in a tree that already has StreamedImmediateResponse) declares no
// onLocalReply, and ext_proc.cc encodeHeaders calls mergePerRouteConfig
// "in case the decodeHeaders() is not called when processing local reply".
// So in Envoy 1.40 a router local reply raised while no response headers
// exist (DownstreamFilterManager::sendLocalReply →
// sendLocalReplyViaFilterChain, source/common/http/filter_manager.cc) is
// built by Utility::sendLocalReply (source/common/http/utility.cc):
// modify_headers (the route's response headers), then local_reply_config
// (LocalReplyImpl::rewrite, source/common/local_reply/local_reply.cc: the
// first matching mapper applies body, headers_to_add and status_code, which
// %RESPONSE_CODE% then reports; a non-empty body gets content-length and,
// when no content-type is set or the body changed without the mapper
// setting a content-type, the format's content type; an empty body loses
// both), then encodeHeaders(nullptr, ...) through every encoder filter: an
// ext_proc filter whose processing is not complete sends those reshaped
// headers (and, per its response body mode, the body) to its server, with
// no x-envoy-upstream-service-time (the router adds that only to proxied
// responses, router.cc onUpstreamHeaders). ext_proc's own replies
// (ImmediateResponse, gRPC error, message timeout, spurious message) set
// processing_complete_ before sendLocalReply and skip the filter. Whether
// the removal also covers the downstream filter, not only the upstream
// filter chain the PR names, was read from the source, not run [verify:
// source/extensions/filters/http/ext_proc/ext_proc.h class Filter (no
// onLocalReply) and ext_proc.cc Filter::encodeHeaders: no stored copy at
// v1.40.0].
// The local data plane sends the router's replies (upstream timeout,
// reset, overflow, no healthy upstream, unknown cluster, no route, direct
// responses: all callbacks_->sendLocalReply in router.cc
// Filter::decodeHeaders and the upstream callbacks) via the filter chain
// (activestream.go sendLocalReply, viaFilterChain); its other local replies (413
// over the buffer limit) still go out directly without ext_proc, which
// toolmesh's extproc server, answering such requests itself, does not
// observe. A local reply once response headers exist but
// were not sent (a filter holding them for a BUFFERED body) goes out
// directly (sendDirectLocalReply), bypassing the filters. The codec and
// path-normalization replies of checkDownstream also go through the HCM
// local_reply_config (localreply.go).
//
// ext_proc grpc_service.initial_metadata goes as request metadata on every
// ext_proc stream: Envoy's gRPC client adds it to the stream's headers
// (source/common/grpc/async_client_impl.cc AsyncStreamImpl::initialize,
// metadata_parser_ built from initial_metadata; extprocfilter stream.go open).
//
// ext_proc stream ends (source/extensions/filters/http/ext_proc/ext_proc.cc
// Filter::onGrpcError, onGrpcClose, onMessageTimeout, onReceiveMessage and
// handleErrorResponse, read in a stored copy that already has the 1.37
// runtime guard ext_proc_stream_close_optimization; changelogs/1.37.0.yaml
// to 1.40.0.yaml change none of these replies (1.39.0 only routes a failure
// to create the gRPC client through onGrpcError with INTERNAL);
// status_on_error and its default 500 are in ext_proc.proto at v1.40.0).
// That copy predates the streaming local reply (envoyproxy/envoy PR #42424,
// "[ext_proc] Add streaming local response", merged 2025-12-05, in 1.37:
// changelogs/1.37.0.yaml new_features, area ext_proc), which Envoy 1.40
// serves: a StreamedImmediateResponse headers_response answering the request
// headers starts a local reply, body_response and trailers_response messages
// continue it, and a body is allowed only in the NONE and
// FULL_DUPLEX_STREAMED request body modes (external_processor.proto at
// v1.40.0, ProcessingResponse.streamed_immediate_response: "Presently only
// the FULL_DUPLEX_STREAMED or NONE body modes are supported"). Otherwise it
// is a spurious message with its own details: a headers_response without
// end_of_stream in another body mode gives
// streaming_local_response_body_is_only_supported_in_NONE_or_FULL_DUPLEX_STREAMED_modes,
// a body or trailers before the headers
// local_response_body_received_before_headers or
// local_response_trailers_received_before_headers, a typed response once the
// local reply started spurious_message (all read in
// test/extensions/filters/http/ext_proc/filter_local_reply_streaming_test.cc,
// StreamingLocalReplyTest) [verify:
// source/extensions/filters/http/ext_proc/ext_proc.cc
// Filter::onReceiveMessage, its streamed_immediate_response case: the stored
// ext_proc.cc copies found predate PR #42424]. [choice] Not emulated: the local
// data plane treats any StreamedImmediateResponse as an unhandled message
// (SpuriousKind: status_on_error with details unhandled_message, or continue
// with failure_mode_allow), which toolmesh's extproc server, never sending
// one, does not observe. Every
// details string goes through StringUtil::replaceAllEmptySpace in
// sendImmediateResponse:
//   - gRPC error status while processing: onGrpcError — status_on_error
//     (default 500) with details ext_proc_error_gRPC_error_<code>{<message>}
//     (grpcErrorDetails), or continue without the server when
//     failure_mode_allow.
//   - message_timeout: onMessageTimeout — 504 (always GatewayTimeout, not
//     status_on_error), details ext_proc_error_per-message_timeout_exceeded,
//     or continue when failure_mode_allow.
//   - clean end by the server (status OK): onGrpcClose, which is
//     onGrpcCloseWithStatus(Aborted) — processing completes and the request
//     continues without the server, whatever failure_mode_allow says.
//   - spurious message (a response of the wrong kind or out of order, one
//     without a known response such as a standalone mode_override, an
//     ImmediateResponse with disable_immediate_response, streamed_response
//     outside FULL_DUPLEX_STREAMED): onReceiveMessage's FailedPrecondition
//     branch. With failure_mode_allow (or the runtime guard
//     ext_proc_fail_close_spurious_resp off) the stream is closed and the
//     request continues; otherwise handleErrorResponse sends a local reply
//     with status_on_error (default 500) and the status message as details:
//     "spurious_message", "unhandled_message", … (the spurious* constants).
//     Dynamic metadata of a typed response is stored before its handler
//     finds it out of order.
//   - any other error in applying a response (a mutation failing with
//     disallow_is_error, the header limits below, the content-length
//     mismatch): handleErrorResponse, status_on_error with the error text as
//     details.
//   - header mutation limits (MutationUtils::applyHeaderMutations,
//     mutation_utils.cc): before anything is applied, more remove_headers
//     or more set_headers than the map's max_headers_count is refused
//     ("Header mutation remove header count <r> or set header count <s>
//     exceed the HCM header countlimit <n>"); after the mutation the map,
//     pseudo-headers included, must hold at most max_headers_count entries
//     and max_headers_kb KiB of keys plus values ("Header mutation causes
//     end result header count <c> or header size <b> bytes, exceeding the
//     count limit <n> or the size limit <k> kilobytes"). Request headers
//     carry the HCM's limits, upstream response headers the codec's
//     (headerLimits). Envoy 1.37 replaced the mutation error texts with a
//     fixed set ("Use one of a hard-coded set of error messages when a
//     HeaderMutation fails", version history 1.37.0); the texts here are
//     the earlier ones [verify:
//     source/extensions/filters/http/ext_proc/mutation_utils.cc
//     MutationUtils::applyHeaderMutations, responseHeaderSizeCheck and
//     headerMutationResultCheck: the stored copies found have the pre-1.37
//     texts].
//   - an ImmediateResponse on the response path is honoured too: Envoy's
//     sendLocalReply replaces the held response headers while the response
//     has not started (FilterManager::sendDirectLocalReply). toolmesh only
//     sends them on the request path
//     (docs/decisions/0001-ext-proc-architecture.md).
//
// HTTP connection manager request handling, in this order
// (ConnectionManagerImpl::ActiveStream::decodeHeaders): normalize_path and
// merge_slashes (maybeNormalizePath), early_header_mutation_extensions,
// proxy-header cleanup and x-request-id / x-forwarded-proto
// (mutateRequestHeaders), route selection (cached), then the filter chain.
// The route matched then fixes each filter's per-route config
// (mergePerRouteConfig runs in each filter's decodeHeaders) and the request
// buffer limit. Responses get server: envoy (server_header_transformation
// OVERWRITE) and, from the router, x-envoy-upstream-service-time.
//
// Route header matchers (RouteMatch.headers, HeaderMatcher) match each value
// of a header sent several times on its own: changelogs/1.39.0.yaml
// (minor_behavior_changes, area http, runtime guard
// envoy.reloadable_features.match_headers_individually, on by default):
// "Such headers are now matched individually, so a rule matching admin
// matches, and a rule matching user,admin no longer does" (the change
// applies everywhere HeaderMatcher is used). Before 1.39 the values were
// joined with "," (HeaderUtility::getAllOfHeaderAsString). The emulation
// (xdsconfig headerMatcher) matches when one value does and then applies
// invert_match to that result (route_components.proto at v1.40.0: "the
// match result will be inverted before checking"); present_match and
// treat_missing_header_as_empty look at the header as a whole [inferred]
// [verify: source/common/http/header_utility.cc HeaderUtility::matchHeaders,
// how they combine with per-value matching: no stored copy has the 1.39
// guard; changelogs/1.40.0.yaml only latches it when the matcher is built].
// toolmesh's routes match one header, the
// cluster header its extproc server sets to a single value (xds/routes.go,
// registry.ClusterHeader), where every reading agrees.

// Not emulated (Apply rejects the configuration, or the field is ignored as
// noted): ext_proc observability_mode, FULL_DUPLEX_STREAMED as the
// configured mode, the GRPC body mode, send_body_without_waiting_for_header_response (ignored), CEL
// request/response attributes (ignored), typed_dynamic_metadata (ignored),
// trailers (never sent), http_service, per-route grpc_service (every filter
// uses Options.ExtProcTarget); active health checks and outlier detection
// (an endpoint is healthy unless its EDS health_status says otherwise; panic
// mode is emulated, see cluster.pickHosts); load balancing weights and policies other
// than round robin; auto_sni; HTTP/3 upstreams; redirects; upstream HTTP
// filters; other HTTP filters unless is_optional; json_format body formats
// (toolmesh's local_reply_config mappers use text formats); route paths
// other than prefix and path, query parameter matches, and the deprecated
// HeaderMatcher fields that string_match replaces. STREAMED request bodies are
// collected before they go upstream (each chunk is still exchanged with the
// server as it is read); STREAMED response bodies flow chunk by chunk. The
// streaming local reply (StreamedImmediateResponse, above). Envoy 1.40's
// QUERY rule (changelogs/1.40.0.yaml minor_behavior_changes, area http,
// runtime guard envoy.reloadable_features.http1_allow_query_method: the
// HTTP/1 codec forwards QUERY, and a QUERY without Content-Type is a 400
// with details query_missing_content_type on every protocol): the local
// data plane forwards every method net/http parses, QUERY included, and
// does not check its Content-Type; MCP requests are POSTs.

// Response headers on the wire (source/common/http/http1/codec_impl.cc,
// StreamEncoderImpl::encodeHeadersBase): headers encoded without end_stream
// are flushed at once (connection_.flushOutput()), before any body; writes
// of one event-loop pass coalesce. So a response whose body is still
// streaming (passed through, or STREAMED through ext_proc) reaches the
// client with its headers before its first byte, as an idle event stream
// needs; a body Envoy already holds whole (a local reply, a BUFFERED body)
// goes out with its headers. The local data plane flushes the headers of
// the first kind (activeStream.write). HTTP/2 sends a HEADERS frame at once
// likewise. encodeHeadersBase ends with endEncode() for end_stream and
// flushOutput() otherwise, which writes the connection's output buffer
// [verify: source/common/http/http1/codec_impl.cc
// StreamEncoderImpl::encodeHeadersBase: read in stored copies, the newest
// with encode1xxHeaders and bodiless_request; none at v1.40.0]

// Downstream request checks (codec limits, underscores, escaped slashes):
// xdsconfig hcmConfig.CheckDownstream (hcmcheck.go).

// Downstream TLS: the listener's filter chain transport_socket
// envoy.transport_sockets.tls with a DownstreamTlsContext
// (api/envoy/extensions/transport_sockets/tls/v3/tls.proto), compiled by
// xdsconfig compileDownstreamTLS (listener_tls.go):
//   - tls_certificates are the server certificate; trusted_ca of the
//     validation context is the client CA list. With a CA, the server
//     verifies a client certificate the client sends; with
//     require_client_certificate it also fails the handshake without one
//     (DefaultCertValidator::addClientValidationContext sets
//     SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
//     source/common/tls/cert_validator/default_validator.cc [verify:
//     source/common/tls/cert_validator/default_validator.cc
//     DefaultCertValidator::addClientValidationContext: read in an older
//     copy under source/extensions/transport_sockets/tls, none at v1.40.0];
//     the verify-if-given mode without require is [inferred]).
//   - Envoy's TLS defaults: TLS 1.2 minimum (tls.proto TlsParameters).
//   - A plaintext request on a TLS listener never reaches the HTTP
//     connection manager: the handshake fails and the connection closes.
//
// [choice] The local data plane's downstream is HTTP/1.1 only (ADR 0002),
// so of alpn_protocols it offers http/1.1 alone; SDS, SNI-based chains,
// SAN/hash/SPKI/CRL checks of client certificates are rejected as not
// emulated. The listener socket is served with DataPlane.TLSConfig.
func DownstreamALPN(configured []string) []string {
	if len(configured) == 0 {
		return nil // Envoy negotiates no ALPN
	}
	return []string{"http/1.1"}
}

// DownstreamClientAuth is the client-certificate mode of a listener with a
// trusted CA.
func DownstreamClientAuth(require bool) tls.ClientAuthType {
	if require {
		return tls.RequireAndVerifyClientCert
	}
	return tls.VerifyClientCertIfGiven
}
