package envoy

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/toolmesh/toolmesh/internal/h2grpc"
)

// Keepalive is the HTTP/2 connection keepalive of the data plane's gRPC
// connections (ADS and ext_proc), as Envoy's
// Http2ProtocolOptions.connection_keepalive on the toolmesh_xds and
// toolmesh_extproc clusters of the bootstraps. The zero value is what the
// bootstraps set (keepaliveDefaults); a negative Interval sends no PINGs,
// a negative IntervalJitter means none. rules.go describes the behaviour.
type Keepalive = h2grpc.Keepalive

// keepaliveDefaults fills the zero fields.
func keepaliveDefaults(k Keepalive) Keepalive {
	if k.Interval == 0 {
		k.Interval = defaultKeepaliveInterval
	}
	if k.Timeout <= 0 {
		k.Timeout = defaultKeepaliveTimeout
	}
	switch {
	case k.IntervalJitter == 0:
		k.IntervalJitter = defaultKeepaliveJitterPercent
	case k.IntervalJitter < 0:
		k.IntervalJitter = 0
	}
	return k
}

// keepaliveDialOption makes the connections of a grpc-go client send
// Envoy's keepalive PINGs; the data plane's ADS client uses it (the
// ext_proc client, h2grpc, sends them itself).
func keepaliveDialOption(k Keepalive, log *slog.Logger) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil || k.Interval < 0 {
			return c, err
		}
		return newPingConn(c, k, log.With("peer", addr)), nil
	})
}

// HTTP/2 framing (RFC 9113 §3.4, §4.1, §6.7).
const (
	clientPrefaceLen = 24 // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	frameHeaderLen   = 9
	framePing        = 0x6
	flagAck          = 0x1
	pingPayloadLen   = 8
)

// pingConn is a client HTTP/2 connection under grpc-go's transport (ADS) that
// adds Envoy's keepalive PINGs (see the choice in rules.go). It follows the
// frame boundaries of both directions: its own PINGs go out only between
// two of grpc-go's frames, and their ACKs are taken out of what grpc-go
// reads. Everything else passes through untouched.
type pingConn struct {
	net.Conn
	ka  Keepalive
	log *slog.Logger

	wmu sync.Mutex // serializes writes; guards out and due
	out frameCursor
	due bool // a PING waits for the next frame boundary

	// Read side, used only by grpc-go's reader goroutine.
	inLeft int // payload bytes of the current frame still to pass
	hdr    [frameHeaderLen + pingPayloadLen]byte
	hdrN   int
	ready  []byte // parsed bytes for grpc-go
	// readyBuf is ready's whole array, reused once ready is drained.
	readyBuf []byte
	buf      []byte
	rerr     error

	kmu      sync.Mutex // guards the keepalive state below
	closed   bool
	awaiting bool    // a PING is out; timeout armed
	payload  [8]byte // of the PING awaiting its ACK
	send     *time.Timer
	timeout  *time.Timer
}

// frameCursor tracks the position in the outgoing frame stream.
type frameCursor struct {
	preface int // preface bytes still to pass
	hdr     [frameHeaderLen]byte
	hdrN    int
	left    int // payload bytes of the current frame still to pass
	frames  int
}

// feed advances the cursor over p.
func (f *frameCursor) feed(p []byte) {
	for len(p) > 0 {
		switch {
		case f.preface > 0:
			k := min(f.preface, len(p))
			f.preface -= k
			p = p[k:]
		case f.left > 0:
			k := min(f.left, len(p))
			f.left -= k
			p = p[k:]
		default:
			k := copy(f.hdr[f.hdrN:], p)
			f.hdrN += k
			p = p[k:]
			if f.hdrN == frameHeaderLen {
				f.left = frameLen(f.hdr[:])
				f.hdrN = 0
				f.frames++
			}
		}
	}
}

// boundary reports whether the stream is between two frames, after the
// preface and the first frame (HTTP/2 wants SETTINGS first).
func (f *frameCursor) boundary() bool {
	return f.preface == 0 && f.hdrN == 0 && f.left == 0 && f.frames > 0
}

func frameLen(h []byte) int { return int(h[0])<<16 | int(h[1])<<8 | int(h[2]) }

func newPingConn(c net.Conn, ka Keepalive, log *slog.Logger) *pingConn {
	p := &pingConn{Conn: c, ka: ka, log: log, out: frameCursor{preface: clientPrefaceLen}, buf: make([]byte, 32<<10)}
	p.kmu.Lock()
	defer p.kmu.Unlock()
	p.send = time.AfterFunc(h2grpc.KeepaliveNext(ka.Interval, ka.IntervalJitter), p.sendPing)
	p.timeout = time.AfterFunc(time.Hour, p.onTimeout)
	p.timeout.Stop()
	return p
}

// Write passes grpc-go's bytes on, then a PING that was due if the stream is
// now at a frame boundary.
func (p *pingConn) Write(b []byte) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	n, err := p.Conn.Write(b)
	p.out.feed(b[:n])
	if err == nil && p.due && p.out.boundary() {
		p.writePing()
	}
	return n, err
}

// sendPing is Envoy's sendKeepalive: no PING while one is awaiting its ACK.
func (p *pingConn) sendPing() {
	p.kmu.Lock()
	skip := p.closed || p.awaiting
	p.kmu.Unlock()
	if skip {
		return
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.due = true
	if p.out.boundary() {
		p.writePing()
	}
}

// writePing writes one PING; wmu is held. Its payload is the time in
// milliseconds since the epoch, as Envoy's.
func (p *pingConn) writePing() {
	p.due = false
	var f [frameHeaderLen + pingPayloadLen]byte
	f[2], f[3] = pingPayloadLen, framePing
	binary.BigEndian.PutUint64(f[frameHeaderLen:], uint64(time.Now().UnixMilli()))
	p.kmu.Lock()
	if p.closed {
		p.kmu.Unlock()
		return
	}
	copy(p.payload[:], f[frameHeaderLen:])
	p.awaiting = true
	p.timeout.Reset(p.ka.Timeout)
	p.kmu.Unlock()
	// A failed write breaks the connection; grpc-go sees it on its own.
	_, _ = p.Conn.Write(f[:])
}

// Read hands grpc-go the frames read, less the ACKs of our PINGs.
func (p *pingConn) Read(b []byte) (int, error) {
	for len(p.ready) == 0 {
		if p.rerr != nil {
			return 0, p.rerr
		}
		n, err := p.Conn.Read(p.buf)
		// Parse into the array ready last grew to: ready itself has been
		// advanced past what grpc-go took, and its spare capacity with it.
		p.ready = p.parse(p.buf[:n], p.readyBuf[:0])
		p.readyBuf = p.ready[:0]
		p.rerr = err
	}
	n := copy(b, p.ready)
	p.ready = p.ready[n:]
	return n, nil
}

// parse appends to dst the bytes of src that grpc-go must see.
func (p *pingConn) parse(src, dst []byte) []byte {
	for len(src) > 0 {
		if p.inLeft > 0 {
			k := min(p.inLeft, len(src))
			dst = append(dst, src[:k]...)
			p.inLeft -= k
			src = src[k:]
			continue
		}
		want := frameHeaderLen
		if p.hdrN >= frameHeaderLen && isPing(p.hdr[:]) {
			want += pingPayloadLen // a PING is judged whole
		}
		k := copy(p.hdr[p.hdrN:want], src)
		p.hdrN += k
		src = src[k:]
		if p.hdrN < want {
			continue
		}
		if want == frameHeaderLen && isPing(p.hdr[:]) {
			continue
		}
		p.hdrN = 0
		if isPing(p.hdr[:]) {
			if p.hdr[4]&flagAck != 0 && p.onAck(p.hdr[frameHeaderLen:]) {
				continue // ours: grpc-go never sent it
			}
			if p.hdr[4]&flagAck == 0 {
				p.onFrame()
			}
			dst = append(dst, p.hdr[:want]...)
			continue
		}
		p.onFrame()
		dst = append(dst, p.hdr[:frameHeaderLen]...)
		p.inLeft = frameLen(p.hdr[:])
	}
	return dst
}

func isPing(h []byte) bool { return h[3] == framePing && frameLen(h) == pingPayloadLen }

// onFrame is Envoy's onBeforeFrameReceived: any frame but a PING ACK
// extends the wait for the ACK.
func (p *pingConn) onFrame() {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	if p.awaiting && !p.closed {
		p.timeout.Reset(p.ka.Timeout)
	}
}

// onAck is Envoy's onKeepaliveResponse for the ACK of our PING: stop the
// timeout, schedule the next PING. It reports whether the ACK was ours.
func (p *pingConn) onAck(payload []byte) bool {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	if !p.awaiting || string(payload) != string(p.payload[:]) {
		return false
	}
	p.awaiting = false
	p.timeout.Stop()
	if !p.closed {
		p.send.Reset(h2grpc.KeepaliveNext(p.ka.Interval, p.ka.IntervalJitter))
	}
	return true
}

// onTimeout is Envoy's onKeepaliveResponseTimeout: close the connection.
func (p *pingConn) onTimeout() {
	p.kmu.Lock()
	fire := p.awaiting && !p.closed
	p.kmu.Unlock()
	if fire {
		p.log.Debug("closing connection due to keepalive timeout", "timeout", p.ka.Timeout)
		_ = p.Close()
	}
}

// Close stops the timers and closes the connection.
func (p *pingConn) Close() error {
	p.kmu.Lock()
	p.closed = true
	p.send.Stop()
	p.timeout.Stop()
	p.kmu.Unlock()
	return p.Conn.Close()
}
