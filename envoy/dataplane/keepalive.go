package dataplane

import (
	"cmp"
	"context"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// Keepalive is Envoy's HTTP/2 connection keepalive
// (api config/core/v3/protocol.proto KeepaliveSettings;
// source/common/http/http2/codec_impl.cc ConnectionImpl): a PING every
// Interval plus jitter, and the connection closed when its ACK does not come
// within Timeout. The local data plane's ADS and ext_proc connections both
// use it (rules.go describes the behaviour).
// The zero value is the bootstraps' settings (keepaliveDefaults).
type Keepalive struct {
	// Interval between PINGs; negative sends none.
	Interval time.Duration
	// Timeout for a PING's ACK before the connection is closed.
	Timeout time.Duration
	// IntervalJitter is the percentage of Interval added at random to each
	// one; negative means none.
	IntervalJitter float64
}

// keepaliveNext is the wait before the next keepalive PING: interval plus
// a random part of jitterPercent of it (codec_impl.cc onKeepaliveResponse,
// interval + random() % jitter), so PINGs are never closer than interval.
func keepaliveNext(interval time.Duration, jitterPercent float64) time.Duration {
	if mod := time.Duration(jitterPercent * float64(interval) / 100); mod > 0 {
		return interval + rand.N(mod)
	}
	return interval
}

// keepaliveDefaults fills the zero fields.
func keepaliveDefaults(k Keepalive) Keepalive {
	k.Interval = cmp.Or(k.Interval, rules.DefaultKeepaliveInterval)
	if k.Timeout <= 0 {
		k.Timeout = rules.DefaultKeepaliveTimeout
	}
	switch {
	case k.IntervalJitter == 0:
		k.IntervalJitter = rules.DefaultKeepaliveJitterPercent
	case k.IntervalJitter < 0:
		k.IntervalJitter = 0
	}
	return k
}

// keepaliveDialOption makes the connections of a grpc-go client send
// Envoy's keepalive PINGs; the data plane's ADS and ext_proc clients use it.
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

// pingConn is a client HTTP/2 connection under grpc-go's transport that
// adds Envoy's keepalive PINGs (see the choice in rules.go). It follows the
// frame boundaries of both directions: its own PINGs go out only between
// two of grpc-go's frames, and their ACKs are taken out of what grpc-go
// reads. Everything else passes through untouched.
//
// Its timers run Envoy's keepalive (codec_impl.cc ConnectionImpl;
// rules_upstream.go): the first PING is due interval plus jitter after the
// connection exists, none while one awaits its ACK, any frame received but
// a PING ACK re-arms a running timeout, the ACK schedules the next PING,
// and the timeout closes the connection.
type pingConn struct {
	net.Conn
	log *slog.Logger
	ka  Keepalive

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

	awaiting atomic.Bool // a PING is out; read without kmu on every frame
	// kmu guards the keepalive state below; it is taken under wmu, never
	// the other way round, and never held while writing.
	kmu           sync.Mutex
	stopped       bool
	payload       [8]byte // of the PING awaiting its ACK
	send, timeout *time.Timer
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
	p := &pingConn{Conn: c, log: log, ka: ka, out: frameCursor{preface: clientPrefaceLen}, buf: make([]byte, 32<<10)}
	p.kmu.Lock()
	defer p.kmu.Unlock()
	p.timeout = time.AfterFunc(time.Hour, p.onTimeout)
	p.timeout.Stop()
	p.send = time.AfterFunc(keepaliveNext(ka.Interval, ka.IntervalJitter), p.onSend)
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

// onSend is sendKeepalive: no PING while one is awaiting its ACK;
// otherwise it goes now if grpc-go's stream is at a frame boundary, else
// after the frame being written.
func (p *pingConn) onSend() {
	p.kmu.Lock()
	skip := p.stopped || p.awaiting.Load()
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

// writePing writes one PING; wmu is held.
func (p *pingConn) writePing() {
	p.due = false
	payload, ok := p.sending()
	if !ok {
		return
	}
	var f [frameHeaderLen + pingPayloadLen]byte
	f[2], f[3] = pingPayloadLen, framePing
	copy(f[frameHeaderLen:], payload[:])
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
			if p.hdr[4]&flagAck != 0 && p.ack(p.hdr[frameHeaderLen:want]) {
				continue // ours: grpc-go never sent it
			}
			if p.hdr[4]&flagAck == 0 {
				p.frame()
			}
			dst = append(dst, p.hdr[:want]...)
			continue
		}
		p.frame()
		dst = append(dst, p.hdr[:frameHeaderLen]...)
		p.inLeft = frameLen(p.hdr[:])
	}
	return dst
}

func isPing(h []byte) bool { return h[3] == framePing && frameLen(h) == pingPayloadLen }

// sending is called as a due PING is written: it returns the payload (the
// time in milliseconds since the epoch, as Envoy's) and arms the timeout;
// ok is false when the PING must not go (stopped, or one already out).
func (p *pingConn) sending() (payload [8]byte, ok bool) {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	if p.stopped || p.awaiting.Load() {
		return payload, false
	}
	binary.BigEndian.PutUint64(p.payload[:], uint64(time.Now().UnixMilli()))
	p.awaiting.Store(true)
	p.timeout.Reset(p.ka.Timeout)
	return p.payload, true
}

// frame is onBeforeFrameReceived for a frame other than a PING ACK: the
// wait for the ACK is extended (head-of-line blocking is not a dead peer).
func (p *pingConn) frame() {
	if !p.awaiting.Load() {
		return
	}
	p.kmu.Lock()
	if p.awaiting.Load() && !p.stopped {
		p.timeout.Reset(p.ka.Timeout)
	}
	p.kmu.Unlock()
}

// ack is onKeepaliveResponse for a PING ACK: if it answers our PING, the
// timeout stops and the next PING is scheduled. It reports whether it did.
func (p *pingConn) ack(data []byte) bool {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	if !p.awaiting.Load() || string(data) != string(p.payload[:]) {
		return false
	}
	p.awaiting.Store(false)
	p.timeout.Stop()
	if !p.stopped {
		p.send.Reset(keepaliveNext(p.ka.Interval, p.ka.IntervalJitter))
	}
	return true
}

// onTimeout is onKeepaliveResponseTimeout: close the connection.
func (p *pingConn) onTimeout() {
	p.kmu.Lock()
	fire := p.awaiting.Load() && !p.stopped
	p.kmu.Unlock()
	if fire {
		p.log.Debug("closing connection due to keepalive timeout")
		_ = p.Close()
	}
}

// Close stops the timers for good and closes the connection.
func (p *pingConn) Close() error {
	p.kmu.Lock()
	p.stopped = true
	p.send.Stop()
	p.timeout.Stop()
	p.kmu.Unlock()
	return p.Conn.Close()
}
