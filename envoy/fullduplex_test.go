package envoy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// duplexEntry is the allowed_override_modes entry of an override to a
// FULL_DUPLEX_STREAMED response body (trailers SEND, as
// processing_mode.proto asks of the mode).
func duplexEntry() *extprocfilterv3.ProcessingMode {
	m := toolmeshMode()
	m.ResponseBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	m.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SEND
	return m
}

func duplexOverride() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestBodyMode:     extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode:    extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SEND,
	}
}

func streamedBody(body string, eos bool) *extprocv3.ProcessingResponse {
	return respBodyResp(&extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{
			Body: []byte(body), EndOfStream: eos}}}})
}

// duplexServer is an ext_proc server that answers the request phases with
// CONTINUE, the response headers with the override, and gives every
// response_body message to onChunk, which may send any number of messages
// (the M:N exchange of FULL_DUPLEX_STREAMED).
type duplexServer struct {
	extprocv3.UnimplementedExternalProcessorServer
	override *extprocfilterv3.ProcessingMode
	onChunk  func(send func(*extprocv3.ProcessingResponse), b *extprocv3.HttpBody)
	// afterHeaders, when set, is sent right after the response-headers
	// reply, before any chunk.
	afterHeaders *extprocv3.ProcessingResponse

	mu     sync.Mutex
	chunks []string
	ended  chan struct{}
}

func (s *duplexServer) Process(ps extprocv3.ExternalProcessor_ProcessServer) error {
	defer func() { s.ended <- struct{}{} }()
	send := func(r *extprocv3.ProcessingResponse) { _ = ps.Send(r) }
	for {
		req, err := ps.Recv()
		if err != nil {
			return nil
		}
		switch r := req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp := respHeadersResp(nil)
			resp.ModeOverride = s.override
			send(resp)
			if s.afterHeaders != nil {
				send(s.afterHeaders)
			}
		case *extprocv3.ProcessingRequest_ResponseBody:
			s.mu.Lock()
			s.chunks = append(s.chunks, string(r.ResponseBody.GetBody()))
			s.mu.Unlock()
			s.onChunk(send, r.ResponseBody)
		default:
			resp, _ := continueAll(req)
			send(resp)
		}
	}
}

func startDuplexEnv(t *testing.T, s *duplexServer, allowed []*extprocfilterv3.ProcessingMode, upAddr string) *env {
	t.Helper()
	s.ended = make(chan struct{}, 10)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, s)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	cfg := defaultExtProc()
	cfg.AllowedOverrideModes = allowed
	dp, err := New(Options{ExtProcConn: cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	st := setup{
		extProc:  cfg,
		routes:   []*routev3.Route{clusterRoute("/", "toolsvc_a", nil)},
		clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", upAddr)},
	}
	if err := dp.Apply(st.resources(t)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	e := &env{t: t, dp: dp}
	e.srv = httptest.NewServer(dp)
	t.Cleanup(e.srv.Close)
	return e
}

// TestFullDuplexResponseBody follows rules.go, "FULL_DUPLEX_STREAMED
// response bodies": after an override at the response headers, the client
// gets only what the server streams back, the server may end the body
// while the upstream is still open (which is then closed), and a body
// response Envoy cannot take resets the stream.
func TestFullDuplexResponseBody(t *testing.T) {
	const first = "data: one\n\n"
	tests := []struct {
		name string
		// hang: the upstream sends first and then waits for the request to
		// end; otherwise it sends first and "data: two\n\n" and ends.
		hang         bool
		noBody       bool // the upstream sends its headers only
		allowed      []*extprocfilterv3.ProcessingMode
		afterHeaders *extprocv3.ProcessingResponse
		onChunk      func(send func(*extprocv3.ProcessingResponse), b *extprocv3.HttpBody)
		wantBody     string
		wantReset    bool
		wantChunks   int // response_body messages the server received
		wantUpClosed bool
	}{
		{
			name: "server ends the body while the upstream hangs",
			hang: true, allowed: []*extprocfilterv3.ProcessingMode{duplexEntry()},
			onChunk: func(send func(*extprocv3.ProcessingResponse), b *extprocv3.HttpBody) {
				send(streamedBody("<"+string(b.GetBody())+">", false))
				send(streamedBody("data: final\n\n", true))
			},
			wantBody: "<" + first + ">data: final\n\n", wantChunks: 1, wantUpClosed: true,
		},
		{
			name:    "echoed body ends with the upstream",
			allowed: []*extprocfilterv3.ProcessingMode{duplexEntry()},
			onChunk: func(send func(*extprocv3.ProcessingResponse), b *extprocv3.HttpBody) {
				send(streamedBody(string(b.GetBody()), b.GetEndOfStream()))
			},
			wantBody: first + "data: two\n\n",
		},
		{
			name: "a chunk the server does not answer never reaches the client",
			hang: true, allowed: []*extprocfilterv3.ProcessingMode{duplexEntry()},
			onChunk: func(send func(*extprocv3.ProcessingResponse), b *extprocv3.HttpBody) {
				send(streamedBody("", true))
			},
			wantBody: "", wantChunks: 1, wantUpClosed: true,
		},
		{
			name: "a normal body mutation resets the stream",
			hang: true, allowed: []*extprocfilterv3.ProcessingMode{duplexEntry()},
			onChunk: func(send func(*extprocv3.ProcessingResponse), b *extprocv3.HttpBody) {
				send(respBodyResp(nil))
			},
			wantReset: true, wantChunks: 1, wantUpClosed: true,
		},
		{
			name: "a streamed response before the first chunk resets the stream",
			hang: true, noBody: true, allowed: []*extprocfilterv3.ProcessingMode{duplexEntry()},
			afterHeaders: streamedBody("data: early\n\n", true),
			onChunk:      func(func(*extprocv3.ProcessingResponse), *extprocv3.HttpBody) {},
			wantReset:    true, wantUpClosed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upClosed := make(chan struct{})
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if !tt.noBody {
					_, _ = io.WriteString(w, first)
				}
				w.(http.Flusher).Flush()
				if !tt.hang {
					_, _ = io.WriteString(w, "data: two\n\n")
					return
				}
				<-r.Context().Done()
				close(upClosed)
			})
			srv := &duplexServer{override: duplexOverride(), onChunk: tt.onChunk, afterHeaders: tt.afterHeaders}
			e := startDuplexEnv(t, srv, tt.allowed, up.addr())
			req, _ := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+"/mcp/core", strings.NewReader(rpcBody))
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tt.wantReset {
				if err == nil {
					t.Fatalf("body %q read without error, want a reset", b)
				}
			} else if err != nil || string(b) != tt.wantBody {
				t.Fatalf("body %q (error %v), want %q", b, err, tt.wantBody)
			}
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
			if tt.wantUpClosed {
				select {
				case <-upClosed:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream request was not closed")
				}
			}
			select {
			case <-srv.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the ext_proc stream did not end")
			}
			srv.mu.Lock()
			n := len(srv.chunks)
			srv.mu.Unlock()
			if tt.wantChunks > 0 && n != tt.wantChunks {
				t.Errorf("server got %d chunks, want %d", n, tt.wantChunks)
			}
		})
	}
}

// TestFullDuplexOverrideNotAllowed: an override to FULL_DUPLEX_STREAMED that
// no allowed_override_modes entry matches is ignored (Filter::
// onReceiveMessage), so the body stays BUFFERED.
func TestFullDuplexOverrideNotAllowed(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
	})
	var gotBuffered bool
	srv := &duplexServer{override: duplexOverride(), onChunk: func(send func(*extprocv3.ProcessingResponse), b *extprocv3.HttpBody) {
		gotBuffered = b.GetEndOfStream() && string(b.GetBody()) == "data: one\n\n"
		send(respBodyResp(nil))
	}}
	e := startDuplexEnv(t, srv, []*extprocfilterv3.ProcessingMode{streamedEntry()}, up.addr())
	r := e.do("POST", "/mcp/core", rpcBody, nil)
	if r.status != 200 || r.body != "data: one\n\n" {
		t.Fatalf("got %d %q", r.status, r.body)
	}
	if !gotBuffered {
		t.Error("the body did not arrive whole (BUFFERED)")
	}
}
