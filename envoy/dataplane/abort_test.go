package dataplane

import (
	"net/http"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestUpstreamAbortAfterHeaders: the Tool Service answers headers, then
// stalls past the route timeout or drops the connection mid-body, while
// ext_proc holds those headers for its BUFFERED body. Envoy's router still
// sends its local reply (Router::onResponseTimeout / onUpstreamReset →
// onUpstreamAbort, source/common/router/router.cc) and the filter manager,
// seeing response headers that never went downstream, sends it directly
// with local_reply_config applied (FilterManager::sendLocalReply →
// sendDirectLocalReply, source/common/http/filter_manager.cc): the client
// gets the shaped reply, not a reset stream.
func TestUpstreamAbortAfterHeaders(t *testing.T) {
	tests := []struct {
		name     string
		upstream http.HandlerFunc
		want     string
	}{
		{name: "route timeout after the headers",
			upstream: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				_, _ = w.Write([]byte(`{"partial":`))
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			},
			want: "200 UT upstream_response_timeout"},
		{name: "connection closed mid-body",
			upstream: func(w http.ResponseWriter, r *http.Request) {
				conn, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"partial\":")
				_ = brw.Flush()
			},
			want: "200 UC upstream_reset_after_response_started{connection_termination}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, tt.upstream)
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				if req.GetRequestHeaders() != nil {
					resp := reqHeadersResp(nil)
					resp.DynamicMetadata = metadataStruct(t, map[string]any{testNamespace: map[string]any{"jsonrpc_id": "7"}})
					return resp, nil
				}
				return continueAll(req)
			}
			e := newEnv(t, fn, setup{
				extProc: defaultExtProc(),
				routes: []*routev3.Route{clusterRoute("/", "toolsvc_a", func(a *routev3.RouteAction) {
					a.Timeout = durationpb.New(200 * time.Millisecond)
				})},
				clusters:   []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
				localReply: &hcmv3.LocalReplyConfig{Mappers: []*hcmv3.ResponseMapper{jsonRPCMapper("UT", "UC", "UR")}},
			})
			got := e.do("POST", "/mcp/core", rpcBody, nil)
			want := `{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[{"type":"text","text":"` + tt.want + `"}]}}`
			if got.status != 200 || got.body != want {
				t.Fatalf("got %d %q, want 200 %q", got.status, got.body, want)
			}
			// The held headers went to ext_proc; the local reply did not.
			if k := e.ext.kinds(); !slices.Equal(k, []string{"request_headers", "request_body", "response_headers"}) {
				t.Errorf("ext_proc saw %v", k)
			}
		})
	}
}
