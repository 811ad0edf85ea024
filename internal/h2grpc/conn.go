package h2grpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// Peer settings before its SETTINGS frame (RFC 9113 §6.5.2).
	initialMaxFrame = 16384
	// maxStreamsPerConn is Envoy's DEFAULT_MAX_STREAMS: a connection that
	// has used this many stream ids drains
	// (source/common/http/http2/conn_pool.cc).
	maxStreamsPerConn = 1 << 29
	ioBufferSize      = 64 << 10
	// maxResponseHeaderList bounds a response's header (or trailer) list:
	// Envoy's default max_response_headers_kb, 60 KiB
	// (api/envoy/config/core/v3/protocol.proto HttpProtocolOptions; the
	// HTTP/2 ClientConnectionImpl takes it), counted here as HPACK's
	// field size, name and value plus 32 (RFC 9113 §6.5.2) [verify].
	maxResponseHeaderList = 60 << 10
)

// conn is one HTTP/2 connection of the pool. Lock order: ClientConn.mu,
// wmu, mu, stream.mu.
type conn struct {
	cc        *ClientConn
	log       *slog.Logger
	ready     chan struct{} // closed once connected, or failed
	readyOnce sync.Once
	xff       string // x-forwarded-for: the local address

	wmu  sync.Mutex // serializes writes; guards the writing side below
	bw   *bufio.Writer
	wfr  *http2.Framer
	henc *hpack.Encoder
	hbuf bytes.Buffer
	dhdr [9]byte // DATA frame header scratch

	mu         sync.Mutex
	nc         net.Conn
	err        error // set once the connection is dead
	draining   bool  // GOAWAY received, or stream ids used up
	active     int   // streams reserved or open
	streams    map[uint32]*stream
	nextID     uint32
	maxStreams uint32 // the server's SETTINGS_MAX_CONCURRENT_STREAMS
	maxFrame   int    // the server's SETTINGS_MAX_FRAME_SIZE
	peerWindow int64  // the server's SETTINGS_INITIAL_WINDOW_SIZE
	sendWindow int64  // connection send window
	windowCh   chan struct{}

	// Reader goroutine only.
	rfr     *http2.Framer
	unacked uint32 // connection bytes received, not yet in a WINDOW_UPDATE
	scratch []*[]byte

	ka *Pinger // nil without keepalive
}

func newConn(cc *ClientConn) *conn {
	c := &conn{
		cc: cc, log: cc.log, ready: make(chan struct{}),
		streams: map[uint32]*stream{}, nextID: 1, maxStreams: ^uint32(0),
		maxFrame: initialMaxFrame, peerWindow: defaultWindow, sendWindow: defaultWindow,
	}
	c.ka = NewPinger(cc.opts.Keepalive, c.sendPing, c.onKeepaliveTimeout)
	return c
}

// connect dials, sends the preface and settings, and runs the reader.
func (c *conn) connect() {
	o := &c.cc.opts
	ctx, cancel := context.WithTimeout(context.Background(), o.ConnectTimeout)
	nc, err := o.Dial(ctx, o.Target)
	cancel()
	if err != nil {
		c.fail(connectError(err))
		return
	}
	c.mu.Lock()
	if c.err != nil { // the pool closed meanwhile
		c.mu.Unlock()
		_ = nc.Close()
		return
	}
	c.nc = nc
	c.mu.Unlock()
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		c.xff = a.IP.String()
	}
	c.bw = bufio.NewWriterSize(nc, ioBufferSize)
	c.wfr = http2.NewFramer(c.bw, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.wmu.Lock()
	_, _ = c.bw.WriteString(http2.ClientPreface)
	// Push off, as Envoy's client codec [inferred]; the stream window
	// announced, the connection window raised by a WINDOW_UPDATE.
	_ = c.wfr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: o.StreamWindow})
	if o.ConnWindow > defaultWindow {
		_ = c.wfr.WriteWindowUpdate(0, o.ConnWindow-defaultWindow)
	}
	err = c.bw.Flush()
	c.wmu.Unlock()
	if err != nil {
		c.fail(status.Errorf(codes.Unavailable, "connect to %s: %v", o.Target, err))
		return
	}
	c.rfr = http2.NewFramer(nil, bufio.NewReaderSize(nc, ioBufferSize))
	c.rfr.SetReuseFrames()
	c.rfr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.rfr.MaxHeaderListSize = maxResponseHeaderList
	c.ka.Start()
	c.log.Debug("h2grpc connection open", "local", nc.LocalAddr().String())
	c.readyOnce.Do(func() { close(c.ready) })
	c.readLoop()
}

// tryReserve takes a stream slot if the connection can take a stream.
func (c *conn) tryReserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.draining || uint32(c.active) >= c.maxStreams {
		return false
	}
	c.active++
	return true
}

// release gives back a slot reserved for a stream that never started.
func (c *conn) release() {
	c.mu.Lock()
	c.active--
	idle := c.idleLocked()
	c.mu.Unlock()
	if idle {
		c.closeDrained()
	}
}

// idleLocked reports whether a draining connection has no streams left.
func (c *conn) idleLocked() bool { return c.draining && c.active == 0 && c.err == nil }

// closeDrained closes a drained connection: no stream sees the error.
func (c *conn) closeDrained() {
	c.fail(status.Error(codes.Unavailable, "connection drained"))
}

// start opens s on the connection (its slot reserved): the HEADERS frame
// is written, not flushed; the stream's first message or receive flushes
// it. retry means the connection began draining and s should go on
// another.
func (c *conn) start(s *stream) (retry bool, err error) {
	c.wmu.Lock()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.wmu.Unlock()
		return false, c.err
	}
	if c.draining {
		c.active--
		idle := c.idleLocked()
		c.mu.Unlock()
		c.wmu.Unlock()
		if idle {
			c.closeDrained()
		}
		return true, nil
	}
	s.c, s.id = c, c.nextID
	c.nextID += 2
	s.sendWindow = c.peerWindow
	c.streams[s.id] = s
	maxFrame := c.maxFrame
	used := c.nextID/2 >= maxStreamsPerConn
	if used {
		c.draining = true
	}
	c.mu.Unlock()
	err = c.writeHeaders(s, maxFrame)
	if err == nil {
		s.needFlush.Store(true)
	}
	// ClientConn.mu comes before wmu in the lock order: the pool is
	// updated and the stream closed only once wmu is released.
	c.wmu.Unlock()
	if used {
		c.cc.remove(c)
	}
	if err != nil {
		err = status.Errorf(codes.Unavailable, "write headers: %v", err)
		c.closeStream(s, err, false, false, 0)
		return false, err
	}
	s.watchContext()
	return false, nil
}

// writeHeaders writes the request headers of s; wmu is held.
func (c *conn) writeHeaders(s *stream, maxFrame int) error {
	c.hbuf.Reset()
	c.encodeHeaders(s)
	block := c.hbuf.Bytes()
	first := true
	for first || len(block) > 0 {
		k := min(len(block), maxFrame)
		var err error
		if first {
			err = c.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, BlockFragment: block[:k], EndHeaders: k == len(block)})
		} else {
			err = c.wfr.WriteContinuation(s.id, k == len(block), block[:k])
		}
		if err != nil {
			return err
		}
		first, block = false, block[k:]
	}
	return nil
}

// writeData writes n bytes of s.parts as DATA frames of at most maxFrame
// bytes, the last with END_STREAM if end; wmu is held.
func (c *conn) writeData(s *stream, n int, end bool, maxFrame int) {
	for first := true; first || n > 0; first = false {
		k := min(n, maxFrame)
		h := &c.dhdr
		h[0], h[1], h[2] = byte(k>>16), byte(k>>8), byte(k)
		h[3], h[4] = byte(http2.FrameData), 0
		if end && k == n {
			h[4] = byte(http2.FlagDataEndStream)
		}
		binary.BigEndian.PutUint32(h[5:], s.id)
		_, _ = c.bw.Write(h[:])
		n -= k
		for k > 0 {
			p := s.parts[0]
			m := min(len(p), k)
			_, _ = c.bw.Write(p[:m])
			if m == len(p) {
				s.parts = s.parts[1:]
			} else {
				s.parts[0] = p[m:]
			}
			k -= m
		}
	}
}

// flush flushes what is buffered; a failure breaks the connection.
func (c *conn) flush() error {
	c.wmu.Lock()
	err := c.bw.Flush()
	c.wmu.Unlock()
	if err != nil {
		err = status.Errorf(codes.Unavailable, "write to %s: %v", c.cc.opts.Target, err)
		c.fail(err)
	}
	return err
}

// writeControl writes one control frame and flushes.
func (c *conn) writeControl(write func(*http2.Framer) error) {
	c.wmu.Lock()
	err := write(c.wfr)
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(status.Errorf(codes.Unavailable, "write to %s: %v", c.cc.opts.Target, err))
	}
}

// waiterLocked returns a channel closed when send windows may have grown
// or a stream ended; mu is held.
func (c *conn) waiterLocked() chan struct{} {
	if c.windowCh == nil {
		c.windowCh = make(chan struct{})
	}
	return c.windowCh
}

func (c *conn) broadcastLocked() {
	if c.windowCh != nil {
		close(c.windowCh)
		c.windowCh = nil
	}
}

// closeStream ends s: it leaves the connection, its slot is freed, and its
// receiver gets err (a status error, or errDone for OK) — after the
// messages already received if keep. rst sends RST_STREAM with code.
func (c *conn) closeStream(s *stream, err error, keep, rst bool, code http2.ErrCode) {
	c.mu.Lock()
	if s.closed {
		c.mu.Unlock()
		return
	}
	s.closed = true
	if c.err == nil {
		delete(c.streams, s.id)
		c.active--
	}
	c.broadcastLocked()
	idle := c.idleLocked()
	c.mu.Unlock()
	s.finish(err, keep)
	if rst {
		c.writeControl(func(fr *http2.Framer) error { return fr.WriteRSTStream(s.id, code) })
	}
	if idle {
		c.closeDrained()
	}
}

// fail closes the connection: every stream on it fails with err, after the
// messages it already received (Envoy's client has handed those to its
// callbacks as they arrived, AsyncStreamImpl::onData, before any reset).
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	streams := c.streams
	c.streams = nil
	for _, s := range streams {
		s.closed = true
	}
	c.broadcastLocked()
	nc := c.nc
	c.mu.Unlock()
	c.cc.remove(c)
	c.ka.Stop()
	if nc != nil {
		_ = nc.Close()
	}
	c.readyOnce.Do(func() { close(c.ready) })
	for _, s := range streams {
		s.finish(err, true)
	}
	c.log.Debug("h2grpc connection closed", "error", err)
}

// readLoop reads and dispatches frames until the connection fails.
func (c *conn) readLoop() {
	for {
		f, err := c.rfr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.streamError(se.StreamID, status.Errorf(codes.Internal, "stream error: %v", se), se.Code)
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				c.connError(ce, err.Error())
				return
			}
			c.fail(status.Errorf(codes.Unavailable, "error reading from server: %v", err))
			return
		}
		if p, ok := f.(*http2.PingFrame); !ok || !p.IsAck() {
			c.ka.Frame()
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			c.onData(f)
		case *http2.MetaHeadersFrame:
			c.onHeaders(f)
		case *http2.RSTStreamFrame:
			c.onRST(f)
		case *http2.SettingsFrame:
			c.onSettings(f)
		case *http2.PingFrame:
			if f.IsAck() {
				c.ka.Ack(f.Data[:])
			} else {
				c.writeControl(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			c.onGoAway(f)
		case *http2.WindowUpdateFrame:
			c.onWindowUpdate(f)
		case *http2.PushPromiseFrame:
			// A connection error with push disabled (RFC 9113 §8.4).
			c.connError(http2.ConnectionError(http2.ErrCodeProtocol), "PUSH_PROMISE with push disabled")
			return
		}
	}
}

// lookup returns the open stream id, or nil and whether id is idle: never
// opened by the client (an id not yet used, or an even one, with push
// disabled). A frame on a closed stream is ignored; most frames on an idle
// one are a connection error PROTOCOL_ERROR (RFC 9113 §5.1, §6.4, §6.9).
func (c *conn) lookup(id uint32) (s *stream, idle bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id], c.unopenedLocked(id)
}

func (c *conn) unopenedLocked(id uint32) bool { return id%2 == 0 || id >= c.nextID }

// idleFrame fails the connection for a frame on an idle stream.
func (c *conn) idleFrame(f http2.Frame) {
	c.connError(http2.ConnectionError(http2.ErrCodeProtocol), fmt.Sprintf("%v frame on idle stream %d", f.Header().Type, f.Header().StreamID))
}

// streamError fails stream id with err (a reset by the server when code is
// 0, else a reset sent with code).
func (c *conn) streamError(id uint32, err error, code http2.ErrCode) {
	if s, _ := c.lookup(id); s != nil {
		c.closeStream(s, err, true, code != 0, code)
	}
}

// onRST fails a stream the server reset, after the messages it already
// received (as fail). A CANCEL once the stream's
// deadline has passed is taken as the deadline's, as grpc-go does (the
// server enforces the grpc-timeout sent).
func (c *conn) onRST(f *http2.RSTStreamFrame) {
	s, idle := c.lookup(f.StreamID)
	if s == nil {
		if idle {
			c.idleFrame(f)
		}
		return
	}
	code := rstCode(f.ErrCode)
	if d, ok := s.ctx.Deadline(); ok && code == codes.Canceled && !d.After(time.Now()) {
		code = codes.DeadlineExceeded
	}
	c.closeStream(s, status.Errorf(code, "stream terminated by RST_STREAM with error code: %v", f.ErrCode), true, false, 0)
}

// rstCode maps an RST_STREAM error code to a gRPC code as grpc-go does
// (internal/transport/http_util.go http2ErrConvTab).
func rstCode(e http2.ErrCode) codes.Code {
	switch e {
	case http2.ErrCodeFlowControl, http2.ErrCodeEnhanceYourCalm:
		return codes.ResourceExhausted
	case http2.ErrCodeRefusedStream:
		return codes.Unavailable
	case http2.ErrCodeCancel:
		return codes.Canceled
	case http2.ErrCodeInadequateSecurity:
		return codes.PermissionDenied
	}
	return codes.Internal
}

// onData feeds a DATA frame to its stream's assembler and returns the
// received bytes to the windows once half a window is used (nghttp2's
// nghttp2_should_send_window_update and oghttp2's WindowManager default:
// an update when at least half the window is consumed [inferred]).
func (c *conn) onData(f *http2.DataFrame) {
	n := f.Header().Length
	o := &c.cc.opts
	var connInc, streamInc uint32
	c.unacked += n
	if c.unacked >= o.ConnWindow/2 {
		connInc, c.unacked = c.unacked, 0
	}
	s, idle := c.lookup(f.StreamID)
	if s != nil && !f.StreamEnded() {
		s.unacked += n
		if s.unacked >= o.StreamWindow/2 {
			streamInc, s.unacked = s.unacked, 0
		}
	}
	if connInc > 0 || streamInc > 0 {
		c.writeControl(func(fr *http2.Framer) error {
			if connInc > 0 {
				if err := fr.WriteWindowUpdate(0, connInc); err != nil {
					return err
				}
			}
			if streamInc > 0 {
				return fr.WriteWindowUpdate(f.StreamID, streamInc)
			}
			return nil
		})
	}
	if s == nil {
		if idle {
			c.idleFrame(f)
		}
		return
	}
	if !s.gotHeaders {
		// A response is HEADERS, then DATA: DATA first is a malformed
		// response, a stream error of type PROTOCOL_ERROR (RFC 9113
		// §8.1, §8.1.1).
		c.closeStream(s, status.Error(codes.Internal, "protocol error: DATA before the response HEADERS"), false, true, http2.ErrCodeProtocol)
		return
	}
	msgs, err := s.asm.feed(f.Data(), c.scratch[:0])
	if len(msgs) > 0 {
		s.push(msgs)
		clear(msgs)
		c.scratch = msgs[:0]
	}
	switch {
	case err != nil:
		// Envoy's client resets the stream (AsyncStreamImpl::streamError).
		s.asm.release()
		c.closeStream(s, err, true, true, http2.ErrCodeCancel)
	case f.StreamEnded():
		// DATA with END_STREAM, no trailers: onData's streamError(Unknown).
		s.asm.release()
		c.remoteEnd(s, status.Error(codes.Unknown, "server closed the stream without sending trailers"))
	}
}

// remoteEnd ends s after the server's END_STREAM: the messages received
// stay readable. Envoy's client then resets a stream it has not closed
// itself (AsyncStreamImpl::cleanup); the code is NO_ERROR [inferred].
func (c *conn) remoteEnd(s *stream, err error) {
	c.mu.Lock()
	open := !s.localEnded
	c.mu.Unlock()
	c.closeStream(s, err, true, open, http2.ErrCodeNo)
}

// onHeaders handles response headers and trailers
// (AsyncStreamImpl::onHeaders and onTrailers).
func (c *conn) onHeaders(f *http2.MetaHeadersFrame) {
	s, idle := c.lookup(f.StreamID)
	if s == nil {
		if idle {
			c.idleFrame(f)
		}
		return
	}
	if f.Truncated {
		// Fields past the limit were dropped (grpc-status may be one):
		// the stream is reset and fails. Envoy answers such a response
		// with a 503 ("Responses that exceed this limit will result in a
		// HTTP 503 response", protocol.proto max_response_headers_kb),
		// which its gRPC client sees as Unavailable [inferred]; the
		// RST_STREAM code is grpc-go's [verify].
		c.closeStream(s, status.Errorf(codes.Unavailable, "response header list larger than max_response_headers_kb (%d bytes)", maxResponseHeaderList), true, true, http2.ErrCodeProtocol)
		return
	}
	if !s.gotHeaders {
		s.gotHeaders = true
		code := f.PseudoValue("status")
		if !f.StreamEnded() {
			if code != "200" {
				c.closeStream(s, httpStatusError(code), false, true, http2.ErrCodeCancel)
				return
			}
			s.setHeader(f.RegularFields())
			return
		}
		// Trailers-Only: a non-200 without grpc-status is an HTTP error.
		if code != "200" && !hasField(f, "grpc-status") {
			c.remoteEnd(s, httpStatusError(code))
			return
		}
	} else if !f.StreamEnded() {
		c.closeStream(s, status.Error(codes.Internal, "trailers without END_STREAM"), true, true, http2.ErrCodeProtocol)
		return
	}
	s.asm.release()
	err := trailerStatus(f)
	s.setTrailer(f.RegularFields())
	c.remoteEnd(s, err)
}

func (c *conn) onSettings(f *http2.SettingsFrame) {
	if f.IsAck() {
		return
	}
	// Out-of-range values are connection errors (RFC 9113 §6.5.2): a
	// SETTINGS_MAX_FRAME_SIZE below 16384 (or 0) would otherwise stall
	// every DATA write.
	if err := f.ForeachSetting(http2.Setting.Valid); err != nil {
		c.connError(err.(http2.ConnectionError), fmt.Sprintf("invalid SETTINGS: %v", err))
		return
	}
	c.wmu.Lock()
	c.mu.Lock()
	var overflow bool
	_ = f.ForeachSetting(func(st http2.Setting) error {
		switch st.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(st.Val) - c.peerWindow
			c.peerWindow = int64(st.Val)
			for _, s := range c.streams {
				s.sendWindow += delta
				// A change that takes a window above 2^31-1 is a
				// connection error FLOW_CONTROL_ERROR (RFC 9113
				// §6.9.2); a window may go negative.
				overflow = overflow || s.sendWindow > maxWindow
			}
		case http2.SettingMaxFrameSize:
			c.maxFrame = int(st.Val)
		case http2.SettingMaxConcurrentStreams:
			// Envoy's pool follows the server's limit both ways
			// (http2/conn_pool.cc ActiveClient, SETTINGS received).
			c.maxStreams = st.Val
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(st.Val)
		}
		return nil
	})
	c.broadcastLocked()
	c.mu.Unlock()
	if overflow {
		c.wmu.Unlock()
		c.connError(http2.ConnectionError(http2.ErrCodeFlowControl), "SETTINGS_INITIAL_WINDOW_SIZE takes a stream window above 2^31-1")
		return
	}
	err := c.wfr.WriteSettingsAck()
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(status.Errorf(codes.Unavailable, "write to %s: %v", c.cc.opts.Target, err))
	}
}

// onGoAway drains the connection: streams the server will not process fail
// with Unavailable, the others finish, and new streams go on a new
// connection (conn_pool_base.cc: a draining client takes no streams and
// closes once idle; MultiplexedActiveClientBase::onGoAway).
func (c *conn) onGoAway(f *http2.GoAwayFrame) {
	c.log.Debug("h2grpc GOAWAY received", "last_stream_id", f.LastStreamID, "code", f.ErrCode, "debug", string(f.DebugData()))
	c.mu.Lock()
	c.draining = true
	var refused []*stream
	for id, s := range c.streams {
		if id > f.LastStreamID {
			refused = append(refused, s)
		}
	}
	idle := c.idleLocked()
	c.mu.Unlock()
	c.cc.remove(c)
	for _, s := range refused {
		c.closeStream(s, status.Errorf(codes.Unavailable, "the connection is draining due to a GOAWAY (%v, %q); the stream was not processed", f.ErrCode, f.DebugData()), false, false, 0)
	}
	if idle {
		c.closeDrained()
	}
}

// onWindowUpdate grows a send window. One taken above 2^31-1 is a
// FLOW_CONTROL_ERROR: of the connection for its window, of the stream for
// a stream's (RFC 9113 §6.9.1).
func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) {
	c.mu.Lock()
	inc := int64(f.Increment)
	var s *stream
	if f.StreamID == 0 {
		if c.sendWindow+inc > maxWindow {
			c.mu.Unlock()
			c.connError(http2.ConnectionError(http2.ErrCodeFlowControl), "WINDOW_UPDATE takes the connection window above 2^31-1")
			return
		}
		c.sendWindow += inc
	} else if s = c.streams[f.StreamID]; s == nil {
		idle := c.unopenedLocked(f.StreamID)
		c.mu.Unlock()
		if idle {
			c.idleFrame(f)
		}
		return
	} else if s.sendWindow+inc > maxWindow {
		c.mu.Unlock()
		c.closeStream(s, status.Error(codes.Internal, "stream error: WINDOW_UPDATE takes the stream window above 2^31-1"), true, true, http2.ErrCodeFlowControl)
		return
	} else {
		s.sendWindow += inc
	}
	c.broadcastLocked()
	c.mu.Unlock()
}

// connError ends the connection on a connection error (RFC 9113 §5.4.1):
// GOAWAY with the error's code, then every stream fails with Unavailable.
// No lock may be held.
func (c *conn) connError(code http2.ConnectionError, reason string) {
	c.writeControl(func(fr *http2.Framer) error {
		return fr.WriteGoAway(0, http2.ErrCode(code), []byte(reason))
	})
	c.fail(status.Errorf(codes.Unavailable, "connection error %v: %s", http2.ErrCode(code), reason))
}

// sendPing writes the keepalive PING that is due (Pinger).
func (c *conn) sendPing() {
	if p, ok := c.ka.Sending(); ok {
		c.writeControl(func(fr *http2.Framer) error { return fr.WritePing(false, p) })
	}
}

// onKeepaliveTimeout is onKeepaliveResponseTimeout: close the connection.
func (c *conn) onKeepaliveTimeout() {
	c.log.Debug("closing connection due to keepalive timeout", "timeout", c.cc.opts.Keepalive.Timeout)
	c.fail(status.Errorf(codes.Unavailable, "keepalive timeout: no PING ACK within %s", c.cc.opts.Keepalive.Timeout))
}

// httpStatusError maps a non-200 :status as Envoy's
// Grpc::Utility::httpToGrpcStatus and grpc-go both do.
func httpStatusError(code string) error {
	c := codes.Unknown
	switch code {
	case "400":
		c = codes.Internal
	case "401":
		c = codes.Unauthenticated
	case "403":
		c = codes.PermissionDenied
	case "404":
		c = codes.Unimplemented
	case "429", "502", "503", "504":
		c = codes.Unavailable
	}
	return status.Error(c, fmt.Sprintf("unexpected HTTP status code received from server: %s", code))
}

// connectError is the status of a stream whose connection could not be
// opened. Envoy's router answers the gRPC request with a local reply, 503
// (grpc-status 14, Unavailable) with its upstream failure text as
// grpc-message, and the gRPC client appends the response code details
// (source/common/router/router.cc onUpstreamReset;
// source/common/grpc/async_client_impl.cc enhancedGrpcMessage) [inferred];
// the wording follows the data plane's router (envoy/router.go).
func connectError(err error) error {
	reason, why := "remote connection failure", "delayed connect error: "+err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		reason, why = "connection timeout", ""
	}
	msg := "upstream connect error or disconnect/reset before headers. reset reason: " + reason
	details := "upstream_reset_before_response_started{" + strings.ReplaceAll(reason, " ", "_")
	if why != "" {
		msg += ", transport failure reason: " + why
		details += "|" + strings.ReplaceAll(why, " ", "_")
	}
	return status.Error(codes.Unavailable, msg+"{"+details+"}}")
}
