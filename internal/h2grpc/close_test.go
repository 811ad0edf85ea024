package h2grpc

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// writeCounter counts the writes on a connection.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (w writeCounter) Write(p []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(p)
}

// TestCloseAndReset: the half-close and the reset go out in one write on
// the caller's goroutine; the server sees the stream end, the caller's
// RecvMsg reports Canceled, and the connection serves the next stream.
// The negative control is CloseSend with a cancelled context, which takes
// two writes.
func TestCloseAndReset(t *testing.T) {
	for _, tc := range []struct {
		name       string
		closeReset bool
		wantWrites int64
	}{
		{"CloseAndReset", true, 1},
		{"CloseSend and cancel", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Fixed windows: grpc-go's BDP PINGs, whose ACKs are writes of
			// their own, are off (as with toolmesh's extproc server).
			srv := startServer(t, grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(1<<20))
			var writes atomic.Int64
			cc := newTestClient(t, Options{Target: srv.addr,
				Dial: func(ctx context.Context, addr string) (net.Conn, error) {
					c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
					if err != nil {
						return nil, err
					}
					return writeCounter{c, &writes}, nil
				}})
			// A round trip first, so that the connection's own frames
			// (SETTINGS and their ACKs) are behind us.
			first := openProcess(t, withMode(t.Context(), "size"), cc)
			if err := first.Send(bodyRequest([]byte("1"))); err != nil {
				t.Fatal(err)
			}
			if _, err := first.Recv(); err != nil {
				t.Fatal(err)
			}
			_ = first.CloseSend()
			if _, err := first.Recv(); err != io.EOF {
				t.Fatalf("first stream: %v, want EOF", err)
			}
			// The server never reads or answers this one and reports when
			// it ends.
			ctx, cancel := context.WithCancel(withMode(t.Context(), "hold"))
			defer cancel()
			st := openProcess(t, ctx, cc)
			if err := st.Send(bodyRequest([]byte("x"))); err != nil {
				t.Fatal(err)
			}
			before := writes.Load()
			if tc.closeReset {
				st.(*grpc.GenericClientStream[extprocv3.ProcessingRequest, extprocv3.ProcessingResponse]).ClientStream.(*stream).CloseAndReset()
			} else {
				_ = st.CloseSend()
				cancel()
			}
			if err := <-srv.p.ended; err == nil {
				t.Error("the server did not see the stream end")
			}
			waitFor(t, "the streams to leave the connection", func() bool { return streamsOpen(cc) == 0 })
			if got := writes.Load() - before; got != tc.wantWrites {
				t.Errorf("%d writes to end the stream, want %d", got, tc.wantWrites)
			}
			_, err := st.Recv()
			wantCode(t, "Recv after the end", err, codes.Canceled)
			if tc.closeReset {
				cancel() // nothing left to reset
			}
			next := openProcess(t, withMode(t.Context(), "size"), cc)
			if err := next.Send(bodyRequest([]byte("3"))); err != nil {
				t.Fatal(err)
			}
			resp, err := next.Recv()
			if err != nil || len(resp.GetImmediateResponse().GetBody()) != 3 {
				t.Fatalf("next stream: %v, %d bytes", err, len(resp.GetImmediateResponse().GetBody()))
			}
			if srv.ln.count() != 1 {
				t.Errorf("%d connections, want 1", srv.ln.count())
			}
		})
	}
}
