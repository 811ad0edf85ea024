package dataplane

import (
	"net/http"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestDownstreamLimits checks the connection manager's request checks that
// run before any filter: header size and count limits (431), headers with
// underscores (dropped or refused) and escaped slashes in the path.
func TestDownstreamLimits(t *testing.T) {
	strict := func(h *hcmv3.HttpConnectionManager) {
		h.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_REJECT_REQUEST
		h.MaxRequestHeadersKb = wrapperspb.UInt32(1)
		h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{
			MaxHeadersCount:              wrapperspb.UInt32(8),
			HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_DROP_HEADER,
		}
	}
	many := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		many["x-"+k] = "1"
	}
	for _, tc := range []struct {
		name    string
		path    string
		headers map[string]string
		hcm     func(*hcmv3.HttpConnectionManager)
		status  int
		extProc bool // the request reached ext_proc
		sawUnd  bool // ext_proc saw the underscore header
	}{
		{"plain", "/mcp/core", nil, strict, 200, true, false},
		{"headers too large", "/mcp/core", map[string]string{"x-big": strings.Repeat("v", 2048)}, strict, 431, false, false},
		{"too many headers", "/mcp/core", many, strict, 431, false, false},
		{"underscore dropped", "/mcp/core", map[string]string{"x_toolmesh_cluster": "evil"}, strict, 200, true, false},
		{"underscore refused", "/mcp/core", map[string]string{"x_a": "1"}, func(h *hcmv3.HttpConnectionManager) {
			h.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_REJECT_REQUEST}
		}, 400, false, false},
		{"underscore allowed by default", "/mcp/core", map[string]string{"x_a": "1"}, nil, 200, true, true},
		{"escaped slash refused", "/mcp/core%2F..%2Fadmin", nil, strict, 400, false, false},
		{"escaped backslash refused", "/mcp/core%5cx", nil, strict, 400, false, false},
		{"escaped slash kept by default", "/mcp/core%2Fx", nil, nil, 200, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
			e := newEnv(t, continueAll, setup{
				extProc:  defaultExtProc(),
				hcm:      tc.hcm,
				routes:   []*routev3.Route{clusterRoute("/", "up", nil)},
				clusters: []*clusterv3.Cluster{staticCluster(t, "up", up.addr())},
			})
			got := e.do("GET", tc.path, "", tc.headers)
			if got.status != tc.status {
				t.Fatalf("status %d (%q), want %d", got.status, got.body, tc.status)
			}
			msgs := e.ext.messages()
			if (len(msgs) > 0) != tc.extProc {
				t.Fatalf("ext_proc saw %d messages, want reached=%v", len(msgs), tc.extProc)
			}
			if len(msgs) > 0 {
				_, saw := headerValue(msgs[0].GetRequestHeaders().GetHeaders(), "x_a")
				_, sawCluster := headerValue(msgs[0].GetRequestHeaders().GetHeaders(), "x_toolmesh_cluster")
				if saw != tc.sawUnd || sawCluster {
					t.Errorf("ext_proc saw x_a=%v x_toolmesh_cluster=%v", saw, sawCluster)
				}
			}
		})
	}
}
