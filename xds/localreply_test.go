package xds

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// localReply is what an Envoy local reply looks like to local_reply_config.
type localReply struct {
	meta   map[string]any // dynamic metadata of namespace toolmesh
	flags  []string       // response flags
	status uint32
}

// matches evaluates the access-log filter kinds the translator uses, with
// Envoy's semantics (a missing metadata key uses match_if_key_not_found).
func matches(t *testing.T, f *accesslogv3.AccessLogFilter, r localReply) bool {
	t.Helper()
	switch s := f.GetFilterSpecifier().(type) {
	case *accesslogv3.AccessLogFilter_AndFilter:
		for _, sub := range s.AndFilter.GetFilters() {
			if !matches(t, sub, r) {
				return false
			}
		}
		return true
	case *accesslogv3.AccessLogFilter_OrFilter:
		for _, sub := range s.OrFilter.GetFilters() {
			if matches(t, sub, r) {
				return true
			}
		}
		return false
	case *accesslogv3.AccessLogFilter_ResponseFlagFilter:
		for _, fl := range s.ResponseFlagFilter.GetFlags() {
			if slices.Contains(r.flags, fl) {
				return true
			}
		}
		return false
	case *accesslogv3.AccessLogFilter_StatusCodeFilter:
		c := s.StatusCodeFilter.GetComparison()
		v := c.GetValue().GetDefaultValue()
		switch c.GetOp() {
		case accesslogv3.ComparisonFilter_EQ:
			return r.status == v
		case accesslogv3.ComparisonFilter_GE:
			return r.status >= v
		}
	case *accesslogv3.AccessLogFilter_MetadataFilter:
		m := s.MetadataFilter.GetMatcher()
		if m.GetFilter() != wire.MetadataNamespace || len(m.GetPath()) != 1 {
			t.Fatalf("unexpected metadata matcher %v", m)
		}
		v, ok := r.meta[m.GetPath()[0].GetKey()]
		if !ok {
			nf := s.MetadataFilter.GetMatchIfKeyNotFound()
			return nf == nil || nf.GetValue()
		}
		return valueMatches(t, m.GetValue(), v)
	}
	t.Fatalf("filter %T not evaluated by this test", f.GetFilterSpecifier())
	return false
}

func valueMatches(t *testing.T, m *matcherv3.ValueMatcher, v any) bool {
	t.Helper()
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_PresentMatch:
		return p.PresentMatch
	case *matcherv3.ValueMatcher_StringMatch:
		s, ok := v.(string)
		return ok && s == p.StringMatch.GetExact()
	case *matcherv3.ValueMatcher_BoolMatch:
		b, ok := v.(bool)
		return ok && b == p.BoolMatch
	case *matcherv3.ValueMatcher_OrMatch:
		for _, sub := range p.OrMatch.GetValueMatchers() {
			if valueMatches(t, sub, v) {
				return true
			}
		}
		return false
	}
	t.Fatalf("value matcher %T not evaluated by this test", m.GetMatchPattern())
	return false
}

// render substitutes the DYNAMIC_METADATA commands the way Envoy's text
// formatter does for string values (unquoted) and unescapes %%.
func render(t *testing.T, m *hcmv3.ResponseMapper, meta map[string]any) string {
	t.Helper()
	s := m.GetBodyFormatOverride().GetTextFormatSource().GetInlineString()
	for k, v := range meta {
		if str, ok := v.(string); ok {
			s = strings.ReplaceAll(s, "%DYNAMIC_METADATA("+wire.MetadataNamespace+":"+k+")%", str)
		}
	}
	if strings.Contains(strings.ReplaceAll(s, "%%", ""), "%") {
		t.Fatalf("unsubstituted command left in %s", s)
	}
	return strings.ReplaceAll(s, "%%", "%")
}

func TestLocalReplyMappers(t *testing.T) {
	opts := Options{ServerName: `gw "100%"`, ServerVersion: "1.0"}.withDefaults()
	mappers := buildLocalReplyConfig(opts).GetMappers()

	routed := func(id, era string) map[string]any {
		m := map[string]any{
			wire.MetadataToolCall:  "true",
			wire.MetadataJSONRPCID: id,
			wire.MetadataTool:      "get_weather",
		}
		if era != "" {
			m[metadataEra] = era
		}
		return m
	}
	answered := map[string]any{wire.MetadataAnswered: "true"}
	for _, tc := range []struct {
		name  string
		reply localReply
		want  string // "timeout", "unavailable", "error <code>" or "" for untouched
		era   bool   // expect the 2026-era shape
	}{
		{"upstream timeout, legacy, numeric id", localReply{routed("7", "legacy"), []string{"UT"}, 504}, "timeout", false},
		{"upstream timeout, 2026, string id", localReply{routed(`"abc"`, eraStateless), []string{"UT"}, 504}, "timeout", true},
		{"504 without flag", localReply{routed("1.0", ""), nil, 504}, "timeout", false},
		{"no healthy upstream", localReply{routed("7", "legacy"), []string{"UH"}, 503}, "unavailable", false},
		{"circuit breaker overflow, 2026", localReply{routed("8", eraStateless), []string{"UO"}, 503}, "unavailable", true},
		{"connect failure after retries", localReply{routed("9", "legacy"), []string{"UF", "URX"}, 503}, "unavailable", false},
		{"response too large to buffer", localReply{routed("10", "legacy"), nil, 500}, "unavailable", false},
		{"tool_call as a bool", localReply{map[string]any{wire.MetadataToolCall: true, wire.MetadataJSONRPCID: "3", wire.MetadataTool: "t"}, []string{"UH"}, 503}, "unavailable", false},
		// The extproc server's ImmediateResponses are marked and keep their
		// bodies, whatever their status.
		{"immediate response 400", localReply{answered, nil, 400}, "", false},
		{"immediate response 413", localReply{answered, nil, 413}, "", false},
		{"immediate response 500", localReply{answered, nil, 500}, "", false},
		{"immediate response 200", localReply{answered, nil, 200}, "", false},
		// Any other local reply is a JSON-RPC error with id null.
		{"ext_proc unreachable", localReply{nil, nil, 500}, "error -32603", false},
		{"ext_proc message timeout", localReply{nil, nil, 504}, "error -32603", false},
		{"no healthy upstream outside a tool call", localReply{map[string]any{wire.MetadataJSONRPCID: "1"}, []string{"UH"}, 503}, "error -32603", false},
		{"tool call without a stored id", localReply{map[string]any{wire.MetadataToolCall: "true"}, []string{"UH"}, 503}, "error -32603", false},
		{"tool_call false", localReply{map[string]any{wire.MetadataToolCall: "false", wire.MetadataJSONRPCID: "1"}, []string{"UH"}, 503}, "error -32603", false},
		{"413 on a tool call", localReply{routed("1", "legacy"), nil, 413}, "error -32600", false},
		{"body over the buffer limit", localReply{nil, nil, 413}, "error -32600", false},
		{"too many headers", localReply{nil, nil, 431}, "error -32600", false},
		{"escaped slash in the path", localReply{nil, nil, 400}, "error -32600", false},
		// Local replies that are not errors keep their bodies.
		{"404 direct response", localReply{nil, nil, 404}, "", false},
		{"200 direct response", localReply{nil, nil, 200}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hit *hcmv3.ResponseMapper
			for _, m := range mappers {
				if matches(t, m.GetFilter(), tc.reply) {
					hit = m
					break
				}
			}
			if tc.want == "" {
				if hit != nil && (hit.GetBodyFormatOverride() != nil || hit.GetBody() != nil || hit.GetStatusCode() != nil || len(hit.GetHeadersToAdd()) > 0) {
					t.Fatalf("a mapper rewrote a reply it must leave alone: %s", render(t, hit, tc.reply.meta))
				}
				return
			}
			if hit == nil {
				t.Fatal("no mapper matched")
			}
			if code, ok := strings.CutPrefix(tc.want, "error "); ok {
				if hit.GetStatusCode() != nil || hit.GetBodyFormatOverride().GetContentType() != "application/json" {
					t.Errorf("mapper sets status %v, content type %q; want the status kept and application/json",
						hit.GetStatusCode(), hit.GetBodyFormatOverride().GetContentType())
				}
				body := render(t, hit, tc.reply.meta)
				var got struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   struct {
						Code    json.Number `json:"code"`
						Message string      `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &got); err != nil {
					t.Fatalf("body is not JSON: %v\n%s", err, body)
				}
				if got.JSONRPC != "2.0" || string(got.ID) != "null" || string(got.Error.Code) != code || got.Error.Message == "" {
					t.Errorf("body %s, want a JSON-RPC error %s with id null", body, code)
				}
				return
			}
			if hit.GetStatusCode().GetValue() != 200 || hit.GetBodyFormatOverride().GetContentType() != "application/json" {
				t.Errorf("mapper replies %d %q, want 200 application/json", hit.GetStatusCode().GetValue(), hit.GetBodyFormatOverride().GetContentType())
			}
			body := render(t, hit, tc.reply.meta)
			var got struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Result  struct {
					Content []struct{ Type, Text string } `json:"content"`
					IsError bool                          `json:"isError"`
					Type    string                        `json:"resultType"`
					Meta    map[string]struct {
						Name, Version string
					} `json:"_meta"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, body)
			}
			if string(got.ID) != tc.reply.meta[wire.MetadataJSONRPCID] {
				t.Errorf("id %s, want %s byte for byte", got.ID, tc.reply.meta[wire.MetadataJSONRPCID])
			}
			r := got.Result
			if got.JSONRPC != "2.0" || !r.IsError || len(r.Content) != 1 || r.Content[0].Type != "text" ||
				!strings.HasSuffix(r.Content[0].Text, "failed: "+tc.want) {
				t.Errorf("unexpected result %s", body)
			}
			info, hasInfo := r.Meta["io.modelcontextprotocol/serverInfo"]
			if tc.era {
				if r.Type != "complete" || !hasInfo || info.Name != opts.ServerName || info.Version != "1.0" {
					t.Errorf("2026-era result lacks resultType or serverInfo: %s", body)
				}
			} else if r.Type != "" || hasInfo {
				t.Errorf("legacy result carries 2026 fields: %s", body)
			}
		})
	}
}
