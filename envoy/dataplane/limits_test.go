package dataplane

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// TestHeaderMutationLimits follows MutationUtils::applyHeaderMutations
// (source/extensions/filters/http/ext_proc/mutation_utils.cc): a mutation
// listing more removals or set_headers than the header map may hold is
// refused up front (responseHeaderSizeCheck), and the mutated map must stay
// within max_headers_count and max_request_headers_kb, pseudo-headers
// included (headerMutationResultCheck). Either failure is a local reply
// with status_on_error and Envoy's message as details.
func TestHeaderMutationLimits(t *testing.T) {
	setN := func(prefix string, n int, value string) *extprocv3.HeaderMutation {
		m := &extprocv3.HeaderMutation{}
		for i := range n {
			m.SetHeaders = append(m.SetHeaders, set(fmt.Sprintf("%s-%d", prefix, i), value))
		}
		return m
	}
	tests := []struct {
		name       string
		reqMut     *extprocv3.HeaderMutation // on request_headers
		respMut    *extprocv3.HeaderMutation // on response_headers
		wantStatus int
		wantPrefix string
		wantSuffix string
	}{
		{name: "within the limits", reqMut: setN("x-a", 2, "v"), respMut: setN("x-b", 2, "v"), wantStatus: 200},
		{name: "more set_headers than the map may hold", reqMut: setN("x-a", 13, "v"), wantStatus: 500,
			wantPrefix: "500 Header_mutation_remove_header_count_0_or_set_header_count_13_exceed_the_HCM_header_countlimit_12"},
		{name: "request headers over max_headers_count after the mutation", reqMut: setN("x-a", 12, "v"), wantStatus: 500,
			wantPrefix: "500 Header_mutation_causes_end_result_header_count_",
			wantSuffix: "_exceeding_the_count_limit_12_or_the_size_limit_1_kilobytes"},
		{name: "request headers over max_request_headers_kb after the mutation",
			reqMut: setN("x-a", 2, strings.Repeat("v", 600)), wantStatus: 500,
			wantPrefix: "500 Header_mutation_causes_end_result_header_count_",
			wantSuffix: "_exceeding_the_count_limit_12_or_the_size_limit_1_kilobytes"},
		{name: "response headers over the upstream default count", respMut: setN("x-b", 100, "v"), wantStatus: 500,
			wantPrefix: "500 Header_mutation_causes_end_result_header_count_",
			wantSuffix: "_exceeding_the_count_limit_100_or_the_size_limit_60_kilobytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("upstream")) })
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				switch {
				case req.GetRequestHeaders() != nil:
					return reqHeadersResp(&extprocv3.CommonResponse{HeaderMutation: tt.reqMut}), nil
				case req.GetResponseHeaders() != nil:
					return respHeadersResp(&extprocv3.CommonResponse{HeaderMutation: tt.respMut}), nil
				}
				return continueAll(req)
			}
			e := newEnv(t, fn, setup{
				extProc:  defaultExtProc(),
				routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
				localReply: &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{
					statusMapper(500, "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS%")}},
				hcm: func(h *hcmv3.HttpConnectionManager) {
					h.MaxRequestHeadersKb = wrapperspb.UInt32(1)
					h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxHeadersCount: wrapperspb.UInt32(12)}
				},
			})
			got := e.do("POST", "/mcp/core", rpcBody, nil)
			if got.status != tt.wantStatus || !strings.HasPrefix(got.body, tt.wantPrefix) || !strings.HasSuffix(got.body, tt.wantSuffix) {
				t.Fatalf("got %d %q, want %d %q…%q", got.status, got.body, tt.wantStatus, tt.wantPrefix, tt.wantSuffix)
			}
			if tt.wantStatus == 200 && got.body != "upstream" {
				t.Fatalf("body %q", got.body)
			}
		})
	}
}

// TestExtProcErrorDetails pins the %RESPONSE_CODE_DETAILS% of each ext_proc
// error reply to Envoy's format (source/extensions/filters/http/ext_proc/
// ext_proc.cc: ErrorPrefix "ext_proc_error", onGrpcError's
// "%s_gRPC_error_%i{%s}", onMessageTimeout's "%s_per-message_timeout_exceeded",
// the FailedPrecondition messages of onReceiveMessage and processor_state.cc,
// and mutation_utils.cc's errors), all passed through
// StringUtil::replaceAllEmptySpace by sendImmediateResponse.
func TestExtProcErrorDetails(t *testing.T) {
	mutationErr := func(m *extprocv3.HeaderMutation, checker *rules.MutationChecker) string {
		h := &headers.Map{H: []headers.Header{{Key: ":authority", Value: "a"}, {Key: "host", Value: "a"}}}
		err := applyHeaderMutation(m, h, checker, false, false, headerLimits{count: 4, kb: 1})
		if err == nil {
			return "<nil>"
		}
		return rules.ResponseDetails(err.Error())
	}
	strict := &rules.MutationChecker{DisallowIsError: true}
	tests := []struct{ name, got, want string }{
		{"gRPC error", rules.GRPCErrorDetails(14, "upstream connect error"), "ext_proc_error_gRPC_error_14{upstream_connect_error}"},
		{"gRPC error without message", rules.GRPCErrorDetails(4, ""), "ext_proc_error_gRPC_error_4{}"},
		{"message timeout", rules.DetailsMessageTimeout, "ext_proc_error_per-message_timeout_exceeded"},
		{"spurious message", rules.ResponseDetails(rules.SpuriousMessage), "spurious_message"},
		{"unhandled message", rules.ResponseDetails(rules.SpuriousUnhandled), "unhandled_message"},
		{"disabled immediate response", rules.ResponseDetails(rules.SpuriousImmediateDisabled),
			"unhandled_immediate_response_due_to_config_disabled_it"},
		{"streamed_response", rules.ResponseDetails(rules.SpuriousStreamedResponse),
			"spurious_message:_streamed_response_is_received_while_body_mode__is_not_FULL_DUPLEX_STREAMED"},
		{"content-length mismatch", rules.ResponseDetails(rules.ErrContentLengthMismatch),
			"mismatch_between_content_length_and_the_length_of_the_mutated_body"},
		{"disallowed set", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("host", "b")}}, strict),
			"Invalid_attempt_to_modify_host"},
		{"disallowed remove", mutationErr(&extprocv3.HeaderMutation{RemoveHeaders: []string{"host"}}, strict),
			"Invalid_attempt_to_remove_host"},
		{"invalid set_headers", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-a", "a\nb")}}, strict),
			"Invalid_character_in_set_headers_mutation."},
		{"invalid remove_headers", mutationErr(&extprocv3.HeaderMutation{RemoveHeaders: []string{"x a"}}, strict),
			"Invalid_character_in_remove_headers_mutation."},
		{"value and raw_value", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header: &corev3.HeaderValue{Key: "x-a", Value: "1", RawValue: []byte("2")}}}}, strict),
			"Only_one_of_value_or_raw_value_in_the_HeaderValue_message_should_be_set."},
		{"too many set_headers", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			set("x-a", "1"), set("x-b", "1"), set("x-c", "1"), set("x-d", "1"), set("x-e", "1")}}, &rules.MutationChecker{}),
			"Header_mutation_remove_header_count_0_or_set_header_count_5_exceed_the_HCM_header_countlimit_4"},
		{"result over the limits", mutationErr(&extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			set("x-a", "1"), set("x-b", "1"), set("x-c", "1")}}, &rules.MutationChecker{}),
			"Header_mutation_causes_end_result_header_count_5_or_header_size_28_bytes,_exceeding_the_count_limit_4_or_the_size_limit_1_kilobytes"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: details %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
