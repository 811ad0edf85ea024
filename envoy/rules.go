package envoy

// This file is the single place where the Envoy behaviour emulated by the
// local data plane is written down. Every rule names the Envoy source file,
// proto comment or document it follows (paths are relative to the
// envoyproxy/envoy repository, protos to data-plane-api), so the set can be
// re-checked against a real Envoy. Rules marked [inferred] were derived from
// reading the source, not observed on a binary; rules marked [choice] are
// deliberate decisions where Envoy versions differ.

import (
	"crypto/tls"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Defaults taken from the Envoy API protos.
const (
	// ext_proc.proto message_timeout: "If not set, the default is 200 milliseconds."
	defaultMessageTimeout = 200 * time.Millisecond
	// listener.proto per_connection_buffer_limit_bytes: default 1MiB. It is the
	// decoder/encoder buffer limit unless the route or virtual host sets
	// request_body_buffer_limit (route_components.proto).
	defaultBufferLimit = 1 << 20
	// route_components.proto RouteAction.timeout: "defaults to 15 seconds";
	// 0 disables it.
	defaultRouteTimeout = 15 * time.Second
	// cluster.proto connect_timeout: "If not set, a default value of 5s will be used."
	defaultConnectTimeout = 5 * time.Second
	// protocol.proto HttpProtocolOptions.idle_timeout (a cluster's
	// common_http_protocol_options): "If not specified, this defaults to
	// 1 hour. To disable idle timeouts explicitly set this to 0."
	defaultIdleTimeout = time.Hour
	// http_connection_manager.proto stream_idle_timeout: "If not specified,
	// this defaults to 5 minutes"; 0 disables it.
	defaultStreamIdleTimeout = 5 * time.Minute
	// circuit_breaker.proto thresholds defaults.
	defaultMaxConnections = 1024
	defaultMaxPending     = 1024
	defaultMaxRequests    = 1024
	defaultMaxRetries     = 3
	// cluster.proto CommonLbConfig.healthy_panic_threshold: "If not
	// specified, the default is 50%. To disable panic mode, set to 0%."
	defaultPanicThreshold  = 50.0
	defaultNumRetries      = 1 // route_components.proto RetryPolicy.num_retries default
	defaultRetryBase       = 25 * time.Millisecond
	defaultRetryMaxFactor  = 10 // max_interval defaults to 10 x base_interval
	defaultImmediateStatus = 200
	// source/common/http/headers.h: Headers::get().prefix() is "x-envoy"
	// unless the bootstrap changes header_prefix.
	envoyHeaderPrefix = "x-envoy"
	// Http::DEFAULT_MAX_HEADERS_COUNT and DEFAULT_MAX_REQUEST_HEADERS_KB
	// (envoy/http/codec.h), the limits of an upstream response header map
	// unless the cluster sets its own (not emulated). A later Envoy header
	// raises both (1000 and 128, for CVE-2026-47774); whether v1.40 has
	// that change is not verified [verify].
	defaultMaxHeadersCount = 100
	defaultMaxHeadersKB    = 60
	// ext_proc.cc ErrorPrefix.
	extProcErrorPrefix = "ext_proc_error"
	// HCM server_name default.
	defaultServerName = "envoy"
	// Unspecified value of a command operator in a text format
	// (substitution_formatter.cc DefaultUnspecifiedValueStringView).
	unspecifiedValue = "-"
)

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
// (keepalive.go pingConn, pinger.go): PINGs go out between grpc-go's
// frames, and their ACKs, recognised by payload, are taken out before
// grpc-go reads. Only ACKs of our own PINGs count as keepalive responses.
// connection_idle_interval (a PING before a new stream on an idle
// connection) is not emulated: the bootstraps do not set it. The codec was
// read on a recent envoyproxy/envoy main, not at the v1.40.0 tag [verify:
// source/common/http/http2/codec_impl.cc ConnectionImpl::sendKeepalive and
// onKeepaliveResponse].
//
// ext_proc gRPC client connection. Envoy's ext_proc filter talks to its
// server through Envoy's own gRPC client (Grpc::AsyncClientImpl) over the
// cluster's HTTP/2 connection pool; the data plane uses grpc-go's client
// (dataplane.go New) with Envoy's windows and keepalive, and maps what the
// server can tell apart. Options.ExtProcConn may be any
// grpc.ClientConnInterface (tests inject their own).
//   - :authority is envoy_grpc.authority, else the cluster name
//     (source/common/grpc/async_client_impl.cc AsyncStreamImpl::initialize;
//     extProcFilter.callOptions). Envoy also sends x-envoy-internal and
//     x-forwarded-for (source/common/http/async_client_impl.cc
//     AsyncStreamImpl::sendHeaders) and no user-agent; grpc-go sends its
//     user-agent and neither of those [choice: the extproc server reads
//     none of them]. initial_metadata goes as headers.
//   - Receive limit: none unless max_receive_message_length is set
//     (api/envoy/config/core/v3/grpc_service.proto,
//     GrpcService.EnvoyGrpc.max_receive_message_length: "Defaults to 0,
//     which means unlimited"); here grpc-go's largest, math.MaxInt32.
//   - Windows: stream 16 MiB and connection 24 MiB
//     (envoyHTTP2StreamWindow); concurrent streams: Envoy opens at most
//     Http2ProtocolOptions.max_concurrent_streams (default 1024,
//     protocol.proto; changelogs/1.40.0.yaml: the safe HTTP/2 defaults
//     always apply) on a connection and follows the server's
//     SETTINGS_MAX_CONCURRENT_STREAMS below that; grpc-go follows the
//     server's setting, and toolmesh's server sets none, so the cap is not
//     reached by the data plane's load [choice].
//   - Closing: ExternalProcessorStreamImpl::close
//     (source/extensions/filters/http/ext_proc/client_impl.cc) half-closes
//     and then resets the stream. Since 1.37 a local reset goes out as
//     RST_STREAM INTERNAL_ERROR, not CANCEL or NO_ERROR, behind the runtime
//     guard envoy.reloadable_features.reset_with_error (changelogs/1.37.0.yaml
//     [verify: source/common/http/http2/codec_impl.cc
//     ConnectionImpl::StreamImpl::resetStream at v1.40.0]). grpc-go's cancel
//     sends CANCEL [choice]: a grpc-go server reports either code to its
//     handler alike, a cancelled stream context (http2_server.go
//     handleRSTStream).
//   - Statuses (extProcRun.envoyStatus): a connect failure is the router's
//     local reply, Unavailable with its body and response code details
//     appended (source/common/grpc/async_client_impl.cc enhancedGrpcMessage)
//     [inferred]; a reset stream, and a connection lost after the response
//     headers, are Internal (AsyncStreamImpl::onReset reports
//     Status::Internal) [verify: source/common/grpc/async_client_impl.cc
//     AsyncStreamImpl::onReset at v1.40.0]; grpc-go's Unavailable is kept
//     for a connection lost before them (the router's 503).
//   - Not emulated: retries (no retry_policy in the bootstraps), the
//     cluster's circuit breakers and idle_timeout on this connection, TLS.
const (
	// The bootstraps' interval and timeout (envoy/*.yaml, deploy/); Envoy
	// itself sends no PINGs without connection_keepalive.
	defaultKeepaliveInterval = 30 * time.Second
	defaultKeepaliveTimeout  = 5 * time.Second
	// protocol.proto KeepaliveSettings.interval_jitter: "The default value
	// is 15%."
	defaultKeepaliveJitterPercent = 15.0
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
	envoyHTTP2StreamWindow = 16 << 20
	envoyHTTP2ConnWindow   = 24 << 20
)

// Upstream response header limits (api/envoy/config/core/v3/protocol.proto,
// HttpProtocolOptions.max_response_headers_kb: "If unconfigured, the
// default is 60 KiB, except for HTTP/1 response headers which have a
// default of 80 KiB"; "Responses that exceed this limit will result in a
// HTTP 503 response"). net/http counts HTTP/1 header bytes as read and
// HTTP/2 ones as decoded field sizes; Envoy's exact counting is not
// emulated [verify: source/common/http/http1/codec_impl.cc
// ConnectionImpl::checkMaxHeadersSize].
const (
	maxResponseHeadersH1 = 80 << 10
	maxResponseHeadersH2 = 60 << 10
)

// maxIdlePerHost bounds the idle upstream connections per endpoint [choice:
// Envoy keeps every connection the max_connections circuit breaker allows].
const maxIdlePerHost = 64

// Response codes details, bodies and flags of the local replies Envoy's
// router and filter manager send (source/common/stream_info/utility.h
// ResponseCodeDetailValues; source/common/router/router.cc;
// source/common/http/filter_manager.cc).
const (
	detailsRouteNotFound      = "route_not_found"
	detailsClusterNotFound    = "cluster_not_found"
	detailsNoHealthyUpstream  = "no_healthy_upstream"
	detailsUpstreamTimeout    = "upstream_response_timeout"
	detailsPerTryTimeout      = "upstream_per_try_timeout"
	detailsDirectResponse     = "direct_response"
	detailsRequestTooLarge    = "request_payload_too_large"
	detailsResponseTooLarge   = "response_payload_too_large"
	detailsMessageTimeout     = extProcErrorPrefix + "_per-message_timeout_exceeded"
	detailsStreamIdleTimeout  = "stream_idle_timeout"
	detailsResetBeforeStarted = "upstream_reset_before_response_started"
	detailsResetAfterStarted  = "upstream_reset_after_response_started"

	bodyNoHealthyUpstream = "no healthy upstream"
	bodyUpstreamTimeout   = "upstream request timeout"
	bodyPayloadTooLarge   = "Payload Too Large"               // CodeUtility::toString(413)
	bodyInternalError     = "Internal Server Error"           // CodeUtility::toString(500)
	bodyBadRequest        = "Bad Request"                     // CodeUtility::toString(400)
	bodyHeadersTooLarge   = "Request Header Fields Too Large" // CodeUtility::toString(431)
)

// responseFlags is the set of Envoy response flags of one stream.
type responseFlags uint32

// The flags in StreamInfo::CoreResponseFlag order
// (envoy/stream_info/stream_info.h), which is the order %RESPONSE_FLAGS%
// prints them in (source/common/stream_info/utility.cc).
const (
	flagLH responseFlags = 1 << iota
	flagUH
	flagUT
	flagLR
	flagUR
	flagUF
	flagUC
	flagUO
	flagNR
	flagDI
	flagFI
	flagRL
	flagUAEX
	flagRLSE
	flagDC
	flagURX
	flagSI
	flagIH
	flagDPE
	flagUMSDR
	flagRFCF
	flagNFCF
	flagDT
	flagUPE
	flagNC
	flagOM
	flagDF
	flagDO
	flagDR
)

var responseFlagNames = []string{
	"LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE",
	"DC", "URX", "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF",
	"DO", "DR",
}

// String renders the flags the way %RESPONSE_FLAGS% does: short names joined
// by commas, "" when none is set.
func (f responseFlags) String() string {
	var b strings.Builder
	for i, name := range responseFlagNames {
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

// parseResponseFlag maps a short flag name (response_flag_filter) to its bit.
func parseResponseFlag(name string) (responseFlags, bool) {
	for i, n := range responseFlagNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// checkOp is the kind of header mutation being checked
// (source/extensions/filters/common/mutation_rules/mutation_rules.h).
type checkOp int

const (
	opSet checkOp = iota
	opAppend
	opRemove
)

// checkResult is the outcome of a mutation check.
type checkResult int

const (
	checkOK checkResult = iota
	checkIgnore
	checkFail
)

// mutationChecker emulates Checker in
// source/extensions/filters/common/mutation_rules/mutation_rules.cc, which
// enforces ext_proc's mutation_rules (HeaderMutationRules). With the default
// (empty) rules: host, :authority, :scheme and :method cannot be changed;
// x-envoy* cannot be changed; ":"-headers cannot be appended to; ":" headers
// and host can never be removed; :status must parse and be >= 200.
// Disallowed mutations are ignored (counted in rejected_header_mutations)
// unless disallow_is_error, which turns them into a 500 local reply.
type mutationChecker struct {
	allowAllRouting bool
	allowEnvoy      bool
	disallowSystem  bool
	disallowAll     bool
	disallowIsError bool
	allowExpr       *regexp.Regexp
	disallowExpr    *regexp.Regexp
}

// ImmediateResponse headers are checked against the filter's own
// mutation_rules, not a permissive set: Filter::sendImmediateResponse
// (ext_proc.cc) passes config().mutationChecker() to applyHeaderMutations
// since Envoy 1.27 (envoyproxy/envoy PR #27925, "Applying same ext_proc
// filter checker rule for immediate response"); the permissive
// ImmediateMutationChecker of older releases is no longer used there.

// routingHeaders are mutation_rules.cc ExtraRoutingHeaders.
var routingHeaders = map[string]bool{"host": true, ":authority": true, ":method": true, ":scheme": true}

func (c *mutationChecker) check(op checkOp, name, value string) checkResult {
	if c.allowed(op, name) && (op == opRemove || validMutationValue(name, value)) {
		return checkOK
	}
	if c.disallowIsError {
		return checkFail
	}
	return checkIgnore
}

func (c *mutationChecker) allowed(op checkOp, name string) bool {
	// "No matter what, you can't remove the "host" or any ":" headers."
	if op == opRemove && (strings.HasPrefix(name, ":") || name == "host") {
		return false
	}
	if c.disallowExpr != nil && c.disallowExpr.MatchString(name) {
		return false
	}
	if c.allowExpr != nil && c.allowExpr.MatchString(name) {
		return true
	}
	if c.disallowAll {
		return false
	}
	if !c.allowAllRouting && routingHeaders[name] {
		return false
	}
	if strings.HasPrefix(name, ":") && (op == opAppend || c.disallowSystem) {
		return false
	}
	if !c.allowEnvoy && strings.HasPrefix(name, envoyHeaderPrefix) {
		return false
	}
	return true
}

// validMutationValue is mutation_rules.cc Checker::isValidValue. The upper
// bound 999 on :status is [inferred]: Envoy's codecs cannot encode more than
// three digits, and Go's ResponseWriter panics on it.
func validMutationValue(name, value string) bool {
	if !strings.HasPrefix(name, ":") && !validHeaderValue(value) {
		return false
	}
	switch name {
	case "host", ":authority":
		return value != "" && validHeaderValue(value) && !strings.ContainsAny(value, " /?#@")
	case ":scheme":
		return value == "http" || value == "https"
	case ":status":
		n, err := strconv.ParseUint(value, 10, 32)
		return err == nil && n >= 200 && n <= 999
	}
	return true
}

// validHeaderName is HeaderUtility::headerNameIsValid: an RFC 7230 token,
// optionally with a leading ':' for pseudo headers.
func validHeaderName(name string) bool {
	name = strings.TrimPrefix(name, ":")
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue is HeaderUtility::headerValueIsValid: no NUL, CR or LF.
func validHeaderValue(v string) bool {
	return !strings.ContainsAny(v, "\x00\r\n")
}

// appendMode is how a HeaderValueOption is applied.
type appendMode int

const (
	appendAdd       appendMode = iota // append a value, or add the header
	appendIfAbsent                    // add only if absent
	appendOverwrite                   // replace all values, or add
	appendOverwriteIfExists
)

// extProcAppendMode decides how ext_proc applies one set_headers entry
// (source/extensions/filters/http/ext_proc/mutation_utils.cc).
//
// [choice] Envoy releases up to at least 1.40 read only the deprecated
// `append` BoolValue here ("append defaults to false when used in this
// message", external_processor.proto) and ignore append_action (envoy issue
// #36982; PRs #37139 and #39066 were closed unmerged). The emulation honours
// `append` when it is set, and otherwise honours append_action, whose enum
// default is APPEND_IF_EXISTS_OR_ADD — the reading the pending Envoy fix
// takes. A server that sets OVERWRITE_IF_EXISTS_OR_ADD explicitly (as
// toolmesh's extproc server does, ADR 0001) behaves the same
// under both readings; one that leaves the action unset sees its values
// appended here, which surfaces the ambiguity instead of hiding it. [verify]
func extProcAppendMode(o *corev3.HeaderValueOption) appendMode {
	if o.GetAppend() != nil {
		if o.GetAppend().GetValue() {
			return appendAdd
		}
		return appendOverwrite
	}
	return headerAppendAction(o.GetAppendAction())
}

// configAppendMode decides how a HeaderValueOption from route or
// local_reply configuration (headers_to_add) is applied: base.proto says
// `append` defaults to true, append_action defaults to
// APPEND_IF_EXISTS_OR_ADD, and `append`, when set, wins.
func configAppendMode(o *corev3.HeaderValueOption) appendMode {
	if o.GetAppend() != nil {
		if o.GetAppend().GetValue() {
			return appendAdd
		}
		return appendOverwrite
	}
	return headerAppendAction(o.GetAppendAction())
}

func headerAppendAction(a corev3.HeaderValueOption_HeaderAppendAction) appendMode {
	switch a {
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		return appendIfAbsent
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		return appendOverwrite
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		return appendOverwriteIfExists
	default:
		return appendAdd
	}
}

// clearRouteCacheHonoured is DecodingProcessorState::clearRouteCache
// (source/extensions/filters/http/ext_proc/processor_state.cc): a
// clear_route_cache without a header_mutation in the same CommonResponse is
// ignored (stat clear_route_cache_ignored); route_cache_action CLEAR clears
// on every response that carries a header mutation, RETAIN (or the legacy
// disable_clear_route_cache) never clears. Only the request direction clears.
func clearRouteCacheHonoured(action extprocfilterv3.ExternalProcessor_RouteCacheAction, hasHeaderMutation, clear bool) bool {
	if !hasHeaderMutation {
		return false
	}
	switch action {
	case extprocfilterv3.ExternalProcessor_CLEAR:
		return true
	case extprocfilterv3.ExternalProcessor_RETAIN:
		return false
	default:
		return clear
	}
}

// lastResponseHeaders is the kResponseHeaders case of
// Filter::closeGrpcStreamIfLastRespReceived (ext_proc.cc; runtime guard
// envoy.reloadable_features.ext_proc_stream_close_optimization, a
// RUNTIME_GUARD on by default since 1.37): after the response-headers reply,
// with no body to come (end of stream) or the response body mode NONE and
// trailers not sent, nothing more goes to the server and Envoy closes the
// stream (closeStreamMaybeGraceful) instead of holding it to the end of the
// request. The mode is the one after the reply's mode_override. The other
// cases of that function (request headers with nothing after them, the last
// STREAMED chunk) are not emulated: the stream is closed when the request
// ends instead. [verify: read on a recent main, not the v1.40.0 tag]
func lastResponseHeaders(eos bool, mode *extprocfilterv3.ProcessingMode) bool {
	return eos || (mode.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_NONE &&
		mode.GetResponseTrailerMode() != extprocfilterv3.ProcessingMode_SEND)
}

// shouldRemoveContentLength is ProcessorState::shouldRemoveContentLength
// (processor_state.h): in STREAMED, BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED,
// and BUFFERED with headers SKIPped, ext_proc cannot keep content-length
// right, so it removes it from the headers it forwards (after sending them to
// the server, and only while processing is not complete; ext_proc.cc
// decodeHeaders/encodeHeaders) and skips content-length in set_headers.
// allow_content_length_header (ext_proc.proto field 26) keeps it.
func shouldRemoveContentLength(body extprocfilterv3.ProcessingMode_BodySendMode, sendHeaders, allowCL bool) bool {
	if allowCL {
		return false
	}
	switch body {
	case extprocfilterv3.ProcessingMode_STREAMED, extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL,
		extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		return true
	case extprocfilterv3.ProcessingMode_BUFFERED:
		return !sendHeaders
	}
	return false
}

// errContentLengthMismatch is ProcessorState::validateContentLength
// (processor_state.cc): in a BUFFERED body response that carries a
// body_mutation, a content-length that parses and differs from the length of
// body_mutation.body (0 for clear_body) rejects the mutation, and ext_proc
// sends a 500 local reply whose details are this message.
const errContentLengthMismatch = "mismatch between content length and the length of the mutated body"

// immediateStatus is Filter::sendImmediateResponse (ext_proc.cc): a missing
// status or one below 200 (MutationUtils::isValidHttpStatus) becomes 200.
// Codes above 999 are clamped the same way [inferred: no codec can send them].
func immediateStatus(code int) int {
	if code < 200 || code > 999 {
		return defaultImmediateStatus
	}
	return code
}

// responseDetails is StringUtil::replaceAllEmptySpace, which ext_proc
// applies to ImmediateResponse.details before they become
// %RESPONSE_CODE_DETAILS%.
func responseDetails(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' {
			return '_'
		}
		return r
	}, s)
}

// grpcErrorDetails is Filter::onGrpcError (ext_proc.cc): a gRPC error on the
// stream with failure_mode_allow false becomes a local reply with
// status_on_error (default 500) and the details
// "ext_proc_error_gRPC_error_<code>{<message>}" (absl::StrFormat
// "%s_gRPC_error_%i{%s}"), which sendImmediateResponse passes through
// StringUtil::replaceAllEmptySpace like every ext_proc details string. The
// message is the gRPC status message as the client saw it; a Go client's
// transport messages differ from Envoy's async client's.
func grpcErrorDetails(code uint32, msg string) string {
	return responseDetails(fmt.Sprintf("%s_gRPC_error_%d{%s}", extProcErrorPrefix, code, msg))
}

// Messages of the FailedPrecondition statuses ext_proc treats as spurious
// (Filter::onReceiveMessage in ext_proc.cc, ProcessorState in
// processor_state.cc). With failure_mode_allow false they become the
// details of the local reply, spaces replaced by '_'.
const (
	// ProcessorState::handleHeadersResponse / handleBodyResponse /
	// handleTrailersResponse: a typed response the state is not waiting
	// for (a response of the wrong kind or out of order).
	spuriousMessage = "spurious message"
	// onReceiveMessage default branch: no response, or one Envoy does not
	// know (a message carrying only mode_override, for instance).
	spuriousUnhandled = "unhandled message"
	// onReceiveMessage kImmediateResponse with disable_immediate_response.
	spuriousImmediateDisabled = "unhandled immediate response due to config disabled it"
	// ProcessorState::handleStreamedBodyCallback: streamed_response outside
	// FULL_DUPLEX_STREAMED.
	spuriousStreamedResponse = "spurious message: streamed_response is received while body_mode_ is not FULL_DUPLEX_STREAMED"
	// ProcessorState::handleStreamedBodyCallback: a body response without
	// streamed_response in FULL_DUPLEX_STREAMED.
	spuriousNormalInDuplex = "spurious message: Normal body mutation response is received while body_mode_ is FULL_DUPLEX_STREAMED"
)

// failCloseSpurious is the runtime guard
// envoy.reloadable_features.ext_proc_fail_close_spurious_resp, on by default
// in the releases that have it [verify the first release]: a spurious
// message with failure_mode_allow false is an error reply
// (Filter::handleErrorResponse) instead of "close the stream and continue".
const failCloseSpurious = true

// spuriousKind is the message of a response that arrived when the filter
// was not waiting for its kind.
func spuriousKind(resp *extprocv3.ProcessingResponse) string {
	switch resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders, *extprocv3.ProcessingResponse_RequestBody,
		*extprocv3.ProcessingResponse_ResponseHeaders, *extprocv3.ProcessingResponse_ResponseBody,
		*extprocv3.ProcessingResponse_RequestTrailers, *extprocv3.ProcessingResponse_ResponseTrailers:
		return spuriousMessage
	}
	return spuriousUnhandled
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
// filter chain the PR names, was read from the source, not run [verify].
// The local data plane sends the router's replies (upstream timeout,
// reset, overflow, no healthy upstream, unknown cluster, no route, direct
// responses: all callbacks_->sendLocalReply in router.cc
// Filter::decodeHeaders and the upstream callbacks) via the filter chain
// (exchange.go sendLocalReplyViaFilterChain); its other local replies (413
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
// metadata_parser_ built from initial_metadata; extproc.go open).
//
// ext_proc stream ends (source/extensions/filters/http/ext_proc/ext_proc.cc;
// read in a release with allowed_override_modes, status_on_error and
// graceful gRPC close, not in the v1.40.0 tag itself [verify]). Every
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
//     the earlier ones, the fixed set was not available to check [verify].
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

// Router rules (source/common/router/router.cc, config_impl.cc):
//
//   - No route: 404, flag NR, details route_not_found, empty body.
//   - cluster_header: only the first value is used; a missing header gives an
//     empty cluster name. An unknown (or empty) cluster is a local reply with
//     RouteAction.cluster_not_found_response_code (default 503 — the proto
//     field comment; the older "Envoy will return a 404" sentence on
//     cluster_header predates that field), flag NC, details
//     cluster_not_found, empty body. [verify]
//   - direct_response: a local reply (details direct_response) with the
//     route's response_headers_to_add.
//   - response_headers_to_add (route, virtual host, route configuration) on
//     an upstream response: added before the encoder filters run
//     (Filter::onUpstreamHeaders: route_entry_->finalizeResponseHeaders,
//     then callbacks_->encodeHeaders), so ext_proc's response_headers
//     message carries them (exchange.go encode).
//   - No healthy endpoint: 503, flag UH, body "no healthy upstream".
//   - Circuit breaker overflow (max_requests, max_pending_requests,
//     max_retries when a retry is wanted): 503, flag UO.
//   - Connect failure or timeout: 503, flag UF; connection closed before
//     response headers: 503, flag UC; stream reset (h2): 503, flag UR. Body
//     "upstream connect error or disconnect/reset before headers. [retried
//     and the latest ]reset reason: <reason>", details
//     upstream_reset_before_response_started{<reason>[|<why>]} with spaces
//     as '_'. Exhausted retries add URX. The transport failure reason <why>
//     left the body in 1.39 (changelogs/1.39.0.yaml; router.cc
//     Filter::onUpstreamReset [verify: the body is built in
//     source/common/router/router.cc Filter::onUpstreamAbort]) and stays in
//     the details.
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
// Upstream connections (cluster.go newTransport) are net/http's Transport,
// for HTTP/1.1 and HTTP/2, compared with Envoy's pools and codec client
// (source/common/http/http1/conn_pool.cc, source/common/http/codec_client.cc;
// read on a recent envoyproxy/envoy main, not at the v1.40.0 tag [verify:
// ConnPoolImpl::onResponseComplete]):
//   - HTTP/1.1: one request at a time per connection; a connection goes
//     back to the pool when its response is complete unless either side
//     asked to close (HeaderUtility::shouldCloseConnection), and a stream
//     reset before the response is complete closes it
//     (ConnPoolImpl::onDownstreamReset). net/http does the same.
//   - Idle connections close after the cluster's
//     common_http_protocol_options.idle_timeout (IdleConnTimeout; Envoy's
//     default 1h, 0 none); at most maxIdlePerHost stay idle per endpoint.
//   - A connection that closes after the request was written and before any
//     response byte: 503, flag UC, "reset reason: connection termination"
//     (CodecClient::onEvent, Filter::onUpstreamReset); the route's retry
//     policy decides a retry (wouldRetryFromReset). [choice] net/http
//     itself resends a request on a reused connection that failed before
//     anything of it was written, or an idempotent one without a body;
//     Envoy resends neither. An MCP request is a POST with a body.
//   - A malformed response is reported the same way [choice: Envoy's codec
//     reports a protocol error, 502 UPE]; response headers over
//     maxResponseHeadersH1 (HTTP/1) or maxResponseHeadersH2 are 503 UPE
//     "protocol error" (classifyUpstreamError).
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
// there (duplexReader.step, re-armed by each upstream chunk and server
// message [inferred: Envoy re-arms it on the downstream stream's encode
// and decode events]); everywhere else net/http's server has its own
// timeouts. Upstream response headers have always been received on that
// path, so it resets the stream.

// FULL_DUPLEX_STREAMED response bodies, entered through a mode_override in
// the request-headers or the response-headers reply (fullduplex.go). Read in
// source/extensions/filters/http/ext_proc/ext_proc.cc and processor_state.cc
// on a recent envoyproxy/envoy main, not at the v1.40.0 tag [verify]:
//   - The override is honoured like any other (Filter::onReceiveMessage):
//     only the *configured* processing_mode may not name
//     FULL_DUPLEX_STREAMED; the effective override must still match an
//     allowed_override_modes entry. Nothing checks that the override's
//     trailer mode is SEND, which processing_mode.proto asks of the mode.
//     It is taken while either direction waits for a headers reply
//     (inHeaderProcessState) and set on both directions, so one in the
//     request-headers reply keeps the request body as it names it
//     (BUFFERED) and fixes the response body mode before the response.
//   - Set before the response (duplexHeaders): onHeaders sends the response
//     headers and holds them; the message has no timer either
//     (onStartProcessorCall checks the direction's body mode). Each chunk
//     goes to the server at once while the headers reply is outstanding
//     (onData: FULL_DUPLEX_STREAMED is sent in HeadersCallback;
//     handleDataStreamedModeBase keeps that state), so a server may answer
//     the headers after it saw body. The headers reply applies its mutation
//     to the held headers (content-length removed and not settable:
//     shouldRemoveContentLength) and moves to StreamedBodyCallback once a
//     chunk was sent (getCallbackStateAfterHeaderResp); the headers then
//     continue, unless the whole body was sent already
//     (complete_body_available_: sendBufferedDataInStreamedMode, no
//     continue), in which case the first streamed response continues them
//     (ActiveStreamEncoderFilter::injectEncodedDataToFilterChain in
//     source/common/http/filter_manager.cc does headers first). A body
//     response while the headers reply is outstanding is spurious
//     (isValidBodyCallbackState), and that, a gRPC error (failureModeAllow()
//     is false once a chunk went) or an ImmediateResponse is a local reply,
//     sent as such because no headers left. A clean close continues the
//     headers unchanged without the server. [choice] A CONTINUE_AND_REPLACE
//     headers reply replaces the body and the rest of the upstream's is
//     drained; toolmesh does not use it in this mode.
//   - Each upstream chunk goes to the server and is drained
//     (handleDataStreamedModeBase): nothing reaches the client but what the
//     server's StreamedBodyResponse messages carry
//     (handleDuplexStreamedBodyResponse → injectDataToFilterChain), any
//     number of them per chunk, at any time while the callback state is
//     StreamedBodyCallback, which it is from the first chunk sent until a
//     response with end_of_stream. A body response before the first chunk
//     (handleBodyResponse: isValidBodyCallbackState) or one without
//     streamed_response (handleStreamedBodyCallback) is spurious.
//   - end_of_stream ends the downstream response then, whether or not the
//     upstream has ended (the implementation does not check it;
//     external_processor.proto describes the flag as set after a body
//     request with end_of_stream [verify]), and closes the gRPC stream
//     (closeGrpcStreamIfLastRespReceived, isLastBodyResponse). The HTTP
//     stream is then complete and its filters destroyed; the router's
//     onDestroy resets an upstream request still in flight
//     (source/common/router/router.cc Filter::onDestroy → resetAll;
//     source/common/http/conn_manager_impl.cc doEndStream) [verify]. The
//     local data plane closes the upstream body when the write loop ends.
//   - No message timer runs in this mode (ProcessorState::
//     onStartProcessorCall skips it; ext_proc.proto message_timeout: "There
//     is no timeout ... when the body send mode is FULL_DUPLEX_STREAMED"),
//     so an override_message_timeout is ignored, and
//     Filter::failureModeAllow() is false once a chunk went to the server:
//     a gRPC error or a spurious message then is a local reply, which after
//     the headers is a reset. A clean close (onGrpcClose) lets the rest of
//     the body pass without the server; chunks it was sent are lost.
//   - Data that arrives while the response-headers reply is awaited is
//     buffered in the configured mode (onData: StopIterationAndBuffer for
//     BUFFERED) and, after an override to FULL_DUPLEX_STREAMED, continues
//     to the next filter without the server (handleHeadersResponse: "There
//     is no buffered data in this mode", continueIfNecessary) unless the
//     body is complete by then. [choice] For an override in the
//     response-headers reply the local data plane reads the upstream body
//     only after the headers reply, so that case does not arise here: every
//     chunk goes to the server. toolmesh's extproc server overrides at the
//     request headers where a chunk must not bypass it
//     (docs/decisions/0013-federated-stream-deadline.md).
//   - FULL_DUPLEX_STREAMED request bodies (an override at request headers)
//     are not emulated: such an override is ignored and logged.

// Not emulated (Apply rejects the configuration, or the field is ignored as
// noted): ext_proc observability_mode, FULL_DUPLEX_STREAMED as the
// configured mode, the GRPC body mode, send_body_without_waiting_for_header_response (ignored), CEL
// request/response attributes (ignored), typed_dynamic_metadata (ignored),
// trailers (never sent), http_service, per-route grpc_service (every filter
// uses Options.ExtProcTarget); active health checks and outlier detection
// (an endpoint is healthy unless its EDS health_status says otherwise; panic
// mode is emulated, see cluster.pickHosts); load balancing weights and policies other
// than round robin; auto_sni; HTTP/3 upstreams; redirects; upstream HTTP
// filters; other HTTP filters unless is_optional. STREAMED request bodies are
// collected before they go upstream (each chunk is still exchanged with the
// server as it is read); STREAMED response bodies flow chunk by chunk.

// Response headers on the wire (source/common/http/http1/codec_impl.cc,
// StreamEncoderImpl::encodeHeadersBase): headers encoded without end_stream
// are flushed at once (connection_.flushOutput()), before any body; writes
// of one event-loop pass coalesce. So a response whose body is still
// streaming (passed through, or STREAMED through ext_proc) reaches the
// client with its headers before its first byte, as an idle event stream
// needs; a body Envoy already holds whole (a local reply, a BUFFERED body)
// goes out with its headers. The local data plane flushes the headers of
// the first kind (exchange.write). [verify: read in an older codec_impl.cc;
// HTTP/2 sends a HEADERS frame at once likewise]

// checkDownstream applies the downstream request checks Envoy makes before
// any filter runs, and returns the local reply of a refused request. Codec
// errors go through ServerConnectionImpl::sendProtocolError
// (source/common/http/http1/codec_impl.cc), which answers with
// ActiveStream::sendLocalReply and the body CodeUtility::toString(code), so
// local_reply_config sees them like any other local reply:
//
//   - the codec refuses request headers over max_request_headers_kb
//     (details http1.headers_too_large) or more than max_headers_count
//     (http1.too_many_headers) with 431; the count is of the headers on the
//     wire, Host included (http2 the same through its header list limits);
//   - headers_with_underscores_action: REJECT_REQUEST answers 400 (details
//     http1.unexpected_underscore), DROP_HEADER removes the header (the
//     codec's checkHeaderNameForUnderscores);
//   - path_with_escaped_slashes_action (ConnectionManagerUtility::
//     maybeNormalizePath): REJECT_REQUEST answers 400 with an empty body
//     (details path_normalization_failed), UNESCAPE_AND_FORWARD unescapes.
func (h *hcmConfig) checkDownstream(m *headerMap) *localReply {
	size, count := 0, 0
	for _, hd := range m.h {
		if strings.HasPrefix(hd.key, ":") && hd.key != ":authority" {
			continue
		}
		size += len(hd.key) + len(hd.value)
		count++
	}
	if size > h.maxHeadersBytes {
		return &localReply{code: 431, body: bodyHeadersTooLarge, details: "http1.headers_too_large"}
	}
	if count > h.maxHeaders {
		return &localReply{code: 431, body: bodyHeadersTooLarge, details: "http1.too_many_headers"}
	}
	switch h.underscores {
	case corev3.HttpProtocolOptions_REJECT_REQUEST, corev3.HttpProtocolOptions_DROP_HEADER:
		for _, hd := range m.h {
			if strings.HasPrefix(hd.key, ":") || !strings.Contains(hd.key, "_") {
				continue
			}
			if h.underscores == corev3.HttpProtocolOptions_REJECT_REQUEST {
				return &localReply{code: 400, body: bodyBadRequest, details: "http1.unexpected_underscore"}
			}
		}
		if h.underscores == corev3.HttpProtocolOptions_DROP_HEADER {
			m.delFunc(func(k string) bool { return !strings.HasPrefix(k, ":") && strings.Contains(k, "_") })
		}
	}
	path := m.value(":path")
	p, q, hasQ := strings.Cut(path, "?")
	lower := strings.ToLower(p)
	if strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") {
		switch h.escapedSlashes {
		case hcmv3.HttpConnectionManager_REJECT_REQUEST:
			return &localReply{code: 400, details: "path_normalization_failed"}
		case hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD:
			r := strings.NewReplacer("%2F", "/", "%2f", "/", "%5C", "\\", "%5c", "\\")
			p = r.Replace(p)
			if hasQ {
				p += "?" + q
			}
			m.set(":path", p)
		}
	}
	return nil
}

// Request attributes of the ext_proc filter (request_attributes in
// api/envoy/extensions/filters/http/ext_proc/v3/ext_proc.proto):
//   - Filter::addAttributes (source/extensions/filters/http/ext_proc/ext_proc.cc)
//     runs for every message it builds (buildHeaderRequest, setupBodyChunk,
//     sendTrailers), but the decoding state's sendAttributes is
//     !attributes_sent_ && hasRequestExpr (processor_state.h): the request
//     attributes ride on the first request-direction message only, the
//     request_headers message when headers are SENT.
//   - They go in ProcessingRequest.attributes under the key FilterName,
//     "envoy.filters.http.ext_proc" (the constant, not the filter's
//     configured name), as one Struct keyed by the expression text.
//   - ExpressionManager::evaluateAttributes (matching_utils.cc) leaves out
//     an expression whose evaluation fails or yields an error; a string
//     value becomes string_value. The Struct is set even when empty.
//   - connection.uri_san_peer_certificate is the downstream connection's
//     SSL info, uriSanPeerCertificate()[0]: the peer certificate's first URI
//     SAN; without an SSL connection or a URI SAN the lookup has no value
//     (ConnectionWrapper and extractSslInfo in
//     source/extensions/filters/common/expr/context.cc), so it is left out.
//     connection.mtls is whether the peer presented a certificate.
//
// Only these connection attributes are emulated (the translator asks for
// the first); any other expression is logged as ignored at Apply. Go
// renders a URI SAN from its parsed url.URL, which is the certificate's
// text for SPIFFE IDs [inferred]. response_attributes are not emulated.
// ext_proc.cc, matching_utils.cc and context.cc were read on a recent
// envoyproxy/envoy main, not at the v1.40.0 tag [verify].
const extProcAttrNamespace = "envoy.filters.http.ext_proc"

var emulatedAttributes = []string{"connection.uri_san_peer_certificate", "connection.mtls"}

// addAttributes is Filter::addAttributes for the decoding state.
func (e *extProcRun) addAttributes(req *extprocv3.ProcessingRequest) {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders, *extprocv3.ProcessingRequest_RequestBody,
		*extprocv3.ProcessingRequest_RequestTrailers:
	default:
		return
	}
	if e.attrsSent || len(e.f.requestAttrs) == 0 {
		return
	}
	e.attrsSent = true
	req.Attributes = map[string]*structpb.Struct{
		extProcAttrNamespace: extProcAttributes(e.f.requestAttrs, e.x.r.TLS),
	}
}

// extProcAttributes evaluates the emulated expressions against the
// downstream connection's TLS state (nil: plaintext).
func extProcAttributes(exprs []string, cs *tls.ConnectionState) *structpb.Struct {
	out := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for _, expr := range exprs {
		switch expr {
		case "connection.uri_san_peer_certificate":
			if cs != nil && len(cs.PeerCertificates) > 0 && len(cs.PeerCertificates[0].URIs) > 0 {
				out.Fields[expr] = structpb.NewStringValue(cs.PeerCertificates[0].URIs[0].String())
			}
		case "connection.mtls":
			out.Fields[expr] = structpb.NewBoolValue(cs != nil && len(cs.PeerCertificates) > 0)
		}
	}
	return out
}

// Downstream TLS: the listener's filter chain transport_socket
// envoy.transport_sockets.tls with a DownstreamTlsContext
// (api/envoy/extensions/transport_sockets/tls/v3/tls.proto), compiled by
// compileDownstreamTLS:
//   - tls_certificates are the server certificate; trusted_ca of the
//     validation context is the client CA list. With a CA, the server
//     verifies a client certificate the client sends; with
//     require_client_certificate it also fails the handshake without one
//     (DefaultCertValidator::addClientValidationContext sets
//     SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
//     source/common/tls/cert_validator/default_validator.cc, read in an
//     older tree under source/extensions/transport_sockets/tls [verify];
//     the verify-if-given mode without require is [inferred]).
//   - Envoy's TLS defaults: TLS 1.2 minimum (tls.proto TlsParameters).
//   - A plaintext request on a TLS listener never reaches the HTTP
//     connection manager: the handshake fails and the connection closes.
//
// [choice] The local data plane's downstream is HTTP/1.1 only (ADR 0002),
// so of alpn_protocols it offers http/1.1 alone; SDS, SNI-based chains,
// SAN/hash/SPKI/CRL checks of client certificates are rejected as not
// emulated. The listener socket is served with DataPlane.TLSConfig.
func downstreamALPN(configured []string) []string {
	if len(configured) == 0 {
		return nil // Envoy negotiates no ALPN
	}
	return []string{"http/1.1"}
}

// downstreamClientAuth is the client-certificate mode of a listener with a
// trusted CA.
func downstreamClientAuth(require bool) tls.ClientAuthType {
	if require {
		return tls.RequireAndVerifyClientCert
	}
	return tls.VerifyClientCertIfGiven
}
