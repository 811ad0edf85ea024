package dataplane

import (
	"net/http"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestUseRemoteAddress checks that use_remote_address appends the
// downstream peer (here loopback, so the local address) to x-forwarded-for
// and that without it the header passes unchanged.
func TestUseRemoteAddress(t *testing.T) {
	for _, tc := range []struct {
		name       string
		use, skip  bool
		sent, want string
	}{
		{name: "appended after the client's value", use: true, sent: "203.0.113.7", want: "203.0.113.7,127.0.0.1"},
		{name: "set when absent", use: true, want: "127.0.0.1"},
		{name: "skip_xff_append", use: true, skip: true, sent: "203.0.113.7", want: "203.0.113.7"},
		{name: "off: unchanged", sent: "203.0.113.7", want: "203.0.113.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, up := hcmEnv(t, func(h *hcmv3.HttpConnectionManager) {
				h.UseRemoteAddress = wrapperspb.Bool(tc.use)
				h.SkipXffAppend = tc.skip
			})
			hdr := map[string]string{}
			if tc.sent != "" {
				hdr["X-Forwarded-For"] = tc.sent
			}
			if got := e.do("POST", "/", "x", hdr); got.status != 200 {
				t.Fatalf("status %d", got.status)
			}
			if got := up.requests()[0].header.Get("X-Forwarded-For"); got != tc.want {
				t.Errorf("upstream x-forwarded-for %q, want %q", got, tc.want)
			}
		})
	}
}

// hcmEnv is a data plane with one route to a recording upstream and the
// connection manager changed by tweak.
func hcmEnv(t *testing.T, tweak func(*hcmv3.HttpConnectionManager)) (*env, *upstream) {
	t.Helper()
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	return newEnv(t, nil, setup{
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
		clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
		hcm:      tweak,
	}), up
}
