package dataplane

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	// Types named by an "@type" in the bootstrap files, so protojson can
	// resolve them.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// startTappedServer runs a gRPC server with an ADS service (open streams
// counted) and a health service, accepting PINGs of any rate.
func startTappedServer(t *testing.T) (addr string, tap *tapListener, streams func() (opened, closed int)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tap = newTapListener(ln)
	var mu sync.Mutex
	var opened, closed int
	srv := serverv3.NewServer(t.Context(), cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil), serverv3.CallbackFuncs{
		StreamRequestFunc: func(id int64, _ *discoveryv3.DiscoveryRequest) error {
			mu.Lock()
			defer mu.Unlock()
			if int(id) > opened {
				opened = int(id)
			}
			return nil
		},
		StreamClosedFunc: func(int64, *corev3.Node) {
			mu.Lock()
			defer mu.Unlock()
			closed++
		},
	})
	gs := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Millisecond, PermitWithoutStream: true}))
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(tap) }()
	t.Cleanup(gs.Stop)
	return ln.Addr().String(), tap, func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return opened, closed
	}
}

// TestKeepalivePings checks that the ADS and ext_proc connections of the
// data plane send Envoy's keepalive PINGs with no stream open (ext_proc) or
// one idle stream (ADS), never closer than the interval, and that the
// connection and its streams survive them.
func TestKeepalivePings(t *testing.T) {
	const interval = 40 * time.Millisecond
	const want = 5
	ka := Keepalive{Interval: interval, Timeout: 5 * time.Second}
	for _, tc := range []string{"ads", "ext_proc"} {
		t.Run(tc, func(t *testing.T) {
			addr, tap, streams := startTappedServer(t)
			start := time.Now()
			opts := Options{Keepalive: ka}
			if tc == "ext_proc" {
				opts.ExtProcTarget = addr
			}
			d, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			if tc == "ads" {
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() {
					defer close(done)
					_ = d.WatchADS(ctx, addr, &corev3.Node{Id: "node-1"})
				}()
				t.Cleanup(func() { cancel(); <-done })
			} else {
				// Envoy connects at the first request; once it is done no
				// stream is open.
				if _, err := healthpb.NewHealthClient(d.conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "PINGs", func() bool {
				conns := tap.Snapshot()
				return len(conns) > 0 && len(conns[0].Pings) >= want
			})
			conns := tap.Snapshot()
			if len(conns) != 1 || conns[0].EOF {
				t.Fatalf("%d connections (%+v), want the one connection kept", len(conns), conns)
			}
			for _, err := range cadenceErrors(conns[0].Pings, start, interval) {
				t.Error(err)
			}
			if tc == "ads" {
				if opened, closed := streams(); opened != 1 || closed != 0 {
					t.Errorf("ADS streams opened %d, closed %d; want one, still open", opened, closed)
				}
				return
			}
			resp, err := healthpb.NewHealthClient(d.conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("RPC after the PINGs = %v, %v", resp, err)
			}
			if conns := tap.Snapshot(); len(conns) != 1 {
				t.Errorf("the RPC went over a new connection (%d in all)", len(conns))
			}
		})
	}
}

// TestKeepaliveTimeout runs a server that never ACKs PINGs: the data plane
// sends one PING, no second one while it waits, and closes the connection
// at the timeout, as Envoy does; the call on it fails with Unavailable.
func TestKeepaliveTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	results := serveNoAck(ln, 0)
	d, err := New(Options{ExtProcTarget: ln.Addr().String(), Keepalive: Keepalive{Interval: 30 * time.Millisecond, Timeout: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	// A call opens the connection; the server never answers it, and it
	// fails when the keepalive timeout closes the connection.
	callErr := make(chan error, 1)
	go func() {
		_, err := healthpb.NewHealthClient(d.conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		callErr <- err
	}()
	select {
	case r := <-results:
		if !r.EOF || r.Pings != 1 {
			t.Errorf("first connection: closed by the client %v after %d PINGs; want closed after exactly 1", r.EOF, r.Pings)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the connection was not closed though its PING was never answered")
	}
	if err := <-callErr; status.Code(err) != codes.Unavailable {
		t.Errorf("call on the closed connection: %v, want Unavailable", err)
	}
}

// TestPingConnFraming feeds a server's frames to the read side in chunks of
// every size: only the ACK of our own PING is taken out. The write side
// finds the frame boundaries of the client's stream the same way.
func TestPingConnFraming(t *testing.T) {
	other := [8]byte{2, 4, 16, 16, 9, 14, 7, 7} // grpc-go's BDP PING
	for _, chunk := range []int{1, 2, 5, 9, 17, 0} {
		client, server := net.Pipe()
		t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
		p := newPingConn(client, Keepalive{Interval: time.Hour, Timeout: time.Hour}, slog.New(slog.DiscardHandler))
		ours, ok := p.sending() // our PING is out
		if !ok {
			t.Fatal("no PING could be sent")
		}
		var in, want bytes.Buffer
		fr := http2.NewFramer(&in, nil)
		wfr := http2.NewFramer(&want, nil)
		for _, f := range []*http2.Framer{fr, wfr} {
			_ = f.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14})
			if f == fr {
				_ = f.WritePing(true, ours)
			}
			_ = f.WritePing(true, other)
			_ = f.WritePing(false, ours)
			_ = f.WriteData(1, true, []byte("abc"))
		}
		if chunk == 0 {
			chunk = in.Len()
		}
		var got []byte
		src := in.Bytes()
		for len(src) > 0 {
			k := min(chunk, len(src))
			got = p.parse(src[:k], got)
			src = src[k:]
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("chunks of %d: grpc-go reads\n%x\nwant\n%x", chunk, got, want.Bytes())
		}
		if p.awaiting.Load() {
			t.Errorf("chunks of %d: the ACK of our PING was not seen", chunk)
		}
		_ = p.Close()

		var fc frameCursor
		fc.preface = clientPrefaceLen
		out := append([]byte(http2.ClientPreface), want.Bytes()...)
		var boundaries []int
		for i := 0; i < len(out); i += chunk {
			fc.feed(out[i:min(i+chunk, len(out))])
			if fc.boundary() {
				boundaries = append(boundaries, min(i+chunk, len(out)))
			}
		}
		for _, b := range boundaries {
			if !frameEnds(out, b) {
				t.Errorf("chunks of %d: boundary at byte %d is inside a frame", chunk, b)
			}
		}
		if len(boundaries) == 0 || boundaries[len(boundaries)-1] != len(out) {
			t.Errorf("chunks of %d: the end of the stream is not a boundary: %v", chunk, boundaries)
		}
	}
}

// frameEnds reports whether offset n of a client stream (preface, frames)
// falls at the end of a frame.
func frameEnds(s []byte, n int) bool {
	for i := clientPrefaceLen; i < n; {
		i += frameHeaderLen + frameLen(s[i:])
		if i == n {
			return true
		}
	}
	return false
}

// TestKeepaliveDefaultsMatchBootstraps ties the data plane's default
// keepalive to the connection_keepalive of the bootstraps it stands in for.
func TestKeepaliveDefaultsMatchBootstraps(t *testing.T) {
	files, err := filepath.Glob("../*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bootstrap files: %v", err)
	}
	d := keepaliveDefaults(Keepalive{})
	for _, file := range files {
		y, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			t.Fatal(err)
		}
		var b bootstrapv3.Bootstrap
		if err := protojson.Unmarshal(j, &b); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		n := 0
		for _, c := range b.GetStaticResources().GetClusters() {
			var hpo upstreamhttpv3.HttpProtocolOptions
			a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
			if a == nil || a.UnmarshalTo(&hpo) != nil {
				continue
			}
			ka := hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions().GetConnectionKeepalive()
			if ka == nil {
				continue
			}
			n++
			jitter := rules.DefaultKeepaliveJitterPercent
			if ka.GetIntervalJitter() != nil {
				jitter = ka.GetIntervalJitter().GetValue()
			}
			got := Keepalive{Interval: ka.GetInterval().AsDuration(), Timeout: ka.GetTimeout().AsDuration(), IntervalJitter: jitter}
			if got != d {
				t.Errorf("%s: cluster %s keepalive %+v, the data plane's default %+v", file, c.GetName(), got, d)
			}
		}
		if n < 2 {
			t.Errorf("%s: %d clusters with connection_keepalive, want the ADS and ext_proc ones", file, n)
		}
	}
}
