package rules

// Envoy's rules for the ext_proc filter (see rules.go).

import (
	"crypto/tls"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
)

// CheckOp is the kind of header mutation being checked
// (source/extensions/filters/common/mutation_rules/mutation_rules.h).
type CheckOp int

const (
	OpSet CheckOp = iota
	OpAppend
	OpRemove
)

// CheckResult is the outcome of a mutation check.
type CheckResult int

const (
	CheckOK CheckResult = iota
	CheckIgnore
	CheckFail
)

// MutationChecker emulates Checker in
// source/extensions/filters/common/mutation_rules/mutation_rules.cc, which
// enforces ext_proc's mutation_rules (HeaderMutationRules). With the default
// (empty) rules: host, :authority, :scheme and :method cannot be changed;
// x-envoy* cannot be changed; ":"-headers cannot be appended to; ":" headers
// and host can never be removed; :status must parse and be >= 200.
// Disallowed mutations are ignored (counted in rejected_header_mutations)
// unless disallow_is_error, which turns them into a 500 local reply.
type MutationChecker struct {
	AllowAllRouting bool
	AllowEnvoy      bool
	DisallowSystem  bool
	DisallowAll     bool
	DisallowIsError bool
	AllowExpr       *regexp.Regexp
	DisallowExpr    *regexp.Regexp
}

// ImmediateResponse headers are checked against the filter's own
// mutation_rules, not a permissive set: Filter::sendImmediateResponse
// (ext_proc.cc) passes config().mutationChecker() to applyHeaderMutations
// since Envoy 1.27 (envoyproxy/envoy PR #27925, "Applying same ext_proc
// filter checker rule for immediate response"); the permissive
// ImmediateMutationChecker of older releases is no longer used there.

// routingHeaders are mutation_rules.cc ExtraRoutingHeaders.
var routingHeaders = map[string]bool{"host": true, ":authority": true, ":method": true, ":scheme": true}

func (c *MutationChecker) Check(op CheckOp, name, value string) CheckResult {
	if c.allowed(op, name) && (op == OpRemove || validMutationValue(name, value)) {
		return CheckOK
	}
	if c.DisallowIsError {
		return CheckFail
	}
	return CheckIgnore
}

func (c *MutationChecker) allowed(op CheckOp, name string) bool {
	// "No matter what, you can't remove the "host" or any ":" headers."
	if op == OpRemove && (strings.HasPrefix(name, ":") || name == "host") {
		return false
	}
	if c.DisallowExpr != nil && c.DisallowExpr.MatchString(name) {
		return false
	}
	if c.AllowExpr != nil && c.AllowExpr.MatchString(name) {
		return true
	}
	if c.DisallowAll {
		return false
	}
	if !c.AllowAllRouting && routingHeaders[name] {
		return false
	}
	if strings.HasPrefix(name, ":") && (op == OpAppend || c.DisallowSystem) {
		return false
	}
	if !c.AllowEnvoy && strings.HasPrefix(name, envoyHeaderPrefix) {
		return false
	}
	return true
}

// validMutationValue is mutation_rules.cc Checker::isValidValue. The upper
// bound 999 on :status is [inferred]: Envoy's codecs cannot encode more than
// three digits, and Go's ResponseWriter panics on it.
func validMutationValue(name, value string) bool {
	if !strings.HasPrefix(name, ":") && !ValidHeaderValue(value) {
		return false
	}
	switch name {
	case "host", ":authority":
		return value != "" && ValidHeaderValue(value) && !strings.ContainsAny(value, " /?#@")
	case ":scheme":
		return value == "http" || value == "https"
	case ":status":
		n, err := strconv.ParseUint(value, 10, 32)
		return err == nil && n >= 200 && n <= 999
	}
	return true
}

// ValidHeaderName is HeaderUtility::headerNameIsValid: an RFC 7230 token,
// optionally with a leading ':' for pseudo headers.
func ValidHeaderName(name string) bool {
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

// ValidHeaderValue is HeaderUtility::headerValueIsValid: no NUL, CR or LF.
func ValidHeaderValue(v string) bool {
	return !strings.ContainsAny(v, "\x00\r\n")
}

// ExtProcAppendMode decides how ext_proc applies one set_headers entry
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
// appended here, which surfaces the ambiguity instead of hiding it. At
// v1.40.0, base.proto HeaderValueOption.append says "The external
// authorization service and external processor service have default value
// (false) for this field", and append_action "defaults to
// APPEND_IF_EXISTS_OR_ADD"; which of the two mutation_utils.cc reads is not
// said there [verify:
// source/extensions/filters/http/ext_proc/mutation_utils.cc
// MutationUtils::applyHeaderMutations: no stored copy at v1.40.0; one stored
// copy that reads append_action is an unmerged branch's, with debug logging].
func ExtProcAppendMode(o *corev3.HeaderValueOption) headers.AppendMode {
	if o.GetAppend() != nil {
		if o.GetAppend().GetValue() {
			return headers.AppendAdd
		}
		return headers.AppendOverwrite
	}
	return headerAppendAction(o.GetAppendAction())
}

// ConfigAppendMode decides how a HeaderValueOption from route or
// local_reply configuration (headers_to_add) is applied: base.proto says
// `append` defaults to true, append_action defaults to
// APPEND_IF_EXISTS_OR_ADD, and `append`, when set, wins: the same reading
// as ExtProcAppendMode's.
func ConfigAppendMode(o *corev3.HeaderValueOption) headers.AppendMode { return ExtProcAppendMode(o) }

func headerAppendAction(a corev3.HeaderValueOption_HeaderAppendAction) headers.AppendMode {
	switch a {
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		return headers.AppendIfAbsent
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		return headers.AppendOverwrite
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		return headers.AppendOverwriteIfExists
	default:
		return headers.AppendAdd
	}
}

// ClearRouteCacheHonoured is DecodingProcessorState::clearRouteCache
// (source/extensions/filters/http/ext_proc/processor_state.cc): a
// clear_route_cache without a header_mutation in the same CommonResponse is
// ignored (stat clear_route_cache_ignored); route_cache_action CLEAR clears
// on every response that carries a header mutation, RETAIN (or the legacy
// disable_clear_route_cache) never clears. Only the request direction clears.
func ClearRouteCacheHonoured(action extprocfilterv3.ExternalProcessor_RouteCacheAction, hasHeaderMutation, clear bool) bool {
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

// LastResponseHeaders is the kResponseHeaders case of
// Filter::closeGrpcStreamIfLastRespReceived (ext_proc.cc; runtime guard
// envoy.reloadable_features.ext_proc_stream_close_optimization, added in
// 1.37 (changelogs/1.37.0.yaml, minor_behavior_changes, area ext_proc:
// "Close the gRPC stream when Envoy detects no further external processing
// is needed"), and removed with its legacy code path in 1.40
// (changelogs/1.40.0.yaml, removed_config_or_runtime, area ext_proc), so at
// v1.40.0 this close always happens): after the response-headers reply,
// with no body to come (end of stream) or the response body mode NONE and
// trailers not sent, nothing more goes to the server and Envoy closes the
// stream (closeStreamMaybeGraceful) instead of holding it to the end of the
// request. The mode is the one after the reply's mode_override. The other
// cases of that function (request headers with nothing after them, the last
// STREAMED chunk) are not emulated: the stream is closed when the request
// ends instead. The kResponseHeaders case was read in a stored ext_proc.cc
// that already has the guard; changelogs/1.37.0.yaml to 1.40.0.yaml record
// no change to it but the guard's removal (1.37's StreamedImmediateResponse
// is another response kind).
func LastResponseHeaders(eos bool, mode *extprocfilterv3.ProcessingMode) bool {
	return eos || (mode.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_NONE &&
		mode.GetResponseTrailerMode() != extprocfilterv3.ProcessingMode_SEND)
}

// ShouldRemoveContentLength is ProcessorState::shouldRemoveContentLength
// (processor_state.h): in STREAMED, BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED,
// and BUFFERED with headers SKIPped, ext_proc cannot keep content-length
// right, so it removes it from the headers it forwards (after sending them to
// the server, and only while processing is not complete; ext_proc.cc
// decodeHeaders/encodeHeaders) and skips content-length in set_headers.
// allow_content_length_header (ext_proc.proto field 26) keeps it.
func ShouldRemoveContentLength(body extprocfilterv3.ProcessingMode_BodySendMode, sendHeaders, allowCL bool) bool {
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

// ErrContentLengthMismatch is ProcessorState::validateContentLength
// (processor_state.cc): in a BUFFERED body response that carries a
// body_mutation, a content-length that parses and differs from the length of
// body_mutation.body (0 for clear_body) rejects the mutation, and ext_proc
// sends a 500 local reply whose details are this message.
const ErrContentLengthMismatch = "mismatch between content length and the length of the mutated body"

// ImmediateStatus is Filter::sendImmediateResponse (ext_proc.cc): a missing
// status or one below 200 (MutationUtils::isValidHttpStatus) becomes 200.
// Codes above 999 are clamped the same way [inferred: no codec can send them].
func ImmediateStatus(code int) int {
	if code < 200 || code > 999 {
		return defaultImmediateStatus
	}
	return code
}

// ResponseDetails is StringUtil::replaceAllEmptySpace, which ext_proc
// applies to ImmediateResponse.details before they become
// %RESPONSE_CODE_DETAILS%.
func ResponseDetails(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' {
			return '_'
		}
		return r
	}, s)
}

// GRPCErrorDetails is Filter::onGrpcError (ext_proc.cc): a gRPC error on the
// stream with failure_mode_allow false becomes a local reply with
// status_on_error (default 500) and the details
// "ext_proc_error_gRPC_error_<code>{<message>}" (absl::StrFormat
// "%s_gRPC_error_%i{%s}"), which sendImmediateResponse passes through
// StringUtil::replaceAllEmptySpace like every ext_proc details string. The
// message is the gRPC status message as the client saw it; a Go client's
// transport messages differ from Envoy's async client's.
func GRPCErrorDetails(code uint32, msg string) string {
	return ResponseDetails(fmt.Sprintf("%s_gRPC_error_%d{%s}", extProcErrorPrefix, code, msg))
}

// Messages of the FailedPrecondition statuses ext_proc treats as spurious
// (Filter::onReceiveMessage in ext_proc.cc, ProcessorState in
// processor_state.cc). With failure_mode_allow false they become the
// details of the local reply, spaces replaced by '_'.
const (
	// ProcessorState::handleHeadersResponse / handleBodyResponse /
	// handleTrailersResponse: a typed response the state is not waiting
	// for (a response of the wrong kind or out of order).
	SpuriousMessage = "spurious message"
	// onReceiveMessage default branch: no response, or one Envoy does not
	// know (a message carrying only mode_override, for instance).
	SpuriousUnhandled = "unhandled message"
	// onReceiveMessage kImmediateResponse with disable_immediate_response.
	SpuriousImmediateDisabled = "unhandled immediate response due to config disabled it"
	// ProcessorState::handleStreamedBodyCallback: streamed_response outside
	// FULL_DUPLEX_STREAMED.
	SpuriousStreamedResponse = "spurious message: streamed_response is received while body_mode_ is not FULL_DUPLEX_STREAMED"
	// ProcessorState::handleStreamedBodyCallback: a body response without
	// streamed_response in FULL_DUPLEX_STREAMED.
	SpuriousNormalInDuplex = "spurious message: Normal body mutation response is received while body_mode_ is FULL_DUPLEX_STREAMED"
)

// FailCloseSpurious is the runtime guard
// envoy.reloadable_features.ext_proc_fail_close_spurious_resp, on by default:
// a RUNTIME_GUARD (not FALSE_RUNTIME_GUARD) in
// source/common/runtime/runtime_features.cc, read in a stored copy from the
// 1.37-1.39 range (it lists ext_proc_stream_close_optimization, added in 1.37
// and removed in 1.40); changelogs/1.37.0.yaml to 1.40.0.yaml neither flip
// nor remove it, and Filter::onReceiveMessage (ext_proc.cc) reads it: a spurious
// message with failure_mode_allow false is an error reply
// (Filter::handleErrorResponse) instead of "close the stream and continue".
const FailCloseSpurious = true

// SpuriousKind is the message of a response that arrived when the filter
// was not waiting for its kind.
func SpuriousKind(resp *extprocv3.ProcessingResponse) string {
	switch resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders, *extprocv3.ProcessingResponse_RequestBody,
		*extprocv3.ProcessingResponse_ResponseHeaders, *extprocv3.ProcessingResponse_ResponseBody,
		*extprocv3.ProcessingResponse_RequestTrailers, *extprocv3.ProcessingResponse_ResponseTrailers:
		return SpuriousMessage
	}
	return SpuriousUnhandled
}

// FULL_DUPLEX_STREAMED response bodies, entered through a mode_override in
// the request-headers or the response-headers reply (extprocfilter fullduplex.go). Read in
// source/extensions/filters/http/ext_proc/ext_proc.cc and processor_state.cc
// [verify: source/extensions/filters/http/ext_proc/ext_proc.cc
// Filter::onReceiveMessage, onData and handleDuplexStreamedBodyResponse,
// source/extensions/filters/http/ext_proc/processor_state.cc
// ProcessorState::handleHeadersResponse and handleStreamedBodyCallback: read
// on a recent envoyproxy/envoy main; no stored copy is at v1.40.0; 1.38
// fixed injection on these paths (changelogs/1.38.0.yaml bug_fixes, area
// ext_proc: ext_proc_inject_data_with_state_update for two ext_proc filters
// in one chain, ext_proc_return_stop_iteration for empty data chunks)]:
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
//     external_processor.proto at v1.40.0, StreamedBodyResponse.
//     end_of_stream: "The server sets this flag to true if it has received
//     a body request with end_of_stream set to true, and this is the last
//     chunk of body responses"), and closes the gRPC stream
//     (closeGrpcStreamIfLastRespReceived, isLastBodyResponse). The HTTP
//     stream is then complete and its filters destroyed; the router's
//     onDestroy resets an upstream request still in flight
//     (source/common/router/router.cc Filter::onDestroy → resetAll;
//     source/common/http/conn_manager_impl.cc doEndStream) [verify:
//     source/common/router/router.cc Filter::onDestroy and
//     source/common/http/conn_manager_impl.cc
//     ConnectionManagerImpl::doEndStream: no stored copy at v1.40.0]. The
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
// Filter::addAttributes was read in a stored ext_proc.cc with the 1.37
// guard ext_proc_stream_close_optimization: it returns unless
// state.sendAttributes(), evaluates, calls setSentAttributes(true) and sets
// attributes[FilterName] [verify:
// source/extensions/filters/http/ext_proc/ext_proc.cc Filter::addAttributes,
// source/extensions/filters/http/ext_proc/matching_utils.cc
// ExpressionManager::evaluateAttributes and
// source/extensions/filters/common/expr/context.cc extractSslInfo: read on
// a recent envoyproxy/envoy main; no stored copy is at v1.40.0].
const ExtProcAttrNamespace = "envoy.filters.http.ext_proc"

var EmulatedAttributes = []string{"connection.uri_san_peer_certificate", "connection.mtls"}

// ExtProcAttributes evaluates the emulated expressions against the
// downstream connection's TLS state (nil: plaintext).
func ExtProcAttributes(exprs []string, cs *tls.ConnectionState) *structpb.Struct {
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
