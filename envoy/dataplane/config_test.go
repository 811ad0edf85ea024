package dataplane

import (
	"strconv"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// rewriteHCM applies mod to the HTTP connection manager inside res.
func rewriteHCM(t *testing.T, res map[resourcev3.Type][]types.Resource, mod func(*hcmv3.HttpConnectionManager)) {
	t.Helper()
	l := res[resourcev3.ListenerType][0].(*listenerv3.Listener)
	f := l.GetFilterChains()[0].GetFilters()[0]
	var h hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
		t.Fatal(err)
	}
	mod(&h)
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &h)}
}

func TestApplyRejects(t *testing.T) {
	base := func() setup {
		return setup{extProc: defaultExtProc(), routes: []*routev3.Route{directRoute("/", 200, "ok")}}
	}
	tests := []struct {
		name    string
		mod     func(t *testing.T, res map[resourcev3.Type][]types.Resource)
		wantErr string
	}{
		{
			name: "missing route configuration",
			mod: func(t *testing.T, res map[resourcev3.Type][]types.Resource) {
				delete(res, resourcev3.RouteType)
			},
			wantErr: `route configuration "routes" not found`,
		},
		{
			name: "filter that is not emulated",
			mod: func(t *testing.T, res map[resourcev3.Type][]types.Resource) {
				rewriteHCM(t, res, func(h *hcmv3.HttpConnectionManager) {
					h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "custom",
						ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &structpb.Struct{})}}}, h.HttpFilters...)
				})
			},
			wantErr: "is not emulated",
		},
		{
			name: "router not last",
			mod: func(t *testing.T, res map[resourcev3.Type][]types.Resource) {
				rewriteHCM(t, res, func(h *hcmv3.HttpConnectionManager) {
					h.HttpFilters[0], h.HttpFilters[1] = h.HttpFilters[1], h.HttpFilters[0]
				})
			},
			wantErr: "router must be the last filter",
		},
		{
			name: "full duplex streaming is not emulated",
			mod: func(t *testing.T, res map[resourcev3.Type][]types.Resource) {
				rewriteHCM(t, res, func(h *hcmv3.HttpConnectionManager) {
					c := defaultExtProc()
					c.ProcessingMode.RequestBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
					h.HttpFilters[0].ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, c)}
				})
			},
			wantErr: "FULL_DUPLEX_STREAMED",
		},
		{
			name: "invalid local reply format",
			mod: func(t *testing.T, res map[resourcev3.Type][]types.Resource) {
				rewriteHCM(t, res, func(h *hcmv3.HttpConnectionManager) {
					h.LocalReplyConfig = &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{statusMapper(500, "100%")}}
				})
			},
			wantErr: "couldn't find valid command",
		},
		{
			name: "PGV validation of an unpacked typed config",
			mod: func(t *testing.T, res map[resourcev3.Type][]types.Resource) {
				rewriteHCM(t, res, func(h *hcmv3.HttpConnectionManager) {
					c := defaultExtProc()
					c.ProcessingMode.RequestBodyMode = 42 // not a defined enum value
					h.HttpFilters[0].ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, c)}
				})
			},
			wantErr: "RequestBodyMode",
		},
		{
			name: "PGV validation of a resource",
			mod: func(t *testing.T, res map[resourcev3.Type][]types.Resource) {
				res[resourcev3.RouteType][0].(*routev3.RouteConfiguration).VirtualHosts[0].Domains = nil
			},
			wantErr: "Domains",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, continueAll, base())
			res := base().resources(t)
			tt.mod(t, res)
			err := e.dp.Apply(res)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Apply error %v, want one containing %q", err, tt.wantErr)
			}
			// The previous configuration stays in force.
			if got := e.do("GET", "/", "", nil); got.status != 200 || got.body != "ok" {
				t.Fatalf("after a rejected update: %d %q", got.status, got.body)
			}
		})
	}
}

func TestReadyAndEmpty(t *testing.T) {
	dp, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	if dp.Ready() {
		t.Fatal("ready without configuration")
	}
	if err := dp.Apply(setup{routes: []*routev3.Route{directRoute("/", 200, "ok")}}.resources(t)); err != nil {
		t.Fatal(err)
	}
	if !dp.Ready() {
		t.Fatal("not ready with a listener and routes")
	}
}

func TestLocalReplyPrepare(t *testing.T) {
	jsonBody := &xdsconfig.BodyFormat{Text: mustText(t, `{"e":"%LOCAL_REPLY_BODY%"}`), ContentType: "application/json"}
	setCT := func(ct string) func(*headers.Map) { return func(h *headers.Map) { h.Set("content-type", ct) } }
	tests := []struct {
		name     string
		cfg      *xdsconfig.LocalReplyConfig
		l        xdsconfig.LocalReply
		wantCT   string
		wantBody string
		wantCode string
	}{
		{name: "default text", cfg: &xdsconfig.LocalReplyConfig{Body: xdsconfig.DefaultBodyFormat},
			l: xdsconfig.LocalReply{Code: 503, Body: "no healthy upstream"}, wantCT: "text/plain", wantBody: "no healthy upstream", wantCode: "503"},
		{name: "empty body has no content type", cfg: &xdsconfig.LocalReplyConfig{Body: xdsconfig.DefaultBodyFormat},
			l: xdsconfig.LocalReply{Code: 404, Modify: setCT("application/json")}, wantCT: "", wantBody: "", wantCode: "404"},
		{name: "custom content type kept when the body is unchanged", cfg: &xdsconfig.LocalReplyConfig{Body: xdsconfig.DefaultBodyFormat},
			l: xdsconfig.LocalReply{Code: 200, Body: "{}", Modify: setCT("application/json")}, wantCT: "application/json", wantBody: "{}", wantCode: "200"},
		{name: "global body_format sets its content type", cfg: &xdsconfig.LocalReplyConfig{Body: jsonBody},
			l: xdsconfig.LocalReply{Code: 504, Body: "timeout"}, wantCT: "application/json", wantBody: `{"e":"timeout"}`, wantCode: "504"},
		{name: "mapper headers_to_add content-type is custom and kept",
			cfg: &xdsconfig.LocalReplyConfig{Body: jsonBody, Mappers: []*xdsconfig.ResponseMapper{{
				Filter:  xdsconfig.FilterFunc(func(*xdsconfig.FmtContext) bool { return true }),
				Status:  200,
				Headers: []xdsconfig.HeaderAdd{{Key: "content-type", Value: mustText(t, "application/x-custom"), Mode: headers.AppendOverwrite}},
			}}},
			l: xdsconfig.LocalReply{Code: 504, Body: "timeout"}, wantCT: "application/x-custom", wantBody: `{"e":"timeout"}`, wantCode: "200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, body := tt.cfg.Prepare(tt.l, &xdsconfig.FmtContext{})
			if ct, _ := h.Get("content-type"); ct != tt.wantCT || body != tt.wantBody || h.Value(":status") != tt.wantCode {
				t.Fatalf("got %s %q %q, want %s %q %q", h.Value(":status"), ct, body, tt.wantCode, tt.wantCT, tt.wantBody)
			}
			if cl, ok := h.Get("content-length"); ok != (body != "") || (ok && cl != strconv.Itoa(len(body))) {
				t.Fatalf("content-length %q (present %v) for body %q", cl, ok, body)
			}
		})
	}
}

func mustText(t *testing.T, s string) *xdsconfig.TextFormat {
	t.Helper()
	f, err := xdsconfig.ParseTextFormat(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
