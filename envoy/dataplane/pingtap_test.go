package dataplane

// A listener for the keepalive tests: it records, per accepted connection,
// the PINGs the client sent, the GOAWAY the server sent and whether the
// client closed the connection, parsed with x/net/http2 from copies of the
// bytes rather than by the code under test.

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// tapConn is what one accepted connection carried.
type tapConn struct {
	Pings  []uint64 // payloads of the client's PINGs (not ACKs), in order
	GoAway string   // the server's GOAWAY other than NO_ERROR: code and debug data
	EOF    bool     // the client closed the connection
}

// tapListener wraps a server's listener.
type tapListener struct {
	net.Listener
	mu    sync.Mutex
	conns []tapConn
}

// newTapListener taps ln.
func newTapListener(ln net.Listener) *tapListener { return &tapListener{Listener: ln} }

// Snapshot copies what the connections carried so far.
func (l *tapListener) Snapshot() []tapConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]tapConn, len(l.conns))
	for i, c := range l.conns {
		out[i] = c
		out[i].Pings = append([]uint64(nil), c.Pings...)
	}
	return out
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	i := len(l.conns)
	l.conns = append(l.conns, tapConn{})
	l.mu.Unlock()
	in, inw := io.Pipe()
	out, outw := io.Pipe()
	go l.parse(in, true, func(f http2.Frame) {
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			l.conns[i].Pings = append(l.conns[i].Pings, binary.BigEndian.Uint64(p.Data[:]))
		}
	})
	go l.parse(out, false, func(f http2.Frame) {
		if g, ok := f.(*http2.GoAwayFrame); ok && g.ErrCode != http2.ErrCodeNo {
			l.conns[i].GoAway = g.ErrCode.String() + " " + string(g.DebugData())
		}
	})
	return &tapStream{Conn: c, l: l, i: i, in: inw, out: outw}, nil
}

// parse reads frames from one direction and records them with mu held.
func (l *tapListener) parse(r *io.PipeReader, preface bool, record func(http2.Frame)) {
	defer func() { _ = r.Close() }()
	if preface {
		if _, err := io.ReadFull(r, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
	}
	fr := http2.NewFramer(nil, r)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		l.mu.Lock()
		record(f)
		l.mu.Unlock()
	}
}

type tapStream struct {
	net.Conn
	l       *tapListener
	i       int
	in, out *io.PipeWriter
}

func (c *tapStream) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	_, _ = c.in.Write(b[:n])
	if err != nil {
		if err == io.EOF {
			c.l.mu.Lock()
			c.l.conns[c.i].EOF = true
			c.l.mu.Unlock()
		}
		_ = c.in.CloseWithError(err)
	}
	return n, err
}

func (c *tapStream) Write(b []byte) (int, error) {
	_, _ = c.out.Write(b)
	return c.Conn.Write(b)
}

func (c *tapStream) Close() error {
	_ = c.in.Close()
	_ = c.out.Close()
	return c.Conn.Close()
}

// cadenceErrors checks PING payloads against Envoy's keepalive: each is
// the send time in milliseconds since the epoch, after start, and no two
// are closer than interval.
func cadenceErrors(pings []uint64, start time.Time, interval time.Duration) []error {
	var errs []error
	for i, p := range pings {
		sent := time.UnixMilli(int64(p))
		if sent.Before(start.Truncate(time.Millisecond)) || sent.After(time.Now()) {
			errs = append(errs, fmt.Errorf("PING %d payload %d is not the send time in ms since the epoch", i, p))
		}
		if i > 0 && time.Duration(p-pings[i-1])*time.Millisecond < interval-time.Millisecond {
			errs = append(errs, fmt.Errorf("PINGs %d and %d %dms apart, want at least the interval %s", i-1, i, p-pings[i-1], interval))
		}
	}
	return errs
}

// noAckResult is what a noAckServer saw.
type noAckResult struct {
	Pings int  // PINGs received (none answered)
	EOF   bool // the client closed the connection
}

// noAckServer speaks just enough server HTTP/2 on c to keep a client's
// connection (SETTINGS and their ACKs) but never ACKs a PING; with
// pingEvery > 0 it sends PINGs of its own at that period. It returns when
// the connection ends, and closes it.
func noAckServer(c net.Conn, pingEvery time.Duration) (r noAckResult) {
	defer func() { _ = c.Close() }()
	if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
		return r
	}
	var wmu sync.Mutex
	fr := http2.NewFramer(c, c)
	write := func(f func() error) error {
		wmu.Lock()
		defer wmu.Unlock()
		return f()
	}
	if err := write(func() error { return fr.WriteSettings() }); err != nil {
		return r
	}
	if pingEvery > 0 {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tk := time.NewTicker(pingEvery)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
					_ = write(func() error { return fr.WritePing(false, [8]byte{9}) })
				}
			}
		}()
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			r.EOF = err == io.EOF
			return r
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = write(fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				r.Pings++
			}
		}
	}
}

// serveNoAck runs noAckServer on every connection ln accepts, until ln is
// closed; each connection's result arrives on the channel when it ends.
func serveNoAck(ln net.Listener, pingEvery time.Duration) <-chan noAckResult {
	results := make(chan noAckResult, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { results <- noAckServer(c, pingEvery) }()
		}
	}()
	return results
}
