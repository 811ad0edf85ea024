package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// TestModeOverrideStreamed: the server switches the response body to
// STREAMED from the response_headers reply when the Tool Service answers
// text/event-stream, and transforms each chunk. Envoy (>= 1.34,
// source/extensions/filters/http/ext_proc/ext_proc.cc onReceiveMessage and
// effectiveModeOverride) fills the override in from the configured
// processing_mode and compares the result enum for enum with each
// allowed_override_modes entry (request_header_mode ignored), so an entry
// naming response_body_mode alone never matches toolmesh's configuration.
func TestModeOverrideStreamed(t *testing.T) {
	oldEntry := []*extprocfilterv3.ProcessingMode{{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}}
	toolmeshOverride := &extprocfilterv3.ProcessingMode{
		RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
	bareOverride := &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
	tests := []struct {
		name     string
		allowed  []*extprocfilterv3.ProcessingMode
		override *extprocfilterv3.ProcessingMode
		// streamed: each event reaches ext_proc (and the client) before the
		// upstream sends the next one.
		streamed bool
		disallow bool // allow_mode_override false
	}{
		{name: "allow_mode_override false ignores the override", disallow: true,
			allowed: []*extprocfilterv3.ProcessingMode{streamedEntry()}, override: toolmeshOverride},
		{name: "full effective entry accepts the override", allowed: []*extprocfilterv3.ProcessingMode{streamedEntry()},
			override: toolmeshOverride, streamed: true},
		{name: "response_body_mode-only entry never matches", allowed: oldEntry, override: toolmeshOverride},
		{name: "response_body_mode-only entry rejects a bare override", allowed: oldEntry, override: bareOverride},
		{name: "bare override sets request_body_mode NONE, outside the entry",
			allowed: []*extprocfilterv3.ProcessingMode{streamedEntry()}, override: bareOverride},
		{name: "no allow-list accepts any override", override: bareOverride, streamed: true},
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
					// The header mutation lands only while the headers are
					// still held (BUFFERED), never in STREAMED.
					return respBodyResp(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
						RemoveHeaders: []string{"content-length"}, SetHeaders: []*corev3.HeaderValueOption{set("x-held", "1")}},
						BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: up}}}), nil
				}
				return continueAll(req)
			}
			cfg := defaultExtProc()
			cfg.AllowModeOverride = !tt.disallow
			cfg.AllowedOverrideModes = tt.allowed
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
			if held := resp.Header.Get("x-held") == "1"; held == tt.streamed {
				t.Fatalf("response headers held for the body: %v, want %v", held, !tt.streamed)
			}
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

// TestModeOverrideContentLength: content-length is removed by
// Filter::encodeHeaders right after the response headers go to the server,
// with the mode in force *then* (ProcessorState::shouldRemoveContentLength:
// BUFFERED with headers SEND keeps it). A switch to STREAMED that arrives
// in the response_headers reply therefore leaves the upstream content-length
// in place; processHeaderMutation, which runs with the new mode, only skips
// content-length in set_headers. The server must remove it itself.
func TestModeOverrideContentLength(t *testing.T) {
	for _, tt := range []struct {
		name   string
		remove bool
		wantCL string
	}{
		{name: "kept unless the server removes it", wantCL: "11"},
		{name: "removed by the server", remove: true, wantCL: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Length", "11")
				_, _ = w.Write([]byte("data: one\n\n"))
			})
			fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
				if req.GetResponseHeaders() != nil {
					hm := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("content-length", "99")}}
					if tt.remove {
						hm.RemoveHeaders = []string{"content-length"}
					}
					resp := respHeadersResp(&extprocv3.CommonResponse{HeaderMutation: hm})
					resp.ModeOverride = &extprocfilterv3.ProcessingMode{
						RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
					return resp, nil
				}
				return continueAll(req)
			}
			e := newEnv(t, fn, setup{
				extProc:  defaultExtProc(),
				routes:   []*routev3.Route{clusterRoute("/", "toolsvc_sse", nil)},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_sse", up.addr())},
			})
			got := e.do("GET", "/mcp/core", "", nil)
			if got.body != "data: one\n\n" {
				t.Fatalf("body %q", got.body)
			}
			if cl := got.header.Get("Content-Length"); cl != tt.wantCL {
				t.Fatalf("content-length %q, want %q", cl, tt.wantCL)
			}
		})
	}
}

// TestEffectiveOverride checks the comparison itself against the shapes
// Envoy's effectiveModeOverride produces.
func TestEffectiveOverride(t *testing.T) {
	configured := toolmeshMode()
	tests := []struct {
		name     string
		override *extprocfilterv3.ProcessingMode
		allowed  []*extprocfilterv3.ProcessingMode
		want     bool
	}{
		{"full entry, override naming both body modes", &extprocfilterv3.ProcessingMode{
			RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED},
			[]*extprocfilterv3.ProcessingMode{streamedEntry()}, true},
		{"request_header_mode is not compared", &extprocfilterv3.ProcessingMode{
			RequestHeaderMode: extprocfilterv3.ProcessingMode_SKIP,
			RequestBodyMode:   extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED},
			[]*extprocfilterv3.ProcessingMode{streamedEntry()}, true},
		{"response_header_mode is compared", &extprocfilterv3.ProcessingMode{
			ResponseHeaderMode: extprocfilterv3.ProcessingMode_SKIP,
			RequestBodyMode:    extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED},
			[]*extprocfilterv3.ProcessingMode{streamedEntry()}, false},
		{"response_body_mode-only entry", &extprocfilterv3.ProcessingMode{
			RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED},
			[]*extprocfilterv3.ProcessingMode{{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}}, false},
		{"empty allow-list", &extprocfilterv3.ProcessingMode{}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &xdsconfig.ExtProcFilter{AllowedOverride: tt.allowed}
			eff := xdsconfig.EffectiveOverride(configured, tt.override)
			if got := f.OverrideAllowed(eff); got != tt.want {
				t.Fatalf("overrideAllowed(%v) = %v, want %v", eff, got, tt.want)
			}
		})
	}
	// Header and trailer modes left DEFAULT come from the configuration,
	// body modes never do.
	eff := xdsconfig.EffectiveOverride(configured, &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED})
	if eff.GetResponseHeaderMode() != extprocfilterv3.ProcessingMode_SEND || eff.GetResponseTrailerMode() != extprocfilterv3.ProcessingMode_SKIP ||
		eff.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_NONE {
		t.Fatalf("effective override %v", eff)
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

// TestStreamingHeadersFlushed: Envoy's codec writes response headers
// encoded without end of stream at once (source/common/http/http1/
// codec_impl.cc, StreamEncoderImpl::encodeHeadersBase → flushOutput), so a
// client sees the headers of a STREAMED body before its first byte: an
// event stream that stays quiet (a change-notification stream) is open for
// the client at once. The upstream sends its body only after the client
// has its headers; a data plane holding the headers for the body never
// completes, and the request's context bounds that failure.
func TestStreamingHeadersFlushed(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("data: late\n\n"))
	})
	fn := func(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
		if req.GetResponseHeaders() != nil {
			resp := respHeadersResp(&extprocv3.CommonResponse{})
			resp.ModeOverride = &extprocfilterv3.ProcessingMode{
				RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
			return resp, nil
		}
		return continueAll(req)
	}
	cfg := defaultExtProc()
	cfg.AllowModeOverride = true
	cfg.AllowedOverrideModes = []*extprocfilterv3.ProcessingMode{streamedEntry()}
	e := newEnv(t, fn, setup{
		extProc:  cfg,
		routes:   []*routev3.Route{clusterRoute("/", "notifications", nil)},
		clusters: []*clusterv3.Cluster{staticCluster(t, "notifications", up.addr())},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/mcp/core", nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("no response headers before the body: %v", err)
	}
	defer resp.Body.Close()
	close(release)
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "data: late\n\n" {
		t.Fatalf("body %q, %v", b, err)
	}
}
