package dataplane

import (
	"net/http/httptest"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolmesh/toolmesh/internal/idletest"
)

// idleSetup is a listener answering 200 directly, with the HCM's
// idle_timeout d (nil: unset).
func idleSetup(d *durationpb.Duration) setup {
	return setup{routes: []*routev3.Route{directRoute("/", 200, "ok")}, hcm: func(h *hcmv3.HttpConnectionManager) {
		if d != nil {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{IdleTimeout: d}
		}
	}}
}

// TestIdleTimeout: the listener's idle_timeout closes a keep-alive
// connection that has no request for that long, as Envoy's HTTP connection
// manager does; unset it is Envoy's default, 1 hour, and 0 disables it.
func TestIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		d    *durationpb.Duration
		want time.Duration
	}{{nil, time.Hour}, {durationpb.New(0), 0}, {durationpb.New(time.Minute), time.Minute}} {
		e := newEnv(t, nil, idleSetup(tc.d))
		if got := e.dp.idleTimeout(); got != tc.want {
			t.Errorf("idle_timeout %v: %v, want %v", tc.d, got, tc.want)
		}
	}

	e := newEnv(t, nil, idleSetup(durationpb.New(50*time.Millisecond)))
	srv := httptest.NewUnstartedServer(e.dp)
	srv.Config.ConnState = e.dp.ConnState
	srv.Start()
	t.Cleanup(srv.Close)
	idletest.ExpectClose(t, srv.Listener.Addr().String(), "/")
}
