package dataplane

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

// pinger runs Envoy's keepalive for one HTTP/2 connection (codec_impl.cc
// ConnectionImpl; envoy/dataplane/internal/rules/rules.go): the first PING is due interval plus
// jitter after Start, none while one awaits its ACK, any frame received but
// a PING ACK re-arms a running timeout, the ACK schedules the next PING,
// and the timeout closes the connection. It keeps the timers; its owner,
// pingConn, writes the PINGs and closes the connection. A nil *pinger (no
// keepalive) does nothing.
type pinger struct {
	ka     Keepalive
	due    func() // a PING is due: the owner calls sending and writes it
	expire func() // no ACK within Timeout: the owner closes the connection

	awaiting atomic.Bool // a PING is out; read without mu on every frame

	mu            sync.Mutex // guards the rest
	stopped       bool
	payload       [8]byte // of the PING awaiting its ACK
	send, timeout *time.Timer
}

// newPinger returns the keepalive of a connection, nil if ka.Interval is
// not positive; start starts it.
func newPinger(ka Keepalive, due, expire func()) *pinger {
	if ka.Interval <= 0 {
		return nil
	}
	return &pinger{ka: ka, due: due, expire: expire}
}

// start schedules the first PING, unless stop came first.
func (p *pinger) start() {
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
func (p *pinger) onSend() {
	p.mu.Lock()
	skip := p.stopped || p.awaiting.Load()
	p.mu.Unlock()
	if !skip {
		p.due()
	}
}

// sending is called as a due PING is written: it returns the payload (the
// time in milliseconds since the epoch, as Envoy's) and arms the timeout;
// ok is false when the PING must not go (stopped, or one already out).
func (p *pinger) sending() (payload [8]byte, ok bool) {
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

// frame is onBeforeFrameReceived for a frame other than a PING ACK: the
// wait for the ACK is extended (head-of-line blocking is not a dead peer).
func (p *pinger) frame() {
	if p == nil || !p.awaiting.Load() {
		return
	}
	p.mu.Lock()
	if p.awaiting.Load() && !p.stopped {
		p.timeout.Reset(p.ka.Timeout)
	}
	p.mu.Unlock()
}

// ack is onKeepaliveResponse for a PING ACK: if it answers our PING, the
// timeout stops and the next PING is scheduled. It reports whether it did.
func (p *pinger) ack(data []byte) bool {
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
func (p *pinger) onTimeout() {
	p.mu.Lock()
	fire := p.awaiting.Load() && !p.stopped
	p.mu.Unlock()
	if fire {
		p.expire()
	}
}

// stop stops the timers for good.
func (p *pinger) stop() {
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
