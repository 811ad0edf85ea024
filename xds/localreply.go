package xds

import (
	"encoding/json"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// Local replies (docs/contracts/mcp.md). The HTTP connection manager
// reshapes Envoy's own replies (no healthy upstream, connect failure,
// overflow, upstream timeout): for a routed tools/call only, the reply
// becomes HTTP 200 application/json with a JSON-RPC result {"isError": true}
// that echoes the request's id byte for byte, marked with the
// x-toolmesh-local-reply header (timeout or unavailable) for the extproc
// server, which sees the reshaped headers on the response path
// (envoy/dataplane/internal/rules/rules.go, "Local replies and ext_proc").
//
// "Routed tools/call only" is an AND of dynamic metadata the extproc server
// sets in the request-body phase (namespace toolmesh): tool_call == "true"
// and jsonrpc_id present. Missing keys never match.
//
// Every other reply Envoy makes up itself becomes a JSON-RPC error with
// "id": null (the request id is unknown: the body was never parsed, or the
// extproc server is gone) and content-type application/json, keeping its
// status. Each of these goes through local_reply_config in Envoy: HTTP/1
// codec errors (431 too many or too large headers, 400 invalid headers) via
// ServerConnectionImpl::sendProtocolError → ActiveStream::sendLocalReply
// (source/common/http/http1/codec_impl.cc, conn_manager_impl.cc), a 400 from
// path normalization via ConnectionManagerImpl::ActiveStream::decodeHeaders,
// a 413 over the buffer limit via FilterManager (requestDataTooLarge), and
// ext_proc's 500/504 (gRPC error such as ext_proc_error_gRPC_error_14 for an
// unreachable server, message timeout, rejected mutation) via
// Filter::sendImmediateResponse → sendLocalReply; all of them reach
// LocalReplyImpl::rewrite (source/common/local_reply/local_reply.cc) through
// Utility::sendLocalReply. The extproc server's own ImmediateResponses are
// JSON-RPC replies already: it marks them with answered == "true", and a
// pass-through mapper keeps them as they are.
//
//	mapper                  condition                                       reply
//	timeout, 2026 era       tool call, (flag UT or 504), era == 2026-07-28  200, tool T failed: timeout
//	timeout, legacy         tool call, flag UT or status 504                200, tool T failed: timeout
//	unavailable, 2026 era   tool call, (503-family flag or >= 500), era     200, tool T failed: unavailable
//	unavailable, legacy     tool call, 503-family flag or status >= 500     200, tool T failed: unavailable
//	extproc answer          answered == "true"                              unchanged
//	body too large          status 413                                      413, -32600
//	headers too large       status 431                                      431, -32600
//	bad request             status 400                                      400, -32600
//	gateway error           status >= 500                                   unchanged status, -32603
//
// Mappers are tried in order and the first match wins, so the legacy ones
// need no era condition and the generic ones no "not a tool call" one.
// 2026-era results also carry resultType "complete" and
// _meta["io.modelcontextprotocol/serverInfo"]. The gateway-error mapper also
// covers the unrouted direct response (routes.go), which is the same
// -32603 error.
const (
	// metadataEra holds the protocol era the extproc server wrote.
	metadataEra  = wire.MetadataEra
	eraStateless = "2026-07-28"
)

// unavailableFlags are Envoy's response flags for a call that never got an
// answer from the Tool Service: UH no healthy upstream, UF connect failure,
// UO overflow (circuit breaker), URX retry limit, NR no route, NC no
// cluster, LH failed local health check, UR remote reset, UC connection
// termination, DO dropped by overload.
var unavailableFlags = []string{"UH", "UF", "UO", "URX", "NR", "NC", "LH", "UR", "UC", "DO"}

func buildLocalReplyConfig(opts Options) *hcmv3.LocalReplyConfig {
	toolCall := []*accesslogv3.AccessLogFilter{
		metadataFilter(wire.MetadataToolCall, &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{
			// The key is documented as the string "true"; a bool true is
			// accepted too so a typed writer cannot silently disable this.
			OrMatch: &matcherv3.OrMatcher{ValueMatchers: []*matcherv3.ValueMatcher{
				{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: exact("true")}},
				{MatchPattern: &matcherv3.ValueMatcher_BoolMatch{BoolMatch: true}},
			}},
		}}),
		metadataFilter(wire.MetadataJSONRPCID, &matcherv3.ValueMatcher{
			MatchPattern: &matcherv3.ValueMatcher_PresentMatch{PresentMatch: true},
		}),
	}
	stateless := metadataFilter(metadataEra, &matcherv3.ValueMatcher{
		MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: exact(eraStateless)},
	})
	timeout := orFilter(
		&accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
			ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{"UT"}},
		}},
		statusFilter(accesslogv3.ComparisonFilter_EQ, 504, "toolmesh.local_reply.timeout_status"),
	)
	unavailable := orFilter(
		&accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
			ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: unavailableFlags},
		}},
		statusFilter(accesslogv3.ComparisonFilter_GE, 500, "toolmesh.local_reply.unavailable_min_status"),
	)
	meta := serverInfoMeta(opts)
	mapper := func(cond []*accesslogv3.AccessLogFilter, what, extra string) *hcmv3.ResponseMapper {
		filters := append(append([]*accesslogv3.AccessLogFilter{}, toolCall...), cond...)
		return &hcmv3.ResponseMapper{
			Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_AndFilter{
				AndFilter: &accesslogv3.AndFilter{Filters: filters},
			}},
			StatusCode: wrapperspb.UInt32(200),
			// The reply then passes ext_proc's encoder path (Envoy >= 1.37),
			// where the extproc server reads this header to count the call
			// as timeout or unavailable, and removes it.
			HeadersToAdd: []*corev3.HeaderValueOption{{
				Header:       &corev3.HeaderValue{Key: wire.LocalReplyHeader, Value: what},
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}},
			BodyFormatOverride: &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormatSource{
					TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
						InlineString: toolErrorBody(what, extra),
					}},
				},
				ContentType: "application/json",
			},
		}
	}
	answered := metadataFilter(wire.MetadataAnswered, &matcherv3.ValueMatcher{
		MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: exact("true")},
	})
	return &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{
		mapper([]*accesslogv3.AccessLogFilter{stateless, timeout}, wire.LocalReplyTimeout, meta),
		mapper([]*accesslogv3.AccessLogFilter{timeout}, wire.LocalReplyTimeout, ""),
		mapper([]*accesslogv3.AccessLogFilter{stateless, unavailable}, wire.LocalReplyUnavailable, meta),
		mapper([]*accesslogv3.AccessLogFilter{unavailable}, wire.LocalReplyUnavailable, ""),
		// No status and no body: the first match ends the search and keeps
		// the reply as it is.
		{Filter: answered},
		errorMapper(statusFilter(accesslogv3.ComparisonFilter_EQ, 413, "toolmesh.local_reply.body_too_large_status"),
			codeInvalidRequest, "Request body too large"),
		errorMapper(statusFilter(accesslogv3.ComparisonFilter_EQ, 431, "toolmesh.local_reply.headers_too_large_status"),
			codeInvalidRequest, "Request header fields too large"),
		errorMapper(statusFilter(accesslogv3.ComparisonFilter_EQ, 400, "toolmesh.local_reply.bad_request_status"),
			codeInvalidRequest, "Bad request: the gateway rejected the request line or headers"),
		errorMapper(statusFilter(accesslogv3.ComparisonFilter_GE, 500, "toolmesh.local_reply.gateway_error_min_status"),
			codeInternalError, "Internal error: the gateway could not process the request"),
	}}
}

// JSON-RPC 2.0 error codes of the generic local replies.
const (
	codeInvalidRequest = -32600
	codeInternalError  = -32603
)

// errorMapper turns a local reply matching filter into a JSON-RPC error
// with id null, keeping its status.
func errorMapper(filter *accesslogv3.AccessLogFilter, code int, message string) *hcmv3.ResponseMapper {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(struct { // fixed types always marshal
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", nil, rpcError{code, message}})
	return &hcmv3.ResponseMapper{
		Filter: filter,
		BodyFormatOverride: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{
				TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
					InlineString: strings.ReplaceAll(string(body), "%", "%%"),
				}},
			},
			ContentType: "application/json",
		},
	}
}

// toolErrorBody is the substitution format of a CallToolResult with
// isError. The id and tool name come verbatim from dynamic metadata: the
// extproc server stores the id as its exact JSON text (7 or "7"), and tool
// names are [A-Za-z0-9_.-] (docs/contracts/toolservice.md), so neither needs
// escaping.
func toolErrorBody(what, extra string) string {
	return `{"jsonrpc":"2.0","id":%DYNAMIC_METADATA(` + wire.MetadataNamespace + `:` + wire.MetadataJSONRPCID + `)%,` +
		`"result":{"content":[{"type":"text","text":"tool %DYNAMIC_METADATA(` + wire.MetadataNamespace + `:` + wire.MetadataTool + `)% failed: ` + what + `"}],` +
		`"isError":true` + extra + `}}`
}

// serverInfoMeta is the 2026-era tail of a result: resultType and
// _meta.serverInfo, JSON-encoded once with % escaped for Envoy's formatter.
func serverInfoMeta(opts Options) string {
	info, _ := json.Marshal(map[string]string{"name": opts.ServerName, "version": opts.ServerVersion}) // strings always marshal
	s := `,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":` + string(info) + `}`
	return strings.ReplaceAll(s, "%", "%%")
}

func metadataFilter(key string, value *matcherv3.ValueMatcher) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_MetadataFilter{
		MetadataFilter: &accesslogv3.MetadataFilter{
			Matcher: &matcherv3.MetadataMatcher{
				Filter: wire.MetadataNamespace,
				Path:   []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: key}}},
				Value:  value,
			},
			// Envoy's default is to match when the key is missing; that would
			// rewrite every local reply, ImmediateResponses included.
			MatchIfKeyNotFound: wrapperspb.Bool(false),
		},
	}}
}

func orFilter(fs ...*accesslogv3.AccessLogFilter) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_OrFilter{
		OrFilter: &accesslogv3.OrFilter{Filters: fs},
	}}
}

func statusFilter(op accesslogv3.ComparisonFilter_Op, code uint32, runtimeKey string) *accesslogv3.AccessLogFilter {
	return &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{
		StatusCodeFilter: &accesslogv3.StatusCodeFilter{Comparison: &accesslogv3.ComparisonFilter{
			Op:    op,
			Value: &corev3.RuntimeUInt32{DefaultValue: code, RuntimeKey: runtimeKey},
		}},
	}}
}

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}
