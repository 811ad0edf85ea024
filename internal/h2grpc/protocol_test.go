package h2grpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// TestProtocolErrors: a server frame that breaks RFC 9113 ends the stream
// (RST_STREAM, the connection stays usable) or the connection (GOAWAY,
// the next stream connects again) as the RFC says.
func TestProtocolErrors(t *testing.T) {
	ok200 := []string{":status", "200", "content-type", "application/grpc"}
	for _, tc := range []struct {
		name    string
		respond func(s *rawH2Server, id uint32)
		want    codes.Code
		frame   string // what the client sends; %d is the stream id
		sameCon bool   // a stream error: the connection is kept
	}{
		{"SETTINGS_MAX_FRAME_SIZE below 16384", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error {
				return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1000})
			})
		}, codes.Unavailable, "GOAWAY PROTOCOL_ERROR", false},
		{"connection WINDOW_UPDATE above 2^31-1", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, maxWindow) })
		}, codes.Unavailable, "GOAWAY FLOW_CONTROL_ERROR", false},
		{"stream WINDOW_UPDATE above 2^31-1", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ok200...)
			s.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(id, maxWindow) })
		}, codes.Internal, "RST_STREAM %d FLOW_CONTROL_ERROR", true},
		{"SETTINGS_INITIAL_WINDOW_SIZE takes a stream window above 2^31-1", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(id, maxWindow-defaultWindow) })
			s.write(func(fr *http2.Framer) error {
				return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: defaultWindow + 1})
			})
		}, codes.Unavailable, "GOAWAY FLOW_CONTROL_ERROR", false},
		{"DATA before HEADERS", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteData(id, false, grpcMessage(0, "")) })
			s.headers(id, true, append(ok200, "grpc-status", "0")...)
		}, codes.Internal, "RST_STREAM %d PROTOCOL_ERROR", true},
		{"PUSH_PROMISE with push disabled", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error {
				return fr.WritePushPromise(http2.PushPromiseParam{StreamID: id, PromiseID: 2, BlockFragment: []byte{0x82}, EndHeaders: true})
			})
		}, codes.Unavailable, "GOAWAY PROTOCOL_ERROR", false},
		{"DATA on an idle stream", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteData(id+2, false, grpcMessage(0, "")) })
		}, codes.Unavailable, "GOAWAY PROTOCOL_ERROR", false},
		{"RST_STREAM on an idle stream", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id+2, http2.ErrCodeCancel) })
		}, codes.Unavailable, "GOAWAY PROTOCOL_ERROR", false},
		{"WINDOW_UPDATE on an even stream", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(2, 1) })
		}, codes.Unavailable, "GOAWAY PROTOCOL_ERROR", false},
		{"HEADERS on an idle stream", func(s *rawH2Server, id uint32) {
			s.headers(id+2, false, ":status", "200")
		}, codes.Unavailable, "GOAWAY PROTOCOL_ERROR", false},
		{"RST_STREAM on a closed stream is ignored", func(s *rawH2Server, id uint32) {
			s.headers(id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "13")
			s.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) })
			s.write(func(fr *http2.Framer) error { return fr.WriteWindowUpdate(id, 1) })
			s.write(func(fr *http2.Framer) error { return fr.WriteData(id, false, grpcMessage(0, "")) })
		}, codes.Internal, "RST_STREAM %d NO_ERROR", true},
		{"response headers over the list limit", func(s *rawH2Server, id uint32) {
			s.bigHeaders(id, append(ok200, "x-big", strings.Repeat("b", maxResponseHeaderList))...)
			s.headers(id, true, "grpc-status", "0")
		}, codes.Unavailable, "RST_STREAM %d PROTOCOL_ERROR", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := startRawH2(t, func(s *rawH2Server, id uint32, _ int) {
				if calls.Add(1) == 1 {
					tc.respond(s, id)
					return
				}
				s.headers(id, true, append(ok200, "grpc-status", "0")...)
			})
			cc := newTestClient(t, Options{Target: srv.addr})
			// Bounded: a stream the client fails to end fails the test.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := cc.NewStream(ctx, nil, "/test.Service/Method")
			if err != nil {
				t.Fatal(err)
			}
			var m rawMessage
			for err == nil {
				err = st.RecvMsg(&m)
			}
			wantCode(t, "end", err, tc.want)
			frame := tc.frame
			if tc.sameCon {
				frame = fmt.Sprintf(frame, 1)
			}
			srv.awaitFrame(t, frame)

			st, err = cc.NewStream(ctx, nil, "/test.Service/Method")
			if err != nil {
				t.Fatal(err)
			}
			if err := st.RecvMsg(&m); err != io.EOF {
				t.Fatalf("next stream: %v, want io.EOF", err)
			}
			srv.mu.Lock()
			accepts := srv.accepts
			srv.mu.Unlock()
			if want := map[bool]int{true: 1, false: 2}[tc.sameCon]; accepts != want {
				t.Errorf("%d connections, want %d", accepts, want)
			}
		})
	}
}

// bigHeaders writes a header block too large for one frame as HEADERS
// and CONTINUATION frames of the default SETTINGS_MAX_FRAME_SIZE.
func (s *rawH2Server) bigHeaders(id uint32, kv ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	for i := 0; i < len(kv); i += 2 {
		_ = s.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	block := s.buf.Bytes()
	for first := true; len(block) > 0; first = false {
		k := min(len(block), initialMaxFrame)
		if first {
			_ = s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:k], EndHeaders: k == len(block)})
		} else {
			_ = s.fr.WriteContinuation(id, k == len(block), block[:k])
		}
		block = block[k:]
	}
}

// TestHeaderWithConcurrentRecv: Header returns once the response headers
// arrive though RecvMsg waits on another goroutine for a message that does
// not come (grpc.ClientStream allows a receiving and another goroutine).
func TestHeaderWithConcurrentRecv(t *testing.T) {
	send := make(chan uint32, 1)
	srv := startRawH2(t, func(s *rawH2Server, id uint32, _ int) { send <- id })
	cc := newTestClient(t, Options{Target: srv.addr})
	for i := range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		st, err := cc.NewStream(ctx, nil, "/test.Service/Method")
		if err != nil {
			t.Fatal(err)
		}
		recv := make(chan error, 1)
		go func() { recv <- st.RecvMsg(&rawMessage{}) }()
		id := <-send // RecvMsg flushed the request headers: it is waiting
		time.Sleep(10 * time.Millisecond)
		hdr := make(chan error, 1)
		go func() {
			md, err := st.Header()
			if err == nil && len(md.Get("x-h")) != 1 {
				err = fmt.Errorf("header metadata %v", md)
			}
			hdr <- err
		}()
		time.Sleep(10 * time.Millisecond) // Header waits too (not asserted)
		srv.headers(id, false, ":status", "200", "content-type", "application/grpc", "x-h", "v")
		select {
		case err := <-hdr:
			if err != nil {
				t.Fatalf("stream %d: Header: %v", i, err)
			}
		case <-time.After(5 * time.Second): // bounded: a hang fails
			t.Fatalf("stream %d: Header did not return once the headers arrived", i)
		}
		cancel()
		wantCode(t, "RecvMsg after cancel", <-recv, codes.Canceled)
	}
}

// TestMessagesBeforeAbnormalEnd: messages received before the server
// resets the stream or the connection is lost stay readable before the
// error, as Envoy's client has handed them on as they arrived.
func TestMessagesBeforeAbnormalEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(s *rawH2Server, id uint32)
		want codes.Code
	}{
		{"RST_STREAM", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeInternal) })
		}, codes.Internal},
		{"connection closed", func(s *rawH2Server, id uint32) {
			s.mu.Lock()
			defer s.mu.Unlock()
			_ = s.nc.Close()
		}, codes.Unavailable},
		{"compressed message after one", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteData(id, false, grpcMessage(1, "zz")) })
		}, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRawH2(t, func(s *rawH2Server, id uint32, _ int) {
				s.headers(id, false, ":status", "200", "content-type", "application/grpc")
				s.write(func(fr *http2.Framer) error { return fr.WriteData(id, false, grpcMessage(0, "")) })
				tc.end(s, id)
			})
			cc := newTestClient(t, Options{Target: srv.addr})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			cs, err := cc.NewStream(ctx, nil, "/test.Service/Method")
			if err != nil {
				t.Fatal(err)
			}
			st := cs.(*stream)
			st.flushHeaders()
			// Bounded wait for the end to be taken before reading.
			for i := 0; ; i++ {
				st.mu.Lock()
				done := st.done
				st.mu.Unlock()
				if done {
					break
				}
				if i == 10000 {
					t.Fatal("the stream did not end")
				}
				time.Sleep(time.Millisecond)
			}
			if err := st.RecvMsg(&rawMessage{}); err != nil {
				t.Fatalf("the message received before the end: %v", err)
			}
			wantCode(t, "end", st.RecvMsg(&rawMessage{}), tc.want)
		})
	}
}

// gatedConn is a client connection whose writes block while gated,
// signalling each write that blocks.
type gatedConn struct {
	net.Conn
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	blocked chan struct{}
}

func (g *gatedConn) close(gate bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gate && g.gate == nil {
		g.gate = make(chan struct{})
	} else if !gate && g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedConn) Write(b []byte) (int, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case g.blocked <- struct{}{}:
		default:
		}
		<-gate
	}
	return g.Conn.Write(b)
}

// TestCancelWithWriterBlocked: a stream's RecvMsg returns once its context
// is cancelled though another goroutine is stuck writing to the connection
// (the server not reading): the RST_STREAM waits for the writer, the
// caller does not.
func TestCancelWithWriterBlocked(t *testing.T) {
	srv := startRawH2(t, func(s *rawH2Server, id uint32, _ int) {
		s.headers(id, false, ":status", "200", "content-type", "application/grpc")
	})
	for i := range 20 {
		var gc *gatedConn
		cc := newTestClient(t, Options{Target: srv.addr, Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			gc = &gatedConn{Conn: c, blocked: make(chan struct{}, 1)}
			return gc, nil
		}})
		ctx, cancel := context.WithCancel(t.Context())
		st, err := cc.NewStream(ctx, nil, "/test.Service/Method")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Header(); err != nil { // connected, headers flushed
			t.Fatal(err)
		}
		recv := make(chan error, 1)
		go func() { recv <- st.RecvMsg(&rawMessage{}) }()
		gc.close(true)
		sent := make(chan error, 1)
		go func() { sent <- st.SendMsg(&rawMessage{}) }()
		<-gc.blocked // SendMsg holds the connection's writer
		cancel()
		select {
		case err := <-recv:
			wantCode(t, "RecvMsg", err, codes.Canceled)
		case <-time.After(5 * time.Second): // bounded: a hang fails
			gc.close(false)
			t.Fatalf("attempt %d: RecvMsg did not return after cancel while a write was blocked", i)
		}
		gc.close(false)
		<-sent
		_ = cc.Close()
	}
}
