package dataplane

import (
	"io"
	"net/http"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// TestStreamClosedAfterLastResponseHeaders follows
// Filter::closeGrpcStreamIfLastRespReceived (rules.go lastResponseHeaders):
// when the response-headers reply switches the response body to NONE, the
// ext_proc stream ends right after it, while the response body still flows
// to the client. The Tool Service holds its second chunk until the stream
// has ended, so a stream kept to the end of the request fails the test.
func TestStreamClosedAfterLastResponseHeaders(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	passThrough := toolmeshMode()
	passThrough.ResponseBodyMode = extprocfilterv3.ProcessingMode_NONE
	cfg := defaultExtProc()
	cfg.AllowedOverrideModes = append(cfg.AllowedOverrideModes, passThrough)
	fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetResponseHeaders() != nil {
			r := respHeadersResp(nil)
			r.ModeOverride = &extprocfilterv3.ProcessingMode{
				RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_NONE}
			return r, nil
		}
		return continueAll(req)
	}
	e := newEnv(t, fn, setup{
		extProc:  cfg,
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
		clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
	})
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+"/mcp/core", strings.NewReader(rpcBody))
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{string(b), err}
	}()
	e.ext.waitEnded(t, 1) // before the body is complete
	close(release)
	if r := <-done; r.err != nil || r.body != "data: one\n\ndata: two\n\n" {
		t.Fatalf("body %q, error %v", r.body, r.err)
	}
	if got := strings.Join(e.ext.kinds(), ","); got != "request_headers,request_body,response_headers" {
		t.Errorf("messages %s", got)
	}
}
