package envoy

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// TestModeOverrideStreamed follows research/envoy.md §1.4: the server
// switches the response body to STREAMED from the response_headers reply
// when the Tool Service answers text/event-stream, and transforms each chunk.
func TestModeOverrideStreamed(t *testing.T) {
	tests := []struct {
		name     string
		override *extprocfilterv3.ProcessingMode
		// streamed: each event reaches ext_proc (and the client) before the
		// upstream sends the next one.
		streamed bool
		disallow bool // allow_mode_override false
	}{
		{name: "allow_mode_override false ignores the override", disallow: true,
			override: &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}},
		{name: "allowed override streams", override: &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}, streamed: true},
		{name: "override outside allowed_override_modes is ignored", override: &extprocfilterv3.ProcessingMode{
			ResponseHeaderMode: extprocfilterv3.ProcessingMode_SEND, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := make(chan struct{})
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte("data: one\n\n"))
				w.(http.Flusher).Flush()
				if tt.streamed {
					select {
					case <-next:
					case <-r.Context().Done():
						return
					}
				}
				_, _ = w.Write([]byte("data: two\n\n"))
			})
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				switch {
				case req.GetResponseHeaders() != nil:
					resp := respHeadersResp(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
						RemoveHeaders: []string{"content-length"}}})
					resp.ModeOverride = tt.override
					return resp, nil
				case req.GetResponseBody() != nil:
					up := bytes.ToUpper(req.GetResponseBody().GetBody())
					return respBodyResp(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
						RemoveHeaders: []string{"content-length"}},
						BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: up}}}), nil
				}
				return continueAll(req)
			}
			cfg := defaultExtProc()
			cfg.AllowModeOverride = !tt.disallow
			e := newEnv(t, fn, setup{
				extProc:  cfg,
				routes:   []*routev3.Route{clusterRoute("/", "toolsvc_sse", nil)},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_sse", up.addr())},
			})
			req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/mcp/core", nil)
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			var lines []string
			for {
				line, err := br.ReadString('\n')
				if line != "" {
					lines = append(lines, line)
				}
				if line == "DATA: ONE\n" && tt.streamed {
					close(next) // the first event arrived on its own
				}
				if err != nil {
					break
				}
			}
			if got := strings.Join(lines, ""); got != "DATA: ONE\n\nDATA: TWO\n\n" {
				t.Fatalf("client got %q", got)
			}
			var bodies []*extprocv3.HttpBody
			for _, m := range e.ext.messages() {
				if b := m.GetResponseBody(); b != nil {
					bodies = append(bodies, b)
				}
			}
			if len(bodies) == 0 || !bodies[len(bodies)-1].GetEndOfStream() {
				t.Fatalf("response bodies %v", bodies)
			}
			if tt.streamed && len(bodies) < 2 {
				t.Fatalf("STREAMED sent %d body messages, want one per chunk", len(bodies))
			}
			if !tt.streamed && len(bodies) != 1 {
				t.Fatalf("BUFFERED sent %d body messages, want 1", len(bodies))
			}
		})
	}
}

func TestStreamedRequestBody(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	cfg := defaultExtProc()
	cfg.ProcessingMode.RequestBodyMode = extprocfilterv3.ProcessingMode_STREAMED
	fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if b := req.GetRequestBody(); b != nil {
			return reqBodyResp(&extprocv3.CommonResponse{
				// Header mutations in a STREAMED body reply are ignored.
				HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-late", "1")}},
				BodyMutation:   &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: bytes.ToUpper(b.GetBody())}},
			}), nil
		}
		return continueAll(req)
	}
	e := newEnv(t, fn, setup{
		extProc:  cfg,
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
		clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", up.addr())},
	})
	got := e.do("POST", "/", "hello", nil)
	if got.status != 200 {
		t.Fatalf("got %d %q", got.status, got.body)
	}
	reqs := up.requests()
	if len(reqs) != 1 || reqs[0].body != "HELLO" {
		t.Fatalf("upstream got %+v", reqs)
	}
	if reqs[0].header.Get("X-Late") != "" {
		t.Error("a header mutation in a STREAMED body reply was applied")
	}
	// STREAMED removes content-length: the upstream request is chunked.
	if reqs[0].header.Get("Content-Length") != "" {
		t.Errorf("content-length %q forwarded in STREAMED mode", reqs[0].header.Get("Content-Length"))
	}
}
