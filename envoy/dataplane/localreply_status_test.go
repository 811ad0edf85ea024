package dataplane

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// errorMapperConfig turns every local reply of status >= 400 into a body
// that reports the status, details and local body, with a content type of
// its own, as toolmesh's generic mappers reshape Envoy's own replies.
func errorMapperConfig() *hcmv3.LocalReplyConfig {
	return &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{{
		Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{
			StatusCodeFilter: &accesslogv3.StatusCodeFilter{Comparison: &accesslogv3.ComparisonFilter{
				Op: accesslogv3.ComparisonFilter_GE, Value: &corev3.RuntimeUInt32{DefaultValue: 400, RuntimeKey: "k"},
			}},
		}},
		BodyFormatOverride: &corev3.SubstitutionFormatString{
			ContentType: "text/x-local-reply",
			Format:      &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS% %LOCAL_REPLY_BODY%"},
		},
	}}}
}

// TestCodecAndFilterRepliesUseLocalReplyConfig checks that the replies Envoy
// makes before or around the filters — codec errors (431, 400), path
// normalization (400), the buffer limit (413), an unreachable ext_proc
// server (500) and a header mutation over the header count (500) — all go
// through local_reply_config, like router replies do.
func TestCodecAndFilterRepliesUseLocalReplyConfig(t *testing.T) {
	many := map[string]string{}
	for i := range 20 {
		many[fmt.Sprintf("x-h%d", i)] = "v"
	}
	for _, tc := range []struct {
		name        string
		hcm         func(*hcmv3.HttpConnectionManager)
		unreachable bool // ext_proc server address closed
		fn          processFunc
		path, body  string
		hdr         map[string]string
		status      int
		message     string
	}{
		{name: "too many headers", hcm: func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxHeadersCount: wrapperspb.UInt32(10)}
		}, hdr: many, status: 431, message: "431 http1.too_many_headers Request Header Fields Too Large"},
		{name: "headers too large", hcm: func(h *hcmv3.HttpConnectionManager) {
			h.MaxRequestHeadersKb = wrapperspb.UInt32(1)
		}, hdr: map[string]string{"x-big": strings.Repeat("a", 2048)}, status: 431, message: "431 http1.headers_too_large Request Header Fields Too Large"},
		{name: "underscore in a header name", hcm: func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_REJECT_REQUEST}
		}, hdr: map[string]string{"x_a": "1"}, status: 400, message: "400 http1.unexpected_underscore Bad Request"},
		{name: "escaped slash", hcm: func(h *hcmv3.HttpConnectionManager) {
			h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_REJECT_REQUEST
		}, path: "/mcp/a%2Fb", status: 400, message: "400 path_normalization_failed "},
		{name: "body over the buffer limit", fn: continueAll, body: strings.Repeat("x", 100), status: 413,
			message: "413 request_payload_too_large Payload Too Large"},
		{name: "ext_proc server unreachable", unreachable: true, body: "{}", status: 500,
			message: "500 ext_proc_error_gRPC_error_14{upstream_connect_error_or_disconnect/reset_before_headers._reset_reason:_remote_connection_failure{upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:"},
		{name: "header mutation over the header count", hcm: func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{MaxHeadersCount: wrapperspb.UInt32(12)}
		}, fn: func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
			if req.GetRequestHeaders() != nil {
				return reqHeadersResp(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
					SetHeaders: []*corev3.HeaderValueOption{set("x-a", "1"), set("x-b", "1"), set("x-c", "1"), set("x-d", "1")},
				}}), nil
			}
			return continueAll(req)
		}, hdr: map[string]string{"x-1": "1", "x-2": "2"}, status: 500, message: "500 Header_mutation_causes_end_result_header_count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup{
				extProc: defaultExtProc(), localReply: errorMapperConfig(), hcm: tc.hcm,
				routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", closedAddr(t))},
				vhost:    func(vh *routev3.VirtualHost) { vh.RequestBodyBufferLimit = wrapperspb.UInt64(10) },
			}
			var e *env
			if tc.unreachable {
				dp, err := New(Options{ExtProcTarget: closedAddr(t)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = dp.Close() })
				if err := dp.Apply(s.resources(t)); err != nil {
					t.Fatal(err)
				}
				e = &env{t: t, dp: dp, srv: httptest.NewServer(dp)}
				t.Cleanup(e.srv.Close)
			} else {
				fn := tc.fn
				if fn == nil {
					fn = continueAll
				}
				e = newEnv(t, fn, s)
			}
			path := tc.path
			if path == "" {
				path = "/mcp/core"
			}
			got := e.do("POST", path, tc.body, tc.hdr)
			if got.status != tc.status || got.header.Get("Content-Type") != "text/x-local-reply" || !strings.HasPrefix(got.body, tc.message) {
				t.Fatalf("got %d %q %q, want %d text/x-local-reply %q...", got.status, got.header.Get("Content-Type"), got.body, tc.status, tc.message)
			}
		})
	}
}
