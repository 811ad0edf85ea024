package dataplane

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const rpcBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_weather"}}`

func immediate(code typev3.StatusCode, body string, details string, hdrs ...*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: code},
			Headers: &extprocv3.HeaderMutation{SetHeaders: hdrs},
			Body:    []byte(body),
			Details: details,
		}}}
}

func statusMapper(code uint32, format string) *hcmv3.ResponseMapper {
	return &hcmv3.ResponseMapper{
		Filter: &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{
			StatusCodeFilter: &accesslogv3.StatusCodeFilter{Comparison: &accesslogv3.ComparisonFilter{
				Op: accesslogv3.ComparisonFilter_EQ, Value: &corev3.RuntimeUInt32{DefaultValue: code, RuntimeKey: "unused"}}}}},
		BodyFormatOverride: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: format}},
	}
}

func TestImmediateResponse(t *testing.T) {
	jsonCT := set("content-type", "application/json")
	const result = `{"jsonrpc":"2.0","id":7,"result":{}}`
	tests := []struct {
		name       string
		resp       *extprocv3.ProcessingResponse
		mappers    []*hcmv3.ResponseMapper
		wantStatus int
		wantCT     string
		wantBody   string
	}{
		{
			name:       "json result, mappers do not match",
			resp:       immediate(typev3.StatusCode_OK, result, "mcp local reply", jsonCT),
			mappers:    []*hcmv3.ResponseMapper{jsonRPCMapper("UH", "UT", "UF", "NC")},
			wantStatus: 200, wantCT: "application/json", wantBody: result,
		},
		{
			name:       "empty body drops content-type",
			resp:       immediate(typev3.StatusCode_Accepted, "", "", jsonCT),
			wantStatus: 202, wantCT: "", wantBody: "",
		},
		{
			name:       "invalid status becomes 200 and text/plain is added",
			resp:       immediate(typev3.StatusCode_Continue, "plain", ""),
			wantStatus: 200, wantCT: "text/plain", wantBody: "plain",
		},
		{
			name: "a matching mapper rewrites the body and its content type",
			resp: immediate(typev3.StatusCode_Forbidden, "teapot", "mcp local reply", jsonCT),
			mappers: []*hcmv3.ResponseMapper{statusMapper(403,
				"%LOCAL_REPLY_BODY% %RESPONSE_CODE_DETAILS% %RESPONSE_FLAGS%")},
			// The body changed and the mapper set no content-type, so Envoy
			// replaces the ImmediateResponse's (prepareLocalReply).
			wantStatus: 403, wantCT: "text/plain", wantBody: "teapot mcp_local_reply -",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) {})
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				if req.GetRequestBody() != nil {
					return tt.resp, nil
				}
				return continueAll(req)
			}
			e := newEnv(t, fn, setup{
				extProc:    defaultExtProc(),
				routes:     []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters:   []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
				localReply: &hcmv3.LocalReplyConfig{Mappers: tt.mappers},
			})
			got := e.do("POST", "/mcp/core", rpcBody, map[string]string{"Content-Type": "application/json"})
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			if ct := got.header.Get("Content-Type"); ct != tt.wantCT {
				t.Errorf("content-type %q, want %q", ct, tt.wantCT)
			}
			if cl := got.header.Get("Content-Length"); cl != strconv.Itoa(len(tt.wantBody)) {
				t.Errorf("content-length %q, want %d", cl, len(tt.wantBody))
			}
			if s := got.header.Get("Server"); s != "envoy" {
				t.Errorf("server %q, want envoy", s)
			}
			if n := len(up.requests()); n != 0 {
				t.Errorf("upstream called %d times", n)
			}
			// The immediate response ends processing: no response phase,
			// and the data plane closes the stream.
			if k := e.ext.kinds(); !slices.Equal(k, []string{"request_headers", "request_body"}) {
				t.Errorf("ext_proc saw %v", k)
			}
			e.ext.waitEnded(t, 1)
		})
	}
}

// TestImmediateResponseHeaders: Filter::sendImmediateResponse
// (source/extensions/filters/http/ext_proc/ext_proc.cc) applies the
// ImmediateResponse headers with the filter's configured mutation_rules
// (config().mutationChecker(), since envoyproxy/envoy PR #27925), not a
// permissive checker; a failed mutation is logged and the reply still goes
// out with what was applied before the failure.
func TestImmediateResponseHeaders(t *testing.T) {
	tests := []struct {
		name  string
		rules *mutationrulesv3.HeaderMutationRules
		want  map[string]string // header → value, "" = absent
	}{
		{name: "default rules drop x-envoy headers", rules: &mutationrulesv3.HeaderMutationRules{},
			want: map[string]string{"X-Ok": "1", "X-Envoy-Mark": "", "X-Late": "1"}},
		{name: "allow_envoy keeps them", rules: &mutationrulesv3.HeaderMutationRules{AllowEnvoy: wrapperspb.Bool(true)},
			want: map[string]string{"X-Ok": "1", "X-Envoy-Mark": "1", "X-Late": "1"}},
		{name: "disallow_is_error stops at the failing header, the reply still goes out",
			rules: &mutationrulesv3.HeaderMutationRules{DisallowIsError: wrapperspb.Bool(true)},
			want:  map[string]string{"X-Ok": "1", "X-Envoy-Mark": "", "X-Late": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) {})
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				if req.GetRequestHeaders() != nil {
					return immediate(typev3.StatusCode_Forbidden, "no", "denied",
						set("x-ok", "1"), set("x-envoy-mark", "1"), set("x-late", "1")), nil
				}
				return continueAll(req)
			}
			cfg := defaultExtProc()
			cfg.MutationRules = tt.rules
			e := newEnv(t, fn, setup{
				extProc:  cfg,
				routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
			})
			got := e.do("POST", "/mcp/core", rpcBody, nil)
			if got.status != 403 || got.body != "no" {
				t.Fatalf("got %d %q", got.status, got.body)
			}
			for k, v := range tt.want {
				if g := got.header.Get(k); g != v {
					t.Errorf("%s = %q, want %q", k, g, v)
				}
			}
		})
	}
}

func TestRequestHeadersMessage(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	e := newEnv(t, continueAll, setup{
		extProc:  defaultExtProc(),
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
		clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
	})
	got := e.do("POST", "/mcp/core?x=1", rpcBody, map[string]string{"Content-Type": "application/json", "X-Custom": "a"})
	if got.status != 200 || got.body != "ok" {
		t.Fatalf("got %d %q", got.status, got.body)
	}
	msgs := e.ext.messages()
	if len(msgs) != 4 {
		t.Fatalf("ext_proc saw %v", e.ext.kinds())
	}
	first := msgs[0]
	if first.GetProtocolConfig().GetRequestBodyMode() != extprocfilterv3.ProcessingMode_BUFFERED {
		t.Errorf("first message protocol_config = %v", first.GetProtocolConfig())
	}
	rh := first.GetRequestHeaders()
	if rh.GetEndOfStream() {
		t.Error("request_headers end_of_stream set although a body follows")
	}
	for k, want := range map[string]string{
		":method": "POST", ":path": "/mcp/core?x=1", ":scheme": "http", ":authority": strings.TrimPrefix(e.srv.URL, "http://"),
		"content-type": "application/json", "x-custom": "a", "x-forwarded-proto": "http",
		"content-length": strconv.Itoa(len(rpcBody)),
	} {
		if v, ok := headerValue(rh.GetHeaders(), k); !ok || v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if v, ok := headerValue(rh.GetHeaders(), "x-request-id"); !ok || len(v) != 36 {
		t.Errorf("x-request-id = %q, want a generated UUID", v)
	}
	if b := msgs[1].GetRequestBody(); string(b.GetBody()) != rpcBody || !b.GetEndOfStream() {
		t.Errorf("request_body = %q eos=%v", b.GetBody(), b.GetEndOfStream())
	}
	if rh := msgs[2].GetResponseHeaders(); rh == nil || rh.GetEndOfStream() {
		t.Errorf("third message %v", msgs[2])
	} else if v, _ := headerValue(rh.GetHeaders(), ":status"); v != "200" {
		t.Errorf("response :status %q", v)
	}
	if b := msgs[3].GetResponseBody(); string(b.GetBody()) != "ok" || !b.GetEndOfStream() {
		t.Errorf("response_body = %q eos=%v", b.GetBody(), b.GetEndOfStream())
	}
}

func TestReroute(t *testing.T) {
	const newBody = `{"city":"Paris"}`
	reroute := &extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
			set(testClusterHeader, "toolsvc_a"),
			set(":path", "/tools/get_weather"),
			set("content-length", strconv.Itoa(len(newBody))),
		}},
		BodyMutation:    &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(newBody)}},
		ClearRouteCache: true,
	}
	setCluster := func(name string) *extprocv3.CommonResponse {
		return &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{set(testClusterHeader, name)}}}
	}
	tests := []struct {
		name       string
		headers    *extprocv3.CommonResponse
		body       *extprocv3.CommonResponse
		wantStatus int
		wantBody   string
		wantPath   string // upstream path; "" means the upstream is not called
		wantUpBody string
	}{
		{
			name: "body reply re-routes with path and body rewrite", body: reroute,
			wantStatus: 200, wantBody: "from A", wantPath: "/tools/get_weather", wantUpBody: newBody,
		},
		{
			name: "header mutation without clear_route_cache keeps the cached route", headers: setCluster("toolsvc_a"),
			wantStatus: 502, wantBody: "no tool routed",
		},
		{
			name: "clear_route_cache without header_mutation is ignored", headers: setCluster("toolsvc_a"),
			body:       &extprocv3.CommonResponse{ClearRouteCache: true},
			wantStatus: 502, wantBody: "no tool routed",
		},
		{
			name: "clear_route_cache with any header_mutation re-routes", headers: setCluster("toolsvc_a"),
			body: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{
				SetHeaders: []*corev3.HeaderValueOption{set("x-other", "1")}}},
			wantStatus: 200, wantBody: "from A", wantPath: "/mcp/core", wantUpBody: rpcBody,
		},
		{
			name: "unknown cluster is 503 NC, shaped by local_reply_config",
			body: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{
				SetHeaders: []*corev3.HeaderValueOption{set(testClusterHeader, "toolsvc_missing")}}},
			wantStatus: 200,
			wantBody:   `{"jsonrpc":"2.0","id":-,"result":{"isError":true,"content":[{"type":"text","text":"200 NC cluster_not_found"}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("from A")) })
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				switch {
				case req.GetRequestHeaders() != nil && tt.headers != nil:
					return reqHeadersResp(tt.headers), nil
				case req.GetRequestBody() != nil && tt.body != nil:
					return reqBodyResp(tt.body), nil
				}
				return continueAll(req)
			}
			e := newEnv(t, fn, setup{
				extProc:    defaultExtProc(),
				early:      true,
				routes:     []*routev3.Route{clusterHeaderRoute(), directRoute("/mcp/", 502, "no tool routed")},
				clusters:   []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
				localReply: &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{jsonRPCMapper("NC", "UH", "UF", "UT")}},
			})
			got := e.do("POST", "/mcp/core", rpcBody, nil)
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			reqs := up.requests()
			if tt.wantPath == "" {
				if len(reqs) != 0 {
					t.Fatalf("upstream called: %+v", reqs)
				}
				return
			}
			if len(reqs) != 1 || reqs[0].path != tt.wantPath || reqs[0].body != tt.wantUpBody {
				t.Fatalf("upstream got %+v, want %s %q", reqs, tt.wantPath, tt.wantUpBody)
			}
			if reqs[0].host != strings.TrimPrefix(e.srv.URL, "http://") {
				t.Errorf("upstream host %q: :authority must not change", reqs[0].host)
			}
		})
	}
}

func TestContentLengthRule(t *testing.T) {
	const newBody = `{"rewritten":true}`
	mutation := &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(newBody)}}
	tests := []struct {
		name       string
		cr         *extprocv3.CommonResponse
		wantStatus int
		wantBody   string
		wantUp     string
	}{
		{
			name: "mutated body with the old content-length is a 500", cr: &extprocv3.CommonResponse{BodyMutation: mutation},
			wantStatus: 500, wantBody: "mismatch_between_content_length_and_the_length_of_the_mutated_body",
		},
		{
			name: "clear_body with a content-length is a 500 too",
			cr: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
				Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}},
			wantStatus: 500, wantBody: "mismatch_between_content_length_and_the_length_of_the_mutated_body",
		},
		{
			name: "content-length set in the same reply", wantStatus: 200, wantBody: "ok", wantUp: newBody,
			cr: &extprocv3.CommonResponse{BodyMutation: mutation, HeaderMutation: &extprocv3.HeaderMutation{
				SetHeaders: []*corev3.HeaderValueOption{set("content-length", strconv.Itoa(len(newBody)))}}},
		},
		{
			name: "content-length removed in the same reply", wantStatus: 200, wantBody: "ok", wantUp: newBody,
			cr: &extprocv3.CommonResponse{BodyMutation: mutation, HeaderMutation: &extprocv3.HeaderMutation{
				RemoveHeaders: []string{"content-length"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				if req.GetRequestBody() != nil {
					return reqBodyResp(tt.cr), nil
				}
				return continueAll(req)
			}
			e := newEnv(t, fn, setup{
				extProc:    defaultExtProc(),
				routes:     []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
				clusters:   []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
				localReply: &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{statusMapper(500, "%RESPONSE_CODE_DETAILS%")}},
			})
			got := e.do("POST", "/mcp/core", rpcBody, nil)
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			reqs := up.requests()
			switch {
			case tt.wantUp == "" && len(reqs) != 0:
				t.Fatalf("upstream called: %+v", reqs)
			case tt.wantUp != "" && (len(reqs) != 1 || reqs[0].body != tt.wantUp):
				t.Fatalf("upstream got %+v, want body %q", reqs, tt.wantUp)
			}
		})
	}
}

func TestRequestBodyBufferLimit(t *testing.T) {
	body := strings.Repeat("x", 100)
	tests := []struct {
		name       string
		routeLimit *wrapperspb.UInt64Value
		wantStatus int
		wantBody   string
		wantKinds  []string
	}{
		{
			name: "virtual host limit exceeded is 413", wantStatus: 413, wantBody: "Payload Too Large",
			wantKinds: []string{"request_headers"},
		},
		{
			name: "route limit overrides the virtual host's", routeLimit: wrapperspb.UInt64(1000),
			wantStatus: 200, wantBody: "ok",
			wantKinds: []string{"request_headers", "request_body", "response_headers", "response_body"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
			rt := clusterRoute("/", "toolsvc_a", nil)
			rt.RequestBodyBufferLimit = tt.routeLimit
			e := newEnv(t, continueAll, setup{
				extProc:  defaultExtProc(),
				routes:   []*routev3.Route{rt},
				vhost:    func(v *routev3.VirtualHost) { v.RequestBodyBufferLimit = wrapperspb.UInt64(16) },
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
			})
			got := e.do("POST", "/mcp/core", body, nil)
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			if k := e.ext.kinds(); !slices.Equal(k, tt.wantKinds) {
				t.Errorf("ext_proc saw %v, want %v", k, tt.wantKinds)
			}
		})
	}
}
