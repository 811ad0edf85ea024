package app

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	// Every type named by an "@type" in the bootstrap files.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// TestGRPCKeepaliveEnforcement pings a real gRPC server on loopback the way
// Envoy's connection_keepalive does (HTTP/2 PINGs, each after the previous
// ACK, no stream open), at a scaled-down interval, and checks which servers
// keep the connection. grpc-go's default enforcement is the negative
// control: it must close the connection with GOAWAY too_many_pings.
func TestGRPCKeepaliveEnforcement(t *testing.T) {
	ours := func(minTime time.Duration) []grpc.ServerOption {
		cfg := defaultConfig()
		cfg.GRPCKeepaliveMinTime = config.Duration(minTime)
		return keepaliveOptions(cfg)
	}
	const pings = 12
	for _, tt := range []struct {
		name       string
		opts       []grpc.ServerOption
		interval   time.Duration
		wantGoAway bool
	}{
		// The production ratio: bootstrap interval 3x the MinTime.
		{"our policy, pings at 3x MinTime", ours(50 * time.Millisecond), 150 * time.Millisecond, false},
		{"grpc-go default policy", nil, 150 * time.Millisecond, true},
		{"our policy, pings faster than MinTime", ours(time.Second), 20 * time.Millisecond, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveHealth(t, tt.opts)
			c := dialH2(t, addr)
			var goAway *goAwayInfo
			for i := range pings {
				time.Sleep(tt.interval)
				if err := c.ping(uint64(i)); err != nil {
					if errors.As(err, &goAway) {
						break
					}
					t.Fatalf("ping %d: %v", i, err)
				}
			}
			if !tt.wantGoAway {
				if goAway != nil {
					t.Fatalf("connection closed after pings every %s: %v", tt.interval, goAway)
				}
				// The connection still carries RPCs.
				if st, err := c.healthCheck(); err != nil || st != healthpb.HealthCheckResponse_SERVING {
					t.Fatalf("health check after %d pings = %v, %v", pings, st, err)
				}
				return
			}
			if goAway == nil {
				t.Fatalf("no GOAWAY after %d pings every %s", pings, tt.interval)
			}
			if goAway.code != http2.ErrCodeEnhanceYourCalm || goAway.debug != "too_many_pings" {
				t.Errorf("GOAWAY = %v, want ENHANCE_YOUR_CALM too_many_pings", goAway)
			}
		})
	}
}

// TestBootstrapKeepalive checks that every Envoy bootstrap of envoy/ pings
// the toolmesh clusters at the interval the configuration check assumes,
// which the default enforcement MinTime stays below. The deploy module
// checks its rendered bootstraps the same way (deploy/bootstrap_test.go).
func TestBootstrapKeepalive(t *testing.T) {
	if defaultKeepaliveMinTime >= envoyKeepaliveInterval {
		t.Fatalf("default MinTime %s is not below the bootstrap interval %s", defaultKeepaliveMinTime, envoyKeepaliveInterval)
	}
	files, err := filepath.Glob("../../envoy/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bootstrap in envoy/: %v", err)
	}
	for _, file := range files {
		y, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var b bootstrapv3.Bootstrap
		if err := protojson.Unmarshal(j, &b); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		found := map[string]bool{}
		for _, c := range b.GetStaticResources().GetClusters() {
			if c.GetName() != wire.XDSCluster && c.GetName() != wire.ExtProcCluster {
				continue
			}
			found[c.GetName()] = true
			var hpo upstreamhttpv3.HttpProtocolOptions
			if err := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&hpo); err != nil {
				t.Fatalf("%s: %s: %v", file, c.GetName(), err)
			}
			ka := hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions().GetConnectionKeepalive()
			interval := ka.GetInterval().AsDuration()
			if ka == nil || interval != envoyKeepaliveInterval || ka.GetTimeout().AsDuration() <= 0 {
				t.Errorf("%s: %s connection_keepalive = %v, want interval %s and a timeout", file, c.GetName(), ka, envoyKeepaliveInterval)
			}
			if interval < defaultKeepaliveMinTime {
				t.Errorf("%s: %s pings every %s, below the gRPC servers' MinTime %s", file, c.GetName(), interval, defaultKeepaliveMinTime)
			}
		}
		if !found[wire.XDSCluster] || !found[wire.ExtProcCluster] {
			t.Errorf("%s: toolmesh clusters found: %v", file, found)
		}
	}
}

// serveHealth runs a gRPC server with opts and a SERVING health service.
func serveHealth(t *testing.T, opts []grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, health.NewServer()) // "" is SERVING
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// h2Conn is a raw HTTP/2 client connection: it sends PINGs when told, as
// Envoy's keepalive does, and can make one gRPC health check by hand.
type h2Conn struct {
	t    *testing.T
	conn net.Conn
	wmu  sync.Mutex // serializes frame writes
	fr   *http2.Framer
	acks chan uint64
	resp chan h2Event
	done chan struct{}
	mu   sync.Mutex
	away *goAwayInfo // set before done closes, if a GOAWAY came
}

type goAwayInfo struct {
	code  http2.ErrCode
	debug string
}

func (g *goAwayInfo) Error() string { return fmt.Sprintf("GOAWAY %v %q", g.code, g.debug) }

// h2Event is a HEADERS block or DATA payload of the response stream.
type h2Event struct {
	headers map[string]string
	data    []byte
}

func dialH2(t *testing.T, addr string) *h2Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &h2Conn{t: t, conn: conn, fr: http2.NewFramer(conn, conn),
		acks: make(chan uint64, 16), resp: make(chan h2Event, 16), done: make(chan struct{})}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go c.read()
	return c
}

func (c *h2Conn) read() {
	defer close(c.done)
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if f.IsAck() {
				c.acks <- binary.BigEndian.Uint64(f.Data[:])
			} else {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			c.mu.Lock()
			c.away = &goAwayInfo{code: f.ErrCode, debug: string(f.DebugData())}
			c.mu.Unlock()
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				return
			}
			h := map[string]string{}
			for _, hf := range fields {
				h[hf.Name] = hf.Value
			}
			c.resp <- h2Event{headers: h}
		case *http2.DataFrame:
			c.resp <- h2Event{data: bytes.Clone(f.Data())}
		}
	}
}

func (c *h2Conn) write(f func() error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = f()
}

// closed is the reason the connection ended: its GOAWAY, or a plain error.
func (c *h2Conn) closed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.away != nil {
		return c.away
	}
	return errors.New("connection closed without GOAWAY")
}

// ping sends one PING and waits for its ACK.
func (c *h2Conn) ping(n uint64) error {
	var data [8]byte
	binary.BigEndian.PutUint64(data[:], n)
	c.write(func() error { return c.fr.WritePing(false, data) })
	select {
	case got := <-c.acks:
		if got != n {
			return fmt.Errorf("ACK %d, want %d", got, n)
		}
		return nil
	case <-c.done:
		return c.closed()
	case <-time.After(10 * time.Second):
		return errors.New("no PING ACK within 10s")
	}
}

// healthCheck calls grpc.health.v1.Health/Check for "" on stream 1.
func (c *h2Conn) healthCheck() (healthpb.HealthCheckResponse_ServingStatus, error) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
		{":authority", "localhost"}, {"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	msg, _ := proto.Marshal(&healthpb.HealthCheckRequest{})
	body := append([]byte{0, 0, 0, 0, 0}, msg...) // uncompressed, length-prefixed
	binary.BigEndian.PutUint32(body[1:5], uint32(len(msg)))
	c.write(func() error {
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		return c.fr.WriteData(1, true, body)
	})
	var payload []byte
	for {
		select {
		case ev := <-c.resp:
			if ev.headers == nil {
				payload = append(payload, ev.data...)
				continue
			}
			st, ok := ev.headers["grpc-status"]
			if !ok {
				continue // the response headers; the trailers carry the status
			}
			if st != "0" || len(payload) < 5 {
				return 0, fmt.Errorf("grpc-status %s %q, payload %d bytes", st, ev.headers["grpc-message"], len(payload))
			}
			var resp healthpb.HealthCheckResponse
			if err := proto.Unmarshal(payload[5:], &resp); err != nil {
				return 0, err
			}
			return resp.GetStatus(), nil
		case <-c.done:
			return 0, c.closed()
		case <-time.After(10 * time.Second):
			return 0, errors.New("no health check answer within 10s")
		}
	}
}
