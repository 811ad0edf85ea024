package dataplane

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestExtProcFailures follows Filter::onGrpcError, onGrpcClose,
// onMessageTimeout and onReceiveMessage's spurious-message branch
// (source/extensions/filters/http/ext_proc/ext_proc.cc): every error reply
// carries Envoy's %RESPONSE_CODE_DETAILS% (spaces replaced by '_'), uses
// status_on_error except the message timeout (always 504), and a spurious
// message is an error reply unless failure_mode_allow.
func TestExtProcFailures(t *testing.T) {
	hang := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) { return nil, nil }
	grpcErr := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		return nil, status.Error(codes.Internal, "boom went the server")
	}
	closeOK := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		return nil, errCloseStream
	}
	// onRequestHeaders answers the request_headers message with resp.
	onRequestHeaders := func(resp *extprocv3.ProcessingResponse) processFunc {
		return func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
			if req.GetRequestHeaders() != nil {
				return resp, nil
			}
			return continueAll(req)
		}
	}
	wrongKind := onRequestHeaders(respBodyResp(nil))
	responseOnRequestPath := onRequestHeaders(respHeadersResp(nil))
	onlyOverride := onRequestHeaders(&extprocv3.ProcessingResponse{ModeOverride: &extprocfilterv3.ProcessingMode{}})
	immediateReply := onRequestHeaders(immediate(403, "no", "denied"))
	// With request_body_mode STREAMED the chunk's reply can still fail the
	// request before anything went downstream.
	streamedResponse := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetRequestBody() != nil {
			return reqBodyResp(&extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
				Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{}}}}), nil
		}
		return continueAll(req)
	}
	// hangOnBody answers the headers and hangs on the body: the timeout is
	// the second message's, on the timer the first wait armed.
	hangOnBody := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetRequestBody() != nil {
			return nil, nil
		}
		return continueAll(req)
	}
	// hangOnResponse answers the request phases and hangs on the response
	// headers: the fourth wait of the stream times out.
	hangOnResponse := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetResponseHeaders() != nil {
			return nil, nil
		}
		return continueAll(req)
	}
	tests := []struct {
		name             string
		fn               processFunc
		allow            bool
		statusOnError    typev3.StatusCode
		disableImmediate bool
		streamedRequest  bool // request_body_mode STREAMED
		wantStatus       int
		wantBody         string
	}{
		{name: "message timeout is 504", fn: hang, wantStatus: 504, wantBody: "504 ext_proc_error_per-message_timeout_exceeded"},
		{name: "message timeout ignores status_on_error", fn: hang, statusOnError: 503,
			wantStatus: 504, wantBody: "504 ext_proc_error_per-message_timeout_exceeded"},
		{name: "message timeout with failure_mode_allow continues", fn: hang, allow: true, wantStatus: 200, wantBody: "upstream"},
		{name: "message timeout on the body after answered headers", fn: hangOnBody, wantStatus: 504,
			wantBody: "504 ext_proc_error_per-message_timeout_exceeded"},
		{name: "message timeout on the response headers", fn: hangOnResponse, wantStatus: 504,
			wantBody: "504 ext_proc_error_per-message_timeout_exceeded"},
		{name: "gRPC error is 500 with code and message", fn: grpcErr, wantStatus: 500,
			wantBody: "500 ext_proc_error_gRPC_error_13{boom_went_the_server}"},
		{name: "gRPC error uses status_on_error", fn: grpcErr, statusOnError: 503, wantStatus: 503,
			wantBody: "503 ext_proc_error_gRPC_error_13{boom_went_the_server}"},
		{name: "gRPC error with failure_mode_allow continues", fn: grpcErr, allow: true, wantStatus: 200, wantBody: "upstream"},
		{name: "clean close by the server continues", fn: closeOK, wantStatus: 200, wantBody: "upstream"},
		{name: "response of the wrong kind is 500", fn: wrongKind, wantStatus: 500, wantBody: "500 spurious_message"},
		{name: "response_headers answer on the request path is 500", fn: responseOnRequestPath,
			wantStatus: 500, wantBody: "500 spurious_message"},
		{name: "spurious message uses status_on_error", fn: wrongKind, statusOnError: 503, wantStatus: 503, wantBody: "503 spurious_message"},
		{name: "spurious message with failure_mode_allow continues", fn: wrongKind, allow: true, wantStatus: 200, wantBody: "upstream"},
		{name: "message without a response is 500", fn: onlyOverride, wantStatus: 500, wantBody: "500 unhandled_message"},
		{name: "disabled immediate response is 500", fn: immediateReply, disableImmediate: true,
			wantStatus: 500, wantBody: "500 unhandled_immediate_response_due_to_config_disabled_it"},
		{name: "disabled immediate response with failure_mode_allow continues", fn: immediateReply, disableImmediate: true,
			allow: true, wantStatus: 200, wantBody: "upstream"},
		{name: "streamed_response outside FULL_DUPLEX_STREAMED is 500", fn: streamedResponse, streamedRequest: true, wantStatus: 500,
			wantBody: "500 spurious_message:_streamed_response_is_received_while_body_mode__is_not_FULL_DUPLEX_STREAMED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("upstream")) })
			cfg := defaultExtProc()
			cfg.MessageTimeout = durationpb.New(100 * time.Millisecond)
			cfg.FailureModeAllow = tt.allow
			cfg.DisableImmediateResponse = tt.disableImmediate
			if tt.streamedRequest {
				cfg.ProcessingMode.RequestBodyMode = extprocfilterv3.ProcessingMode_STREAMED
			}
			if tt.statusOnError != 0 {
				cfg.StatusOnError = &typev3.HttpStatus{Code: tt.statusOnError}
			}
			mappers := []*hcmv3.ResponseMapper{}
			for _, code := range []uint32{500, 503, 504} {
				mappers = append(mappers, statusMapper(code, "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS%"))
			}
			e := newEnv(t, tt.fn, setup{
				extProc:    cfg,
				routes:     []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters:   []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
				localReply: &hcmv3.LocalReplyConfig{Mappers: mappers},
			})
			got := e.do("POST", "/mcp/core", rpcBody, nil)
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			e.ext.waitEnded(t, 1)
		})
	}
}

// TestMessageTimeoutOverride follows Filter::onNewTimeout (ext_proc.cc):
// an override_message_timeout within max_message_timeout replaces the
// message timer, so an answer after the configured message_timeout but
// before the new one is taken; without max_message_timeout the override is
// ignored and the configured timeout ends the request (504).
func TestMessageTimeoutOverride(t *testing.T) {
	slowHeaders := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetRequestHeaders() != nil {
			r := reqHeadersResp(nil)
			r.OverrideMessageTimeout = durationpb.New(10 * time.Second)
			return r, nil
		}
		return continueAll(req)
	}
	for _, tt := range []struct {
		name       string
		max        time.Duration
		wantStatus int
		wantBody   string
	}{
		{"honoured within max_message_timeout", 20 * time.Second, 200, "upstream"},
		{"ignored without max_message_timeout", 0, 504, "504 ext_proc_error_per-message_timeout_exceeded"},
		{"ignored above max_message_timeout", 5 * time.Second, 504, "504 ext_proc_error_per-message_timeout_exceeded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("upstream")) })
			cfg := defaultExtProc()
			cfg.MessageTimeout = durationpb.New(overrideDelay / 3)
			if tt.max > 0 {
				cfg.MaxMessageTimeout = durationpb.New(tt.max)
			}
			e := newEnv(t, slowHeaders, setup{
				extProc:    cfg,
				routes:     []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters:   []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
				localReply: &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{statusMapper(504, "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS%")}},
			})
			got := e.do("POST", "/mcp/core", rpcBody, nil)
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			e.ext.waitEnded(t, 1)
		})
	}
}

func TestEarlyHeaderMutation(t *testing.T) {
	for _, early := range []bool{true, false} {
		t.Run("early="+strconv.FormatBool(early), func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("smuggled")) })
			e := newEnv(t, continueAll, setup{
				extProc:  defaultExtProc(),
				early:    early,
				routes:   []*routev3.Route{clusterHeaderRoute(), directRoute("/", 418, "direct")},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
			})
			got := e.do("GET", "/mcp/core", "", map[string]string{
				testClusterHeader: "toolsvc_a", "X-Toolmesh-Tool": "evil", "X-Keep": "1",
			})
			rh := e.ext.messages()[0].GetRequestHeaders()
			_, sawCluster := headerValue(rh.GetHeaders(), testClusterHeader)
			_, sawTool := headerValue(rh.GetHeaders(), "x-toolmesh-tool")
			_, sawKeep := headerValue(rh.GetHeaders(), "x-keep")
			if !rh.GetEndOfStream() {
				t.Error("GET without body: request_headers end_of_stream not set")
			}
			if early {
				if got.status != 418 || sawCluster || sawTool || !sawKeep {
					t.Fatalf("status %d, saw cluster=%v tool=%v keep=%v", got.status, sawCluster, sawTool, sawKeep)
				}
				return
			}
			if got.status != 200 || got.body != "smuggled" || !sawCluster {
				t.Fatalf("without the early mutation the client header routes: got %d %q", got.status, got.body)
			}
		})
	}
}

func TestRouteTimeoutShaped(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetRequestBody() != nil {
			resp := reqBodyResp(&extprocv3.CommonResponse{
				HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set(testClusterHeader, "toolsvc_a")}},
				ClearRouteCache: true,
			})
			resp.DynamicMetadata = metadataStruct(t, map[string]any{testNamespace: map[string]any{"jsonrpc_id": "7"}})
			return resp, nil
		}
		return continueAll(req)
	}
	rt := clusterHeaderRoute()
	rt.GetRoute().Timeout = durationpb.New(100 * time.Millisecond)
	e := newEnv(t, fn, setup{
		extProc:    defaultExtProc(),
		routes:     []*routev3.Route{rt, directRoute("/", 502, "")},
		clusters:   []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
		localReply: &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{jsonRPCMapper("UT", "UF", "UH")}},
	})
	got := e.do("POST", "/mcp/core", rpcBody, nil)
	// The mapper sets status 200 before the body is formatted, so
	// %RESPONSE_CODE% is 200 there, as in Envoy.
	want := `{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[{"type":"text","text":"200 UT upstream_response_timeout"}]}}`
	if got.status != 200 || got.body != want {
		t.Fatalf("got %d %q, want 200 %q", got.status, got.body, want)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content-type %q", ct)
	}
	// The router's reply passes ext_proc's encoder path (Envoy >= 1.37):
	// the server sees it as local_reply_config reshaped it.
	if k := e.ext.kinds(); !slices.Equal(k, []string{"request_headers", "request_body", "response_headers", "response_body"}) {
		t.Fatalf("ext_proc saw %v", k)
	}
	msgs := e.ext.messages()
	h := map[string]string{}
	for _, hv := range msgs[2].GetResponseHeaders().GetHeaders().GetHeaders() {
		h[hv.GetKey()] = string(hv.GetRawValue())
	}
	if h[":status"] != "200" || h["content-type"] != "application/json" || h["x-envoy-upstream-service-time"] != "" {
		t.Errorf("ext_proc saw response headers %v, want the reshaped 200 application/json, no upstream service time", h)
	}
	if b := string(msgs[3].GetResponseBody().GetBody()); b != want {
		t.Errorf("ext_proc saw body %q, want %q", b, want)
	}
}

func TestConnectFailureShaped(t *testing.T) {
	fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetRequestHeaders() != nil {
			resp := reqHeadersResp(nil)
			resp.DynamicMetadata = metadataStruct(t, map[string]any{testNamespace: map[string]any{"jsonrpc_id": `"abc"`}})
			return resp, nil
		}
		return continueAll(req)
	}
	tests := []struct {
		name      string
		retry     *routev3.RetryPolicy
		wantFlags string
	}{
		{name: "no retry policy", wantFlags: "UF"},
		{name: "retries exhausted", retry: &routev3.RetryPolicy{RetryOn: "connect-failure", NumRetries: wrapperspb.UInt32(2),
			RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond)}}, wantFlags: "UF,URX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fn, setup{
				extProc: defaultExtProc(),
				routes: []*routev3.Route{clusterRoute("/", "toolsvc_down", func(a *routev3.RouteAction) {
					a.RetryPolicy = tt.retry
				})},
				clusters:   []*clusterv3.Cluster{staticCluster(t, "toolsvc_down", closedAddr(t))},
				localReply: &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{jsonRPCMapper("UF", "UH")}},
			})
			got := e.do("POST", "/mcp/core", rpcBody, nil)
			prefix := `{"jsonrpc":"2.0","id":"abc","result":{"isError":true,"content":[{"type":"text","text":"200 ` +
				tt.wantFlags + ` upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:`
			if got.status != 200 || !strings.HasPrefix(got.body, prefix) {
				t.Fatalf("got %d %q, want prefix %q", got.status, got.body, prefix)
			}
		})
	}
}

func TestNoHealthyUpstream(t *testing.T) {
	e := newEnv(t, nil, setup{
		routes: []*routev3.Route{clusterRoute("/", "toolsvc_empty", nil)},
		clusters: []*clusterv3.Cluster{{
			Name:                 "toolsvc_empty",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     edsConfig(),
		}},
	})
	got := e.do("GET", "/", "", nil)
	if got.status != 503 || got.body != "no healthy upstream" || got.header.Get("Content-Type") != "text/plain" {
		t.Fatalf("got %d %q %v", got.status, got.body, got.header)
	}
}

func TestResponsePath(t *testing.T) {
	const rewritten = `{"jsonrpc":"2.0","id":7,"result":{"isError":true}}`
	tests := []struct {
		name       string
		upstream   http.HandlerFunc
		fn         processFunc
		wantStatus int
		wantBody   string
		wantCT     string
		wantKinds  []string
	}{
		{
			name:     "CONTINUE_AND_REPLACE on a headers-only reply",
			upstream: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) },
			fn: func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				if rh := req.GetResponseHeaders(); rh != nil {
					if !rh.GetEndOfStream() {
						return nil, status.Error(codes.FailedPrecondition, "expected end_of_stream")
					}
					return respHeadersResp(&extprocv3.CommonResponse{
						Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
						HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
							set(":status", "200"), set("content-type", "application/json")}},
						BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(rewritten)}},
					}), nil
				}
				return continueAll(req)
			},
			wantStatus: 200, wantBody: rewritten, wantCT: "application/json",
			wantKinds: []string{"request_headers", "response_headers"},
		},
		{
			name: "buffered body mutation with :status change",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(`{"error":"boom"}`))
			},
			fn: func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				if rh := req.GetResponseHeaders(); rh != nil {
					if s, _ := headerValue(rh.GetHeaders(), ":status"); s != "500" {
						return nil, status.Errorf(codes.FailedPrecondition, "response :status %q", s)
					}
				}
				if rb := req.GetResponseBody(); rb != nil {
					if string(rb.GetBody()) != `{"error":"boom"}` || !rb.GetEndOfStream() {
						return nil, status.Errorf(codes.FailedPrecondition, "response body %q", rb.GetBody())
					}
					return respBodyResp(&extprocv3.CommonResponse{
						HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
							set(":status", "200"), set("content-length", strconv.Itoa(len(rewritten)))}},
						BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(rewritten)}},
					}), nil
				}
				return continueAll(req)
			},
			wantStatus: 200, wantBody: rewritten, wantCT: "application/json",
			wantKinds: []string{"request_headers", "response_headers", "response_body"},
		},
		{
			name: "response :status below 200 is ignored",
			upstream: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = w.Write([]byte("fine"))
			},
			fn: func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				if req.GetResponseBody() != nil {
					return respBodyResp(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
						SetHeaders: []*corev3.HeaderValueOption{set(":status", "99")}}}), nil
				}
				return continueAll(req)
			},
			wantStatus: 200, wantBody: "fine", wantCT: "text/plain",
			wantKinds: []string{"request_headers", "response_headers", "response_body"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, tt.upstream)
			e := newEnv(t, tt.fn, setup{
				extProc:  defaultExtProc(),
				routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
			})
			got := e.do("GET", "/mcp/core", "", nil)
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			if ct := got.header.Get("Content-Type"); ct != tt.wantCT {
				t.Errorf("content-type %q, want %q", ct, tt.wantCT)
			}
			if k := e.ext.kinds(); !slices.Equal(k, tt.wantKinds) {
				t.Errorf("ext_proc saw %v, want %v", k, tt.wantKinds)
			}
		})
	}
}

func TestMetadataNamespaces(t *testing.T) {
	meta := map[string]any{
		testNamespace: map[string]any{"k": "v", "n": 3},
		"other":       map[string]any{"k": "x"},
	}
	mapper := &hcmv3.ResponseMapper{
		Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_MetadataFilter{
			MetadataFilter: &accesslogv3.MetadataFilter{
				Matcher: &matcherv3.MetadataMatcher{
					Filter: testNamespace,
					Path:   []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "k"}}},
					Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{
						StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "v"}}}},
				},
				MatchIfKeyNotFound: wrapperspb.Bool(false),
			}}},
		BodyFormatOverride: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormat{
			TextFormat: "%DYNAMIC_METADATA(toolmesh:k)%|%DYNAMIC_METADATA(other:k)%|%DYNAMIC_METADATA(toolmesh:n)%|%DYNAMIC_METADATA(toolmesh)%"}},
	}
	tests := []struct {
		name      string
		receiving []string
		want      string
	}{
		{name: "received namespace is stored, the other dropped", receiving: []string{testNamespace}, want: `v|-|3|{"k":"v","n":3}`},
		{name: "nothing received", receiving: nil, want: "direct"},
		{name: "both received", receiving: []string{testNamespace, "other"}, want: `v|x|3|{"k":"v","n":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				resp, err := continueAll(req)
				resp.DynamicMetadata = metadataStruct(t, meta)
				return resp, err
			}
			cfg := defaultExtProc()
			cfg.MetadataOptions.ReceivingNamespaces.Untyped = tt.receiving
			e := newEnv(t, fn, setup{
				extProc:    cfg,
				routes:     []*routev3.Route{directRoute("/", 200, "direct")},
				localReply: &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{mapper}},
			})
			got := e.do("GET", "/", "", nil)
			if got.status != 200 || got.body != tt.want {
				t.Fatalf("got %d %q, want %q", got.status, got.body, tt.want)
			}
		})
	}
}

func TestResponseBodyBufferLimit(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("y", 64)))
	})
	e := newEnv(t, continueAll, setup{
		extProc:       defaultExtProc(),
		listenerLimit: 32,
		routes:        []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
		clusters:      []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
		localReply:    &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{statusMapper(500, "%RESPONSE_CODE_DETAILS%")}},
	})
	got := e.do("GET", "/", "", nil)
	if got.status != 500 || got.body != "response_payload_too_large" {
		t.Fatalf("got %d %q", got.status, got.body)
	}
	if k := e.ext.kinds(); !slices.Equal(k, []string{"request_headers", "response_headers"}) {
		t.Errorf("ext_proc saw %v", k)
	}
}

// On the data plane's own connection, the ext_proc stream's :authority is
// the filter's cluster name, as Envoy's gRPC client sends it (rules.go,
// "ext_proc gRPC client connection").
func TestExtProcStreamAuthorityIsClusterName(t *testing.T) {
	f, _ := startExtProc(t, continueAll)
	up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") })
	dp, err := New(Options{ExtProcTarget: f.addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	s := setup{
		extProc:  defaultExtProc(),
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
		clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", strings.TrimPrefix(up.URL, "http://"))},
	}
	if err := dp.Apply(s.resources(t)); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dp: dp, srv: httptest.NewServer(dp)}
	t.Cleanup(e.srv.Close)
	if got := e.do("POST", "/mcp/core", "{}", nil); got.status != 200 {
		t.Fatalf("got %d %q", got.status, got.body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.authorities) == 0 || f.authorities[0] != "toolmesh_extproc" {
		t.Fatalf(":authority %q, want [toolmesh_extproc]", f.authorities)
	}
}
