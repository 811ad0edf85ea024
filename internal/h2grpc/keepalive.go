package h2grpc

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Keepalive is Envoy's HTTP/2 connection keepalive
// (api config/core/v3/protocol.proto KeepaliveSettings;
// source/common/http/http2/codec_impl.cc ConnectionImpl): a PING every
// Interval plus jitter, and the connection closed when its ACK does not come
// within Timeout. The local data plane's ADS and ext_proc connections both
// use it (envoy/rules.go describes the behaviour).
type Keepalive struct {
	// Interval between PINGs; zero or negative sends none.
	Interval time.Duration
	// Timeout for a PING's ACK before the connection is closed.
	Timeout time.Duration
	// IntervalJitter is the percentage of Interval added at random to each
	// one; zero or negative means none.
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

// Pinger runs Envoy's keepalive for one HTTP/2 connection (codec_impl.cc
// ConnectionImpl; envoy/rules.go): the first PING is due interval plus
// jitter after Start, none while one awaits its ACK, any frame received but
// a PING ACK re-arms a running timeout, the ACK schedules the next PING,
// and the timeout closes the connection. It keeps the timers; its owner
// writes the PINGs and closes the connection. Both of the data plane's
// HTTP/2 clients use it: h2grpc's connections and envoy's pingConn under
// grpc-go. A nil *Pinger (no keepalive) does nothing.
type Pinger struct {
	ka     Keepalive
	due    func() // a PING is due: the owner calls Sending and writes it
	expire func() // no ACK within Timeout: the owner closes the connection

	awaiting atomic.Bool // a PING is out; read without mu on every frame

	mu            sync.Mutex // guards the rest
	stopped       bool
	payload       [8]byte // of the PING awaiting its ACK
	send, timeout *time.Timer
}

// NewPinger returns the keepalive of a connection, nil if ka.Interval is
// not positive; Start starts it.
func NewPinger(ka Keepalive, due, expire func()) *Pinger {
	if ka.Interval <= 0 {
		return nil
	}
	return &Pinger{ka: ka, due: due, expire: expire}
}

// Start schedules the first PING, unless Stop came first.
func (p *Pinger) Start() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.send != nil {
		return
	}
	p.timeout = time.AfterFunc(time.Hour, p.onTimeout)
	p.timeout.Stop()
	p.send = time.AfterFunc(keepaliveNext(p.ka.Interval, p.ka.IntervalJitter), p.onSend)
}

// onSend is sendKeepalive: no PING while one is awaiting its ACK.
func (p *Pinger) onSend() {
	p.mu.Lock()
	skip := p.stopped || p.awaiting.Load()
	p.mu.Unlock()
	if !skip {
		p.due()
	}
}

// Sending is called as a due PING is written: it returns the payload (the
// time in milliseconds since the epoch, as Envoy's) and arms the timeout;
// ok is false when the PING must not go (stopped, or one already out).
func (p *Pinger) Sending() (payload [8]byte, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.awaiting.Load() {
		return payload, false
	}
	binary.BigEndian.PutUint64(p.payload[:], uint64(time.Now().UnixMilli()))
	p.awaiting.Store(true)
	p.timeout.Reset(p.ka.Timeout)
	return p.payload, true
}

// Awaiting reports whether a PING awaits its ACK.
func (p *Pinger) Awaiting() bool { return p != nil && p.awaiting.Load() }

// Frame is onBeforeFrameReceived for a frame other than a PING ACK: the
// wait for the ACK is extended (head-of-line blocking is not a dead peer).
func (p *Pinger) Frame() {
	if p == nil || !p.awaiting.Load() {
		return
	}
	p.mu.Lock()
	if p.awaiting.Load() && !p.stopped {
		p.timeout.Reset(p.ka.Timeout)
	}
	p.mu.Unlock()
}

// Ack is onKeepaliveResponse for a PING ACK: if it answers our PING, the
// timeout stops and the next PING is scheduled. It reports whether it did.
func (p *Pinger) Ack(data []byte) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
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

// onTimeout is onKeepaliveResponseTimeout.
func (p *Pinger) onTimeout() {
	p.mu.Lock()
	fire := p.awaiting.Load() && !p.stopped
	p.mu.Unlock()
	if fire {
		p.expire()
	}
}

// Stop stops the timers for good.
func (p *Pinger) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.send != nil {
		p.send.Stop()
		p.timeout.Stop()
	}
}
