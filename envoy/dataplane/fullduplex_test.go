package dataplane

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
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
	cfg := defaultExtProc()
	cfg.AllowedOverrideModes = allowed
	return startExtProcEnv(t, s, cfg, upAddr)
}

// startEarlyDuplexEnv is startDuplexEnv for an earlyDuplexServer, with a
// message_timeout shorter than the server's wait before its headers reply.
func startEarlyDuplexEnv(t *testing.T, s *earlyDuplexServer, allowed []*extprocfilterv3.ProcessingMode, up *upstream) *env {
	t.Helper()
	cfg := defaultExtProc()
	cfg.AllowedOverrideModes = allowed
	cfg.MessageTimeout = durationpb.New(100 * time.Millisecond)
	return startExtProcEnv(t, s, cfg, up.addr())
}

func startExtProcEnv(t *testing.T, s extprocv3.ExternalProcessorServer, cfg *extprocfilterv3.ExternalProcessor, upAddr string, routeMod ...func(*routev3.RouteAction)) *env {
	t.Helper()
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
	dp, err := New(Options{ExtProcConn: cc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	st := setup{
		extProc: cfg,
		routes: []*routev3.Route{clusterRoute("/", "toolsvc_a", func(a *routev3.RouteAction) {
			for _, m := range routeMod {
				m(a)
			}
		})},
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

// earlyDuplexServer switches the response body to FULL_DUPLEX_STREAMED in
// its request-headers reply and answers the response with respond, which
// gets every response message (headers first) and may send any messages
// at any time.
type earlyDuplexServer struct {
	extprocv3.UnimplementedExternalProcessorServer
	respond func(send func(*extprocv3.ProcessingResponse), req *extprocv3.ProcessingRequest)
}

func (s *earlyDuplexServer) Process(ps extprocv3.ExternalProcessor_ProcessServer) error {
	send := func(r *extprocv3.ProcessingResponse) { _ = ps.Send(r) }
	for {
		req, err := ps.Recv()
		if err != nil {
			return nil
		}
		switch req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp := reqHeadersResp(nil)
			resp.ModeOverride = duplexOverride()
			send(resp)
		case *extprocv3.ProcessingRequest_RequestBody:
			send(reqBodyResp(nil))
		default:
			s.respond(send, req)
		}
	}
}

// TestFullDuplexFromRequestHeaders follows rules.go, "FULL_DUPLEX_STREAMED
// response bodies", for an override in the request-headers reply: the
// response headers and then each chunk go to the server as they arrive,
// without waiting for the headers reply and without a message timer, so
// the server may answer the headers only after it saw the body; its
// header mutation applies to the held headers (content-length removed);
// a body response before the headers reply is a spurious message, and
// like an ImmediateResponse then, a local reply since no headers left.
func TestFullDuplexFromRequestHeaders(t *testing.T) {
	const part = "data: one\n\n"
	// headersAfter answers the headers (and ends the body with body) at
	// the first chunk, or atEOS at the last one.
	headersAfter := func(atEOS bool, body string) func(func(*extprocv3.ProcessingResponse), *extprocv3.ProcessingRequest) {
		seen := 0
		return func(send func(*extprocv3.ProcessingResponse), req *extprocv3.ProcessingRequest) {
			b := req.GetResponseBody()
			if b == nil {
				return // the headers reply waits for the body
			}
			seen++
			if b.GetEndOfStream() == atEOS && (atEOS || seen == 1) {
				// Longer than message_timeout: no timer runs.
				time.Sleep(300 * time.Millisecond)
				send(respHeadersResp(&extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{
					SetHeaders: []*corev3.HeaderValueOption{set("x-chunks-seen", strconv.Itoa(seen)), set("content-length", "99")}}}))
				send(streamedBody(body, true))
			}
		}
	}
	tests := []struct {
		name         string
		hang         bool // the upstream sends part and waits; else part, "data: two\n\n", end
		respond      func(func(*extprocv3.ProcessingResponse), *extprocv3.ProcessingRequest)
		wantStatus   int
		wantBody     string
		wantSeen     string // x-chunks-seen; "eos": at least one, at the end
		wantUpClosed bool
	}{
		{name: "headers reply after the first chunk, the upstream still open", hang: true,
			respond: headersAfter(false, "data: end\n\n"), wantStatus: 200, wantBody: "data: end\n\n", wantSeen: "1", wantUpClosed: true},
		{name: "headers reply after the whole body",
			respond: headersAfter(true, "DATA"), wantStatus: 200, wantBody: "DATA", wantSeen: "eos"},
		{name: "a body response before the headers reply is a local reply", hang: true,
			respond: func(send func(*extprocv3.ProcessingResponse), req *extprocv3.ProcessingRequest) {
				if req.GetResponseBody() != nil {
					send(streamedBody("early", true))
				}
			}, wantStatus: 500, wantUpClosed: true},
		{name: "an ImmediateResponse while the headers are held is a local reply", hang: true,
			respond: func(send func(*extprocv3.ProcessingResponse), req *extprocv3.ProcessingRequest) {
				if req.GetResponseBody() != nil {
					send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
						ImmediateResponse: &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode_Conflict}, Body: []byte("held")}}})
				}
			}, wantStatus: 409, wantBody: "held", wantUpClosed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upClosed := make(chan struct{}, 1)
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, part)
				w.(http.Flusher).Flush()
				if !tt.hang {
					_, _ = io.WriteString(w, "data: two\n\n")
					return
				}
				<-r.Context().Done()
				upClosed <- struct{}{}
			})
			allowed := []*extprocfilterv3.ProcessingMode{duplexEntry()}
			e := startEarlyDuplexEnv(t, &earlyDuplexServer{respond: tt.respond}, allowed, up)
			got := e.do("POST", "/", "{}", map[string]string{"content-type": "application/json"})
			if got.status != tt.wantStatus || (tt.wantBody != "" && got.body != tt.wantBody) {
				t.Fatalf("got %d %q, want %d %q", got.status, got.body, tt.wantStatus, tt.wantBody)
			}
			if tt.wantSeen != "" {
				if s := got.header.Get("x-chunks-seen"); s != tt.wantSeen && (tt.wantSeen != "eos" || s == "" || s == "0") {
					t.Errorf("x-chunks-seen %q, want %q: the headers reply came after that many chunks", s, tt.wantSeen)
				}
				if cl := got.header.Get("Content-Length"); cl != "" {
					t.Errorf("content-length %q: not removed in FULL_DUPLEX_STREAMED", cl)
				}
			}
			if tt.wantUpClosed {
				select {
				case <-upClosed:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream request was not closed")
				}
			}
		})
	}
}

// TestFullDuplexStallBoundedByIdleTimeout follows rules.go, "Stream idle
// timeout": a server that switched the response body to
// FULL_DUPLEX_STREAMED and then holds the headers reply of a complete JSON
// answer runs no message timer, and the router's timer is gone with the
// upstream response; the route's idle_timeout resets the stream, so the
// client does not wait for the server.
func TestFullDuplexStallBoundedByIdleTimeout(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	stalled := make(chan struct{}, 1)
	s := &earlyDuplexServer{respond: func(_ func(*extprocv3.ProcessingResponse), req *extprocv3.ProcessingRequest) {
		if req.GetResponseBody().GetEndOfStream() {
			stalled <- struct{}{} // the whole answer arrived: never reply
		}
	}}
	e := startIdleDuplexEnv(t, s, up.addr())
	// The client's own timeout is far above the idle timeout: a request
	// that reaches it was not bounded by the data plane.
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(e.srv.URL+"/mcp/core", "application/json", strings.NewReader(`{}`))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Fatalf("got %d %q, want the stream reset", resp.StatusCode, b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the client timed out (%v): the stall was not bounded", err)
	}
	select {
	case <-stalled:
	default:
		t.Fatal("the server never saw the whole answer")
	}
}

// TestFullDuplexStallAfterUpstreamEndBoundedByIdleTimeout is the same rule
// once the upstream's whole answer went to the server and the headers
// reply came: the data plane then waits for the server alone, and a server
// that streams part of the body and then never ends it is still bounded by
// the route's idle_timeout: the stream is reset after the part reached the
// client.
func TestFullDuplexStallAfterUpstreamEndBoundedByIdleTimeout(t *testing.T) {
	const part = "data: part\n\n"
	up := startUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: whole\n\n")
	})
	stalled := make(chan struct{}, 1)
	s := &earlyDuplexServer{respond: func(send func(*extprocv3.ProcessingResponse), req *extprocv3.ProcessingRequest) {
		if req.GetResponseBody().GetEndOfStream() {
			// The whole answer arrived: the headers and a part go back,
			// the end never does.
			send(respHeadersResp(nil))
			send(streamedBody(part, false))
			stalled <- struct{}{}
		}
	}}
	e := startIdleDuplexEnv(t, s, up.addr())
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(e.srv.URL+"/mcp/core", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("POST: %v, want the headers and then a reset", err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err == nil {
		t.Fatalf("got %d %q in full, want the stream reset", resp.StatusCode, b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the client timed out (%v): the stall was not bounded", err)
	}
	if resp.StatusCode != http.StatusOK || string(b) != part {
		t.Errorf("got %d and %q before the reset, want 200 and %q", resp.StatusCode, b, part)
	}
	select {
	case <-stalled:
	default:
		t.Fatal("the server never saw the whole answer")
	}
}

// startIdleDuplexEnv serves s, which may switch the response body to
// FULL_DUPLEX_STREAMED, in front of upAddr on a route whose idle_timeout
// is 300 ms.
func startIdleDuplexEnv(t *testing.T, s extprocv3.ExternalProcessorServer, upAddr string) *env {
	cfg := defaultExtProc()
	cfg.AllowedOverrideModes = []*extprocfilterv3.ProcessingMode{duplexEntry()}
	return startExtProcEnv(t, s, cfg, upAddr, func(a *routev3.RouteAction) {
		a.IdleTimeout = durationpb.New(300 * time.Millisecond)
	})
}
