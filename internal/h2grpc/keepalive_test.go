package h2grpc

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/toolmesh/toolmesh/internal/pingtap"
)

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
			tap := pingtap.New(ln)
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
				c := tap.Snapshot()[0]
				return len(c.Pings) >= want || c.GoAway != ""
			})
			got := tap.Snapshot()[0]
			if !tc.wantAlive {
				if got.GoAway == "" {
					t.Fatalf("no GOAWAY after %d PINGs from a server allowing one per %s", len(got.Pings), tc.minTime)
				}
				return
			}
			if got.GoAway != "" {
				t.Fatalf("server sent GOAWAY %q", got.GoAway)
			}
			for _, err := range pingtap.CadenceErrors(got.Pings, start, interval) {
				t.Error(err)
			}
			if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatalf("call after the PINGs: %v", err)
			}
			if conns := tap.Snapshot(); len(conns) != 1 || conns[0].EOF {
				t.Errorf("%d connections (%+v), want the one kept", len(conns), conns)
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
			every := time.Duration(0)
			if tc.chatty {
				every = timeout / 4
			}
			results := pingtap.ServeNoAck(ln, every)
			cc := newTestClient(t, Options{Target: ln.Addr().String(), Keepalive: Keepalive{Interval: 20 * time.Millisecond, Timeout: timeout}})
			callErr := make(chan error, 1)
			go func() {
				_, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{})
				callErr <- err
			}()
			if tc.chatty {
				select {
				case r := <-results:
					t.Fatalf("connection closed (%d PINGs) though the server kept sending frames", r.Pings)
				case <-time.After(5 * timeout):
				}
				return
			}
			r := <-results
			if !r.EOF || r.Pings != 1 {
				t.Errorf("closed by the client %v after %d PINGs; want closed after exactly 1", r.EOF, r.Pings)
			}
			wantCode(t, "call on the closed connection", <-callErr, codes.Unavailable)
		})
	}
}

// TestKeepaliveOptions: a keepalive whose interval or timeout is below
// Envoy's 1ms minimum is refused; no interval means no keepalive.
func TestKeepaliveOptions(t *testing.T) {
	for _, tc := range []struct {
		ka Keepalive
		ok bool
	}{
		{Keepalive{}, true},
		{Keepalive{Interval: -1}, true},
		{Keepalive{Interval: time.Second, Timeout: time.Millisecond}, true},
		{Keepalive{Interval: time.Second}, false},
		{Keepalive{Interval: time.Microsecond, Timeout: time.Second}, false},
	} {
		cc, err := NewClient(Options{Target: "127.0.0.1:1", Keepalive: tc.ka})
		if (err == nil) != tc.ok {
			t.Errorf("%+v: error %v, want ok %v", tc.ka, err, tc.ok)
		}
		if cc != nil {
			_ = cc.Close()
		}
	}
}
