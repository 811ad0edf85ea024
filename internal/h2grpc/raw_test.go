package h2grpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// rawH2Server serves one HTTP/2 connection at a time with x/net/http2,
// calling respond for each request HEADERS the client sends (stream ids in
// order), for what no well-behaved grpc-go server does.
type rawH2Server struct {
	addr    string
	mu      sync.Mutex // serializes writes
	fr      *http2.Framer
	enc     *hpack.Encoder
	buf     bytes.Buffer
	accepts int
	nc      net.Conn // the latest connection
	// frames receives the RST_STREAM and GOAWAY frames the client sends,
	// as "RST_STREAM <id> <code>" and "GOAWAY <code>".
	frames chan string
}

func startRawH2(t *testing.T, respond func(s *rawH2Server, id uint32, n int)) *rawH2Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	s := &rawH2Server{addr: ln.Addr().String(), frames: make(chan string, 64)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.accepts++
			s.mu.Unlock()
			go s.serve(c, respond)
		}
	}()
	return s
}

func (s *rawH2Server) serve(c net.Conn, respond func(*rawH2Server, uint32, int)) {
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	s.mu.Lock()
	s.fr, s.enc, s.nc = fr, hpack.NewEncoder(&s.buf), c // the latest connection's
	_ = fr.WriteSettings()
	s.mu.Unlock()
	n := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				s.mu.Lock()
				_ = fr.WriteSettingsAck()
				s.mu.Unlock()
			}
		case *http2.MetaHeadersFrame:
			n++
			respond(s, f.StreamID, n)
		case *http2.RSTStreamFrame:
			s.record(fmt.Sprintf("RST_STREAM %d %v", f.StreamID, f.ErrCode))
		case *http2.GoAwayFrame:
			s.record(fmt.Sprintf("GOAWAY %v", f.ErrCode))
		}
	}
}

func (s *rawH2Server) record(frame string) {
	select {
	case s.frames <- frame:
	default: // a test that does not look at frames
	}
}

// awaitFrame waits (bounded) for the client to send frame.
func (s *rawH2Server) awaitFrame(t *testing.T, frame string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f := <-s.frames:
			if f == frame {
				return
			}
		case <-timeout:
			t.Fatalf("the client sent no %s", frame)
		}
	}
}

// headers writes a HEADERS frame of name, value pairs.
func (s *rawH2Server) headers(id uint32, end bool, kv ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	for i := 0; i < len(kv); i += 2 {
		_ = s.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	_ = s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: s.buf.Bytes(), EndStream: end, EndHeaders: true})
}

func (s *rawH2Server) write(f func(fr *http2.Framer) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = f(s.fr)
}

// grpcMessage is a length-prefixed message with the given flag.
func grpcMessage(flag byte, body string) []byte {
	return append([]byte{flag, 0, 0, 0, byte(len(body))}, body...)
}

// TestServerResponses: how each server answer ends the stream, as Envoy's
// client (AsyncStreamImpl) or grpc-go decide.
func TestServerResponses(t *testing.T) {
	ok200 := []string{":status", "200", "content-type", "application/grpc"}
	for _, tc := range []struct {
		name    string
		respond func(s *rawH2Server, id uint32)
		want    codes.Code
		msg     string
		msgs    int // messages received before the end
	}{
		{"RST_STREAM REFUSED_STREAM", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
		}, codes.Unavailable, "", 0},
		{"RST_STREAM CANCEL", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) })
		}, codes.Canceled, "", 0},
		{"RST_STREAM ENHANCE_YOUR_CALM", func(s *rawH2Server, id uint32) {
			s.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeEnhanceYourCalm) })
		}, codes.ResourceExhausted, "", 0},
		{"503 without grpc-status", func(s *rawH2Server, id uint32) {
			s.headers(id, true, ":status", "503")
		}, codes.Unavailable, "", 0},
		{"404 headers then nothing", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ":status", "404")
		}, codes.Unimplemented, "", 0},
		{"Trailers-Only with grpc-status", func(s *rawH2Server, id uint32) {
			s.headers(id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "5", "grpc-message", "no %E2%9C%93 here%")
		}, codes.NotFound, "no ✓ here%", 0},
		{"END_STREAM on DATA without trailers", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ok200...)
			s.write(func(fr *http2.Framer) error { return fr.WriteData(id, true, grpcMessage(0, "")) })
		}, codes.Unknown, "", 1},
		{"trailers without grpc-status", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ok200...)
			s.headers(id, true, "x-other", "1")
		}, codes.Unknown, "", 0},
		{"compressed flag", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ok200...)
			s.write(func(fr *http2.Framer) error { return fr.WriteData(id, false, grpcMessage(1, "zz")) })
		}, codes.Internal, "", 0},
		{"compressed flag on an empty message, then OK", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ok200...)
			s.write(func(fr *http2.Framer) error { return fr.WriteData(id, false, grpcMessage(1, "")) })
			s.headers(id, true, "grpc-status", "0")
		}, codes.OK, "", 1},
		{"unsupported flag bits", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ok200...)
			s.write(func(fr *http2.Framer) error { return fr.WriteData(id, false, grpcMessage(2, "")) })
		}, codes.Internal, "", 0},
		{"message split over frames, then OK", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ok200...)
			m := append(grpcMessage(0, ""), grpcMessage(0, "")...)
			for _, b := range m {
				s.write(func(fr *http2.Framer) error { return fr.WriteData(id, false, []byte{b}) })
			}
			s.headers(id, true, "grpc-status", "0")
		}, codes.OK, "", 2},
		{"GOAWAY below the stream", func(s *rawH2Server, id uint32) {
			s.headers(id, false, ok200...)
			s.write(func(fr *http2.Framer) error { return fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
		}, codes.Unavailable, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRawH2(t, func(s *rawH2Server, id uint32, _ int) { tc.respond(s, id) })
			cc := newTestClient(t, Options{Target: srv.addr})
			// Bounded: a stream the client fails to end fails the test.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := cc.NewStream(ctx, nil, "/test.Service/Method")
			if err != nil {
				t.Fatal(err)
			}
			var got int
			for {
				var m rawMessage
				err = st.RecvMsg(&m)
				if err != nil {
					break
				}
				got++
			}
			if tc.want == codes.OK {
				if err != io.EOF {
					t.Fatalf("end %v, want io.EOF", err)
				}
			} else {
				wantCode(t, "end", err, tc.want)
				if tc.msg != "" && status.Convert(err).Message() != tc.msg {
					t.Errorf("message %q, want %q", status.Convert(err).Message(), tc.msg)
				}
			}
			if got != tc.msgs {
				t.Errorf("%d messages before the end, want %d", got, tc.msgs)
			}
			if n := streamsOpen(cc); n != 0 {
				t.Errorf("%d streams left open", n)
			}
		})
	}
}

// TestGoAwayRefusesLaterStreams: of two streams open when the server
// sends GOAWAY with the first's id, the second fails with Unavailable, the
// first finishes on the draining connection, and the next stream opens a
// new connection.
func TestGoAwayRefusesLaterStreams(t *testing.T) {
	srv := startRawH2(t, func(s *rawH2Server, id uint32, n int) {
		if n == 2 { // the second stream of the first connection
			s.write(func(fr *http2.Framer) error { return fr.WriteGoAway(id-2, http2.ErrCodeNo, nil) })
			s.headers(id-2, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "0")
		}
		if n == 1 && s.accepts == 2 {
			s.headers(id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "0")
		}
	})
	cc := newTestClient(t, Options{Target: srv.addr})
	open := func() (err error) {
		st, err := cc.NewStream(t.Context(), nil, "/test.Service/Method")
		if err != nil {
			return err
		}
		return st.RecvMsg(&rawMessage{})
	}
	first := make(chan error, 1)
	s1, err := cc.NewStream(t.Context(), nil, "/test.Service/Method")
	if err != nil {
		t.Fatal(err)
	}
	go func() { first <- s1.RecvMsg(&rawMessage{}) }()
	wantCode(t, "stream above last_stream_id", open(), codes.Unavailable)
	if err := <-first; err != io.EOF {
		t.Fatalf("stream below last_stream_id: %v, want it finished (io.EOF)", err)
	}
	if err := open(); err != io.EOF {
		t.Fatalf("stream after the GOAWAY: %v", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.accepts != 2 {
		t.Errorf("%d connections, want 2", srv.accepts)
	}
}

// rawMessage is what the default proto codec decodes into: the test
// messages are empty.
type rawMessage = emptypb.Empty
