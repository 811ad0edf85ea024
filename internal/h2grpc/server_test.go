package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// testProcessor is an ext_proc server whose behaviour the stream's "mode"
// metadata picks:
//   - echo (default): answers each request body with an ImmediateResponse
//     carrying it, until the client half-closes.
//   - size: answers each request with a body of the size in its body.
//   - md: answers once with the request's metadata, sorted "k=v" lines,
//     with response header x-resp and trailer x-trail-bin.
//   - error: fails at once (a Trailers-Only response).
//   - hold: never reads or answers; records when the stream ends.
type testProcessor struct {
	extprocv3.UnimplementedExternalProcessorServer
	ended chan error // hold streams' ends
}

func (p *testProcessor) Process(st extprocv3.ExternalProcessor_ProcessServer) error {
	md, _ := metadata.FromIncomingContext(st.Context())
	mode := ""
	if v := md.Get("mode"); len(v) > 0 {
		mode = v[0]
	}
	switch mode {
	case "error":
		return status.Error(codes.PermissionDenied, "denied: 100% sure, ünïcode")
	case "hold":
		<-st.Context().Done()
		p.ended <- st.Context().Err()
		// Not OK: the status must not race the client's own deadline.
		return status.FromContextError(st.Context().Err()).Err()
	case "md":
		var lines []string
		for k, vs := range md {
			for _, v := range vs {
				lines = append(lines, k+"="+v)
			}
		}
		sort.Strings(lines)
		_ = st.SetHeader(metadata.Pairs("x-resp", "1"))
		st.SetTrailer(metadata.Pairs("x-trail-bin", "\x01\x02"))
		return st.Send(immediate([]byte(strings.Join(lines, "\n"))))
	}
	for {
		req, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if mode == "size" {
				p.ended <- err
			}
			return err
		}
		body := req.GetRequestBody().GetBody()
		if mode == "size" {
			var n int
			_, _ = fmt.Sscan(string(body), &n)
			body = bytes.Repeat([]byte{'x'}, n)
		}
		if err := st.Send(immediate(body)); err != nil {
			return err
		}
	}
}

func immediate(body []byte) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{Body: body}}}
}

func bodyRequest(b []byte) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: b}}}
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.n++
		l.mu.Unlock()
	}
	return c, err
}

func (l *countingListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

type testServer struct {
	addr string
	gs   *grpc.Server
	ln   *countingListener
	p    *testProcessor
}

func startServer(t *testing.T, opts ...grpc.ServerOption) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{addr: ln.Addr().String(), gs: grpc.NewServer(opts...), ln: &countingListener{Listener: ln},
		p: &testProcessor{ended: make(chan error, 16)}}
	extprocv3.RegisterExternalProcessorServer(s.gs, s.p)
	healthpb.RegisterHealthServer(s.gs, health.NewServer())
	go func() { _ = s.gs.Serve(s.ln) }()
	t.Cleanup(s.gs.Stop)
	return s
}

func newTestClient(t *testing.T, o Options) *ClientConn {
	t.Helper()
	cc, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func withMode(ctx context.Context, mode string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "mode", mode)
}

func openProcess(t *testing.T, ctx context.Context, cc grpc.ClientConnInterface, opts ...grpc.CallOption) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	st, err := extprocv3.NewExternalProcessorClient(cc).Process(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func liveConns(cc *ClientConn) int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return len(cc.conns)
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if status.Code(err) != want || errors.Is(err, io.EOF) {
		t.Fatalf("%s: error %v, want code %v", what, err, want)
	}
}
