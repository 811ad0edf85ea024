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
		// An HTTP/1 upstream response's map has the HTTP/1 codec's limits:
		// 100 headers and 80 KiB, not 60 (rules.ResponseHeaderLimits).
		{name: "response headers over the upstream default count", respMut: setN("x-b", 100, "v"), wantStatus: 500,
			wantPrefix: "500 Header_mutation_causes_end_result_header_count_",
			wantSuffix: "_exceeding_the_count_limit_100_or_the_size_limit_80_kilobytes"},
		{name: "HTTP/1 response headers over 60 KiB and within 80 KiB", respMut: setN("x-b", 2, strings.Repeat("v", 35000)), wantStatus: 200},
		{name: "HTTP/1 response headers over 80 KiB", respMut: setN("x-b", 2, strings.Repeat("v", 42000)), wantStatus: 500,
			wantPrefix: "500 Header_mutation_causes_end_result_header_count_",
			wantSuffix: "_exceeding_the_count_limit_100_or_the_size_limit_80_kilobytes"},
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
