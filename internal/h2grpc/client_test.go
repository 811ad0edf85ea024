package h2grpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestRoundTrip sends messages of several sizes both ways on one stream,
// with the protocol's default windows (flow control at every 64 KiB) and
// Envoy's 256 MiB ones, then half-closes: the server's OK status is EOF.
func TestRoundTrip(t *testing.T) {
	srv := startServer(t, grpc.MaxRecvMsgSize(64<<20), grpc.MaxSendMsgSize(64<<20))
	for _, tc := range []struct {
		name   string
		window uint32
		sizes  []int
	}{
		{"small default windows", 0, []int{0, 1, 100, 16384, 16385}},
		{"10MB default windows", 0, []int{10 << 20, 3}},
		{"10MB envoy windows", 256 << 20, []int{10 << 20, 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := newTestClient(t, Options{Target: srv.addr, StreamWindow: tc.window, ConnWindow: tc.window})
			st := openProcess(t, t.Context(), cc, grpc.MaxCallRecvMsgSize(64<<20))
			for i, n := range tc.sizes {
				body := bytes.Repeat([]byte{byte('a' + i)}, n)
				if err := st.Send(bodyRequest(body)); err != nil {
					t.Fatalf("send %d bytes: %v", n, err)
				}
				resp, err := st.Recv()
				if err != nil {
					t.Fatalf("recv %d bytes: %v", n, err)
				}
				if !bytes.Equal(resp.GetImmediateResponse().GetBody(), body) {
					t.Fatalf("echo of %d bytes: got %d bytes back", n, len(resp.GetImmediateResponse().GetBody()))
				}
			}
			if err := st.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Recv(); err != io.EOF {
				t.Fatalf("after CloseSend: %v, want io.EOF", err)
			}
			// Unary on the same pool (Invoke is a stream underneath).
			resp, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Check = %v, %v", resp, err)
			}
			if n := liveConns(cc); n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
		})
	}
}

// TestConcurrentStreams runs streams from many goroutines on one
// connection.
func TestConcurrentStreams(t *testing.T) {
	srv := startServer(t)
	cc := newTestClient(t, Options{Target: srv.addr})
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := extprocv3Process(t.Context(), cc)
			if err != nil {
				errs <- err
				return
			}
			for i := range 5 {
				want := []byte(fmt.Sprintf("g%d-m%d-%s", g, i, strings.Repeat("z", g*1000)))
				if err := st.Send(bodyRequest(want)); err != nil {
					errs <- err
					return
				}
				resp, err := st.Recv()
				if err != nil || !bytes.Equal(resp.GetImmediateResponse().GetBody(), want) {
					errs <- fmt.Errorf("goroutine %d message %d: %v", g, i, err)
					return
				}
			}
			_ = st.CloseSend()
			if _, err := st.Recv(); err != io.EOF {
				errs <- fmt.Errorf("goroutine %d end: %v", g, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := srv.ln.count(); n != 1 {
		t.Errorf("server accepted %d connections, want 1", n)
	}
}

// TestMaxConcurrentStreams: once the server's SETTINGS limit the streams
// of a connection, the next stream opens a new connection (Envoy's pool
// creates a client rather than queueing while it may); a finished stream
// frees its slot.
func TestMaxConcurrentStreams(t *testing.T) {
	for _, tc := range []struct {
		limit     uint32
		held      int
		wantConns int
	}{
		{limit: 2, held: 2, wantConns: 1},
		{limit: 2, held: 3, wantConns: 2},
		{limit: 1, held: 3, wantConns: 3},
	} {
		t.Run(fmt.Sprintf("limit %d held %d", tc.limit, tc.held), func(t *testing.T) {
			srv := startServer(t, grpc.MaxConcurrentStreams(tc.limit))
			cc := newTestClient(t, Options{Target: srv.addr})
			// A finished call: the server's SETTINGS have been read.
			if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			for range tc.held {
				st := openProcess(t, withMode(ctx, "echo"), cc)
				if err := st.Send(bodyRequest([]byte("x"))); err != nil {
					t.Fatal(err)
				}
				if _, err := st.Recv(); err != nil {
					t.Fatal(err) // answered: not queued behind the limit
				}
			}
			if n := srv.ln.count(); n != tc.wantConns {
				t.Errorf("server accepted %d connections, want %d", n, tc.wantConns)
			}
		})
	}
}

// extprocv3Process opens a Process stream without a testing.T (for
// goroutines).
func extprocv3Process(ctx context.Context, cc grpc.ClientConnInterface, opts ...grpc.CallOption) (extprocv3.ExternalProcessor_ProcessClient, error) {
	return extprocv3.NewExternalProcessorClient(cc).Process(ctx, opts...)
}

// TestGoAway: GracefulStop with a stream open sends GOAWAY; the open
// stream finishes on the draining connection, a new stream goes on a new
// connection.
func TestGoAway(t *testing.T) {
	first, second := startServer(t), startServer(t)
	var mu sync.Mutex
	var dials []string
	cc := newTestClient(t, Options{Target: "pool", Dial: func(ctx context.Context, _ string) (net.Conn, error) {
		mu.Lock()
		addr := first.addr
		if len(dials) > 0 {
			addr = second.addr
		}
		dials = append(dials, addr)
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}})
	st := openProcess(t, t.Context(), cc)
	if err := st.Send(bodyRequest([]byte("before"))); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { first.gs.GracefulStop(); close(stopped) }()
	waitFor(t, "the connection to drain", func() bool { return liveConns(cc) == 0 })
	st2 := openProcess(t, t.Context(), cc)
	if err := st2.Send(bodyRequest([]byte("new"))); err != nil {
		t.Fatal(err)
	}
	if resp, err := st2.Recv(); err != nil || string(resp.GetImmediateResponse().GetBody()) != "new" {
		t.Fatalf("new stream: %v, %v", resp, err)
	}
	// The old stream still works until it ends.
	if err := st.Send(bodyRequest([]byte("after"))); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || string(resp.GetImmediateResponse().GetBody()) != "after" {
		t.Fatalf("draining stream: %v, %v", resp, err)
	}
	_ = st.CloseSend()
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("draining stream end: %v", err)
	}
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	if len(dials) != 2 || first.ln.count() != 1 || second.ln.count() != 1 {
		t.Errorf("dials %v, accepted %d and %d; want one connection to each server", dials, first.ln.count(), second.ln.count())
	}
}

// TestConnectionLoss: a server Stop fails the open streams with
// Unavailable; the next stream dials again. A refused connect fails the
// stream with Unavailable.
func TestConnectionLoss(t *testing.T) {
	first, second := startServer(t), startServer(t)
	var mu sync.Mutex
	n := 0
	cc := newTestClient(t, Options{Target: "pool", Dial: func(ctx context.Context, _ string) (net.Conn, error) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		switch k {
		case 1:
			return (&net.Dialer{}).DialContext(ctx, "tcp", first.addr)
		case 2:
			return nil, fmt.Errorf("connection refused (test)")
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", second.addr)
	}})
	st := openProcess(t, t.Context(), cc)
	if err := st.Send(bodyRequest([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	first.gs.Stop()
	_, err := st.Recv()
	wantCode(t, "open stream after Stop", err, codes.Unavailable)
	_, err = extprocv3Process(t.Context(), cc)
	wantCode(t, "stream with a failed connect", err, codes.Unavailable)
	st = openProcess(t, t.Context(), cc)
	if err := st.Send(bodyRequest([]byte("again"))); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("stream after redial: %v", err)
	}
}

// TestCancel: cancelling the context resets the stream (the server sees
// it cancelled) and Recv, or a Send blocked on flow control, returns
// Canceled; a deadline gives DeadlineExceeded.
func TestCancel(t *testing.T) {
	srv := startServer(t)
	cc := newTestClient(t, Options{Target: srv.addr})
	for _, tc := range []struct {
		name string
		send bool // block in Send (the server never reads) rather than Recv
		want codes.Code
	}{
		{"recv cancel", false, codes.Canceled},
		{"send cancel", true, codes.Canceled},
		{"recv deadline", false, codes.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(withMode(t.Context(), "hold"))
			if tc.want == codes.DeadlineExceeded {
				ctx, cancel = context.WithTimeout(withMode(t.Context(), "hold"), 50*time.Millisecond)
			}
			defer cancel()
			st := openProcess(t, ctx, cc)
			done := make(chan error, 1)
			go func() {
				if tc.send {
					big := bodyRequest(bytes.Repeat([]byte{'b'}, 1<<20))
					for {
						if err := st.Send(big); err != nil {
							if err == io.EOF {
								// Cancelled between two Sends: as grpc-go,
								// Recv tells how the stream ended.
								_, err = st.Recv()
							}
							done <- err
							return
						}
					}
				}
				_, err := st.Recv()
				done <- err
			}()
			if tc.want == codes.Canceled {
				waitFor(t, "the stream to reach the server", func() bool { return srv.gs != nil && streamsOpen(cc) == 1 })
				cancel()
			}
			wantCode(t, "blocked call", <-done, tc.want)
			if err := <-srv.p.ended; err == nil {
				t.Error("the server did not see the stream end")
			}
			if n := streamsOpen(cc); n != 0 {
				t.Errorf("%d streams still open", n)
			}
		})
	}
}

func streamsOpen(cc *ClientConn) int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	n := 0
	for _, c := range cc.conns {
		c.mu.Lock()
		n += len(c.streams)
		c.mu.Unlock()
	}
	return n
}

// TestErrors: a Trailers-Only error keeps its code and percent-decoded
// message; an oversize message fails the stream with ResourceExhausted and
// resets it, the connection staying usable; an oversize send fails alike.
func TestErrors(t *testing.T) {
	srv := startServer(t)
	cc := newTestClient(t, Options{Target: srv.addr})

	st := openProcess(t, withMode(t.Context(), "error"), cc)
	_, err := st.Recv()
	wantCode(t, "trailers-only", err, codes.PermissionDenied)
	if msg := status.Convert(err).Message(); msg != "denied: 100% sure, ünïcode" {
		t.Errorf("message %q", msg)
	}

	st = openProcess(t, withMode(t.Context(), "size"), cc, grpc.MaxCallRecvMsgSize(1000))
	if err := st.Send(bodyRequest([]byte("900"))); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("message under the limit: %v", err)
	}
	if err := st.Send(bodyRequest([]byte("2000"))); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	wantCode(t, "oversize receive", err, codes.ResourceExhausted)
	if err := <-srv.p.ended; status.Code(err) != codes.Canceled {
		t.Errorf("server saw %v, want the stream reset (Canceled)", err)
	}

	st = openProcess(t, t.Context(), cc, grpc.MaxCallSendMsgSize(100))
	err = st.Send(bodyRequest(make([]byte, 200)))
	wantCode(t, "oversize send", err, codes.ResourceExhausted)

	if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("call after the errors: %v", err)
	}
	if n := srv.ln.count(); n != 1 {
		t.Errorf("%d connections, want the one kept", n)
	}
}

// TestHeaders checks what the server receives: Envoy's gRPC request
// headers and the outgoing metadata.
func TestHeaders(t *testing.T) {
	srv := startServer(t)
	cc := newTestClient(t, Options{Target: srv.addr, Authority: "toolmesh_extproc"})
	ctx := metadata.AppendToOutgoingContext(withMode(t.Context(), "md"), "x-tenant", "t1", "X-Upper", "v", "trace-bin", "\x00\x01\xff")
	st := openProcess(t, ctx, cc)
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, l := range strings.Split(string(resp.GetImmediateResponse().GetBody()), "\n") {
		got[l] = true
	}
	for _, want := range []string{
		":authority=toolmesh_extproc", "content-type=application/grpc", "x-envoy-internal=true",
		"x-forwarded-for=127.0.0.1", "x-tenant=t1", "x-upper=v", "trace-bin=\x00\x01\xff", "mode=md",
	} {
		if !got[want] {
			t.Errorf("server metadata lacks %q; has %q", want, resp.GetImmediateResponse().GetBody())
		}
	}
	for l := range got {
		if strings.HasPrefix(l, "user-agent=") {
			t.Errorf("unexpected %q: Envoy's gRPC client sends no user-agent", l)
		}
	}
	if h, err := st.Header(); err != nil || len(h.Get("x-resp")) != 1 || h.Get("x-resp")[0] != "1" {
		t.Errorf("response header = %v, %v", h, err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if tr := st.Trailer().Get("x-trail-bin"); len(tr) != 1 || tr[0] != "\x01\x02" {
		t.Errorf("trailer x-trail-bin = %q", tr)
	}
	for d, want := range map[time.Duration]string{
		time.Microsecond: "1m", 99999999 * time.Millisecond: "99999999m", 100000000 * time.Millisecond: "100000S",
		200000000 * time.Second: "3333333M", 1 << 62: "76861433M",
	} {
		if got := grpcTimeout(d); got != want {
			t.Errorf("grpcTimeout(%s) = %q, want %q", d, got, want)
		}
	}
	if got := decodeGrpcMessage("a%25b%zz%4"); got != "a%b%zz%4" {
		t.Errorf("decodeGrpcMessage = %q", got)
	}
}

// TestFullDuplex sends on one goroutine and receives on another on each
// of several streams, as the data plane's full-duplex mode does, with
// messages larger than the default windows so that senders wait for
// WINDOW_UPDATEs while the receivers read (run with -race).
func TestFullDuplex(t *testing.T) {
	srv := startServer(t)
	cc := newTestClient(t, Options{Target: srv.addr})
	sizes := []int{1, 30000, 70000, 5, 140000}
	const streams, msgs = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*streams)
	for g := range streams {
		st, err := extprocv3Process(t.Context(), cc)
		if err != nil {
			t.Fatal(err)
		}
		body := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + g)}, sizes[(g+i)%len(sizes)]) }
		wg.Go(func() {
			for i := range msgs {
				if err := st.Send(bodyRequest(body(i))); err != nil {
					errs <- fmt.Errorf("stream %d send %d: %v", g, i, err)
					return
				}
			}
			_ = st.CloseSend()
		})
		wg.Go(func() {
			for i := range msgs {
				resp, err := st.Recv()
				if err != nil || !bytes.Equal(resp.GetImmediateResponse().GetBody(), body(i)) {
					errs <- fmt.Errorf("stream %d recv %d: %v", g, i, err)
					return
				}
			}
			if _, err := st.Recv(); err != io.EOF {
				errs <- fmt.Errorf("stream %d end: %v", g, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
