package h2grpc

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// pingTap records the client PINGs each accepted connection carries and
// whether the server sent a GOAWAY, parsed with x/net/http2 on copies of
// the bytes.
type pingTap struct {
	net.Listener
	mu     sync.Mutex
	pings  [][]uint64
	goaway []string
}

func (l *pingTap) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	i := len(l.pings)
	l.pings = append(l.pings, nil)
	l.goaway = append(l.goaway, "")
	l.mu.Unlock()
	in, inw := io.Pipe()
	out, outw := io.Pipe()
	go func() {
		_, _ = io.ReadFull(in, make([]byte, len(http2.ClientPreface)))
		fr := http2.NewFramer(nil, in)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				_ = in.CloseWithError(err)
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				l.mu.Lock()
				l.pings[i] = append(l.pings[i], binary.BigEndian.Uint64(p.Data[:]))
				l.mu.Unlock()
			}
		}
	}()
	go func() {
		fr := http2.NewFramer(nil, out)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				_ = out.CloseWithError(err)
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok && g.ErrCode != http2.ErrCodeNo {
				l.mu.Lock()
				l.goaway[i] = g.ErrCode.String() + " " + string(g.DebugData())
				l.mu.Unlock()
			}
		}
	}()
	return &tapConn{Conn: c, in: inw, out: outw}, nil
}

func (l *pingTap) snapshot() ([][]uint64, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var p [][]uint64
	for _, x := range l.pings {
		p = append(p, append([]uint64(nil), x...))
	}
	return p, append([]string(nil), l.goaway...)
}

type tapConn struct {
	net.Conn
	in, out *io.PipeWriter
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	_, _ = c.in.Write(b[:n])
	return n, err
}

func (c *tapConn) Write(b []byte) (int, error) {
	_, _ = c.out.Write(b)
	return c.Conn.Write(b)
}

func (c *tapConn) Close() error {
	_ = c.in.Close()
	_ = c.out.Close()
	return c.Conn.Close()
}

// TestKeepalivePings: PINGs at the interval (never closer), ACKed by the
// server, with no stream open, payload the send time in ms; against a
// server enforcing a minimum PING interval below ours the connection
// survives, while one whose minimum is above our interval answers
// too_many_pings (the negative control: the tap sees its GOAWAY).
func TestKeepalivePings(t *testing.T) {
	const interval = 40 * time.Millisecond
	for _, tc := range []struct {
		name      string
		minTime   time.Duration
		wantAlive bool
	}{
		{"policy allows the interval", interval / 2, true},
		{"policy stricter than the interval", 10 * interval, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			tap := &pingTap{Listener: ln}
			gs := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: tc.minTime, PermitWithoutStream: true}))
			healthpb.RegisterHealthServer(gs, health.NewServer())
			go func() { _ = gs.Serve(tap) }()
			t.Cleanup(gs.Stop)
			start := time.Now()
			cc := newTestClient(t, Options{Target: ln.Addr().String(), Keepalive: Keepalive{Interval: interval, Timeout: 5 * time.Second}})
			if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			const want = 5
			waitFor(t, "PINGs or a GOAWAY", func() bool {
				p, g := tap.snapshot()
				return len(p[0]) >= want || g[0] != ""
			})
			pings, goaways := tap.snapshot()
			if !tc.wantAlive {
				if goaways[0] == "" {
					t.Fatalf("no GOAWAY after %d PINGs from a server allowing one per %s", len(pings[0]), tc.minTime)
				}
				return
			}
			if goaways[0] != "" {
				t.Fatalf("server sent GOAWAY %q", goaways[0])
			}
			for i, p := range pings[0] {
				sent := time.UnixMilli(int64(p))
				if sent.Before(start.Truncate(time.Millisecond)) || sent.After(time.Now()) {
					t.Errorf("PING %d payload %d is not the send time in ms since the epoch", i, p)
				}
				if i > 0 && time.Duration(p-pings[0][i-1])*time.Millisecond < interval-time.Millisecond {
					t.Errorf("PINGs %d and %d %dms apart, want at least %s", i-1, i, p-pings[0][i-1], interval)
				}
			}
			if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatalf("call after the PINGs: %v", err)
			}
			if p, _ := tap.snapshot(); len(p) != 1 {
				t.Errorf("%d connections, want the one kept", len(p))
			}
		})
	}
}

// TestKeepaliveTimeout: a server that never ACKs gets exactly one PING
// (none while it awaits its ACK), then the client closes the connection at
// the timeout and the call on it fails with Unavailable. Frames from the
// server re-arm the timeout: one that keeps sending PINGs of its own holds
// the connection open well past it.
func TestKeepaliveTimeout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chatty bool // the server sends a frame every timeout/4
	}{
		{"silent server", false},
		{"server sending frames", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 200 * time.Millisecond
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ln.Close() })
			results := make(chan rawResult, 4)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { results <- rawServer(c, tc.chatty, timeout/4) }()
				}
			}()
			cc := newTestClient(t, Options{Target: ln.Addr().String(), Keepalive: Keepalive{Interval: 20 * time.Millisecond, Timeout: timeout}})
			callErr := make(chan error, 1)
			go func() {
				_, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{})
				callErr <- err
			}()
			if tc.chatty {
				select {
				case r := <-results:
					t.Fatalf("connection closed (%d PINGs) though the server kept sending frames", r.pings)
				case <-time.After(5 * timeout):
				}
				return
			}
			r := <-results
			if !r.closed || r.pings != 1 {
				t.Errorf("closed by the client %v after %d PINGs; want closed after exactly 1", r.closed, r.pings)
			}
			wantCode(t, "call on the closed connection", <-callErr, codes.Unavailable)
		})
	}
}

type rawResult struct {
	pings  int
	closed bool // by the client
}

// rawServer speaks just enough HTTP/2 to take a connection: it never ACKs
// PINGs; chatty sends one of its own every period.
func rawServer(c net.Conn, chatty bool, period time.Duration) (r rawResult) {
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
		return r
	}
	var wmu sync.Mutex
	fr := http2.NewFramer(c, c)
	wmu.Lock()
	err := fr.WriteSettings()
	wmu.Unlock()
	if err != nil {
		return r
	}
	if chatty {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tk := time.NewTicker(period)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
					wmu.Lock()
					_ = fr.WritePing(false, [8]byte{9})
					wmu.Unlock()
				}
			}
		}()
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			r.closed = err == io.EOF
			return r
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				wmu.Lock()
				_ = fr.WriteSettingsAck()
				wmu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				r.pings++ // never answered
			}
		}
	}
}
