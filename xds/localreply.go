package xds

import (
	"encoding/json"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/registry"
)

// Local replies (SPEC §2, §6). Envoy does not hand its own replies (no
// healthy upstream, connect failure, overflow, upstream timeout) to ext_proc,
// so the HTTP connection manager reshapes them: for a routed tools/call only,
// the reply becomes HTTP 200 application/json with a JSON-RPC result
// {"isError": true} that echoes the request's id byte for byte.
//
// "Routed tools/call only" is an AND of dynamic metadata the extproc server
// sets in the request-body phase (namespace toolmesh): tool_call == "true"
// and jsonrpc_id present. Missing keys never match, so ext_proc's own
// ImmediateResponses (which carry no such metadata), direct responses and
// requests that were never routed keep their bodies untouched.
//
//	mapper                  condition (besides the tool-call match)        text
//	timeout, 2026 era       (flag UT or status 504) and era == 2026-07-28  tool T failed: timeout
//	timeout, legacy         flag UT or status 504                          tool T failed: timeout
//	unavailable, 2026 era   (503-family flag or status >= 500) and era     tool T failed: unavailable
//	unavailable, legacy     503-family flag or status >= 500               tool T failed: unavailable
//
// Mappers are tried in order and the first match wins, so the legacy ones
// need no era condition. 2026-era results also carry resultType "complete"
// and _meta["io.modelcontextprotocol/serverInfo"].
const (
	// metadataEra holds the protocol era the extproc server wrote.
	metadataEra  = registry.MetadataEra
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
		metadataFilter(registry.MetadataToolCall, &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{
			// The key is documented as the string "true"; a bool true is
			// accepted too so a typed writer cannot silently disable this.
			OrMatch: &matcherv3.OrMatcher{ValueMatchers: []*matcherv3.ValueMatcher{
				{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: exact("true")}},
				{MatchPattern: &matcherv3.ValueMatcher_BoolMatch{BoolMatch: true}},
			}},
		}}),
		metadataFilter(registry.MetadataJSONRPCID, &matcherv3.ValueMatcher{
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
	return &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{
		mapper([]*accesslogv3.AccessLogFilter{stateless, timeout}, "timeout", meta),
		mapper([]*accesslogv3.AccessLogFilter{timeout}, "timeout", ""),
		mapper([]*accesslogv3.AccessLogFilter{stateless, unavailable}, "unavailable", meta),
		mapper([]*accesslogv3.AccessLogFilter{unavailable}, "unavailable", ""),
	}}
}

// toolErrorBody is the substitution format of a CallToolResult with
// isError. The id and tool name come verbatim from dynamic metadata: the
// extproc server stores the id as its exact JSON text (7 or "7"), and tool
// names are [A-Za-z0-9_.-] (SPEC §4), so neither needs escaping.
func toolErrorBody(what, extra string) string {
	return `{"jsonrpc":"2.0","id":%DYNAMIC_METADATA(` + registry.MetadataNamespace + `:` + registry.MetadataJSONRPCID + `)%,` +
		`"result":{"content":[{"type":"text","text":"tool %DYNAMIC_METADATA(` + registry.MetadataNamespace + `:` + registry.MetadataTool + `)% failed: ` + what + `"}],` +
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
				Filter: registry.MetadataNamespace,
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
