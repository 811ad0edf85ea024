package envoy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// countingServer is an httptest server that counts the connections it
// accepted and reports each one it closed.
type countingServer struct {
	*httptest.Server
	conns  atomic.Int32
	closed chan struct{}
}

func startCounting(t *testing.T, tlsOn bool, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{closed: make(chan struct{}, 128)}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed <- struct{}{}
		}
	}
	if tlsOn {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) addr() string { return s.Listener.Addr().String() }

// testPool is an h1Pool for a test cluster, retired at the end of the test.
func testPool(t *testing.T, tlsOn bool, idle time.Duration) *h1Pool {
	t.Helper()
	cl := &cluster{name: "test", connectTimeout: 5 * time.Second, idleTimeout: idle}
	if tlsOn {
		cl.tlsConfig = &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	}
	p := newH1Pool(cl)
	t.Cleanup(p.retire)
	return p
}

func poolRequest(t *testing.T, ctx context.Context, method, addr, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// roundTrip sends one request through p and reads the whole body.
func roundTrip(t *testing.T, p *h1Pool, method, addr, path string) (int, string) {
	t.Helper()
	resp, err := p.RoundTrip(poolRequest(t, t.Context(), method, addr, path))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, string(b)
}

// TestH1PoolReuse: a connection is reused only when its response body was
// read to the end and neither side asked to close.
func TestH1PoolReuse(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	handler := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		case "/big":
			_, _ = io.WriteString(w, big)
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/notmodified":
			w.WriteHeader(http.StatusNotModified)
		default:
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
		}
	}
	// first is how the first exchange ends; the second is always a GET /.
	tests := []struct {
		name      string
		tls       bool
		first     func(t *testing.T, p *h1Pool, addr string)
		wantConns int32
	}{
		{name: "body read to the end", wantConns: 1, first: func(t *testing.T, p *h1Pool, addr string) {
			if code, body := roundTrip(t, p, "GET", addr, "/"); code != 200 || body != "hello" {
				t.Fatalf("got %d %q", code, body)
			}
		}},
		{name: "TLS, body read to the end", tls: true, wantConns: 1, first: func(t *testing.T, p *h1Pool, addr string) {
			if code, body := roundTrip(t, p, "GET", addr, "/"); code != 200 || body != "hello" {
				t.Fatalf("got %d %q", code, body)
			}
		}},
		{name: "HEAD", wantConns: 1, first: func(t *testing.T, p *h1Pool, addr string) {
			if code, body := roundTrip(t, p, "HEAD", addr, "/"); code != 200 || body != "" {
				t.Fatalf("got %d %q", code, body)
			}
		}},
		{name: "204", wantConns: 1, first: func(t *testing.T, p *h1Pool, addr string) {
			if code, body := roundTrip(t, p, "GET", addr, "/empty"); code != 204 || body != "" {
				t.Fatalf("got %d %q", code, body)
			}
		}},
		{name: "304", wantConns: 1, first: func(t *testing.T, p *h1Pool, addr string) {
			if code, body := roundTrip(t, p, "GET", addr, "/notmodified"); code != 304 || body != "" {
				t.Fatalf("got %d %q", code, body)
			}
		}},
		{name: "Connection: close", wantConns: 2, first: func(t *testing.T, p *h1Pool, addr string) {
			if code, body := roundTrip(t, p, "GET", addr, "/close"); code != 200 || body != "bye" {
				t.Fatalf("got %d %q", code, body)
			}
		}},
		{name: "body closed before its end", wantConns: 2, first: func(t *testing.T, p *h1Pool, addr string) {
			resp, err := p.RoundTrip(poolRequest(t, t.Context(), "GET", addr, "/big"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}},
		{name: "cancelled while reading the body", wantConns: 2, first: func(t *testing.T, p *h1Pool, addr string) {
			ctx, cancel := context.WithCancel(t.Context())
			resp, err := p.RoundTrip(poolRequest(t, ctx, "GET", addr, "/big"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
				t.Fatal(err)
			}
			cancel()
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Error("reading the body of a cancelled request succeeded")
			}
			resp.Body.Close()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startCounting(t, tt.tls, handler)
			p := testPool(t, tt.tls, time.Hour)
			tt.first(t, p, srv.addr())
			if code, body := roundTrip(t, p, "GET", srv.addr(), "/"); code != 200 || body != "hello" {
				t.Fatalf("second request: got %d %q", code, body)
			}
			if got := srv.conns.Load(); got != tt.wantConns {
				t.Errorf("server accepted %d connections, want %d", got, tt.wantConns)
			}
		})
	}
}

// rawServer accepts TCP connections on 127.0.0.1 and hands each to serve.
type rawServer struct {
	ln    net.Listener
	conns atomic.Int32
	wg    sync.WaitGroup
}

func startRaw(t *testing.T, serve func(n int32, c net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := s.conns.Add(1)
			s.wg.Go(func() {
				defer c.Close()
				serve(n, c, bufio.NewReader(c))
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) addr() string { return s.ln.Addr().String() }

// readRequest reads one request with its body from br.
func readRequest(br *bufio.Reader) error {
	r, err := http.ReadRequest(br)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, r.Body)
	return err
}

// waitIdleClosed waits until the socket of the pool's idle connection to
// addr shows the upstream's close, so the next request finds it closed.
func waitIdleClosed(t *testing.T, p *h1Pool, addr string) {
	t.Helper()
	v, ok := p.idle.Load(addr)
	if !ok {
		t.Fatal("no idle connection")
	}
	l := v.(*idleList)
	l.mu.Lock()
	n := len(l.conns)
	var c *h1Conn
	if n == 1 {
		c = l.conns[0]
	}
	l.mu.Unlock()
	if c == nil {
		t.Fatalf("%d idle connections, want 1", n)
	}
	for c.peek.check(c.raw) {
		select {
		case <-t.Context().Done():
			t.Fatal("the upstream's close never reached the idle connection")
		case <-time.After(time.Millisecond):
		}
	}
}

// TestH1PoolStaleIdle: an idle connection the upstream closed is not
// handed to the next request, which gets a new connection.
func TestH1PoolStaleIdle(t *testing.T) {
	tests := []struct {
		name string
		tls  bool
	}{{name: "plaintext"}, {name: "TLS", tls: true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every connection serves one request, keep-alive announced,
			// then the test closes it.
			var conns atomic.Int32
			closeAfterOne := make(chan net.Conn, 4)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "hello")
			}))
			srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
				switch st {
				case http.StateNew:
					conns.Add(1)
				case http.StateIdle:
					closeAfterOne <- c
				}
			}
			if tt.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			addr := srv.Listener.Addr().String()
			p := testPool(t, tt.tls, time.Hour)
			if code, body := roundTrip(t, p, "GET", addr, "/"); code != 200 || body != "hello" {
				t.Fatalf("got %d %q", code, body)
			}
			(<-closeAfterOne).Close()
			waitIdleClosed(t, p, addr)
			if code, body := roundTrip(t, p, "GET", addr, "/"); code != 200 || body != "hello" {
				t.Fatalf("after the close: got %d %q", code, body)
			}
			if got := conns.Load(); got != 2 {
				t.Errorf("server accepted %d connections, want 2", got)
			}
		})
	}
}

// TestH1PoolWire covers responses read from raw TCP: 1xx interim
// responses are skipped, a body without Content-Length is read to EOF,
// and unsolicited bytes after a response keep its connection out of the
// pool.
func TestH1PoolWire(t *testing.T) {
	tests := []struct {
		name      string
		response  string // written for each request
		wantBody  string
		wantConns int32
	}{
		{name: "1xx interim responses", wantBody: "ok", wantConns: 1,
			response: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n" +
				"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		{name: "chunked", wantBody: "hello world", wantConns: 1,
			response: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"},
		{name: "no Content-Length: read to EOF", wantBody: "until the end", wantConns: 2,
			response: "HTTP/1.1 200 OK\r\n\r\nuntil the end"},
		{name: "HTTP/1.0 without keep-alive", wantBody: "old", wantConns: 2,
			response: "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nold"},
		{name: "unsolicited bytes after the response", wantBody: "ok", wantConns: 2,
			response: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRaw(t, func(_ int32, c net.Conn, br *bufio.Reader) {
				for readRequest(br) == nil {
					if _, err := io.WriteString(c, tt.response); err != nil {
						return
					}
					if !strings.Contains(tt.response, "Length") && !strings.Contains(tt.response, "chunked") {
						return // the close ends the body
					}
				}
			})
			p := testPool(t, false, time.Hour)
			for i := range 2 {
				if code, body := roundTrip(t, p, "GET", srv.addr(), "/"); code != 200 || body != tt.wantBody {
					t.Fatalf("request %d: got %d %q, want 200 %q", i, code, body, tt.wantBody)
				}
			}
			if got := srv.conns.Load(); got != tt.wantConns {
				t.Errorf("server accepted %d connections, want %d", got, tt.wantConns)
			}
		})
	}
}

// TestH1PoolStreams: each chunk of a streamed body reaches the reader
// while the upstream still holds the next one.
func TestH1PoolStreams(t *testing.T) {
	next := make(chan struct{})
	srv := startCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			if i > 0 {
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
			}
			_, _ = io.WriteString(w, "data: "+string(rune('a'+i))+"\n\n")
			w.(http.Flusher).Flush()
		}
	})
	p := testPool(t, false, time.Hour)
	resp, err := p.RoundTrip(poolRequest(t, t.Context(), "GET", srv.addr(), "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		if i > 0 {
			next <- struct{}{}
		}
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			ev.WriteString(line)
			if line == "\n" {
				break
			}
		}
		if want := "data: " + string(rune('a'+i)) + "\n\n"; ev.String() != want {
			t.Fatalf("event %d = %q, want %q", i, ev.String(), want)
		}
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the events: %q, %v", rest, err)
	}
}

// TestH1PoolIdleTimeoutAndRetire: an idle connection is closed after the
// cluster's idle timeout; a retired pool closes its idle connections and,
// when their exchanges end, the ones in use.
func TestH1PoolIdleTimeoutAndRetire(t *testing.T) {
	t.Run("idle timeout", func(t *testing.T) {
		srv := startCounting(t, false, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })
		p := testPool(t, false, 20*time.Millisecond)
		roundTrip(t, p, "GET", srv.addr(), "/")
		<-srv.closed // closed by the pool, idle
		roundTrip(t, p, "GET", srv.addr(), "/")
		if got := srv.conns.Load(); got != 2 {
			t.Errorf("server accepted %d connections, want 2", got)
		}
	})
	t.Run("retire", func(t *testing.T) {
		release := make(chan struct{})
		srv := startCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				w.(http.Flusher).Flush()
				<-release
			}
			_, _ = io.WriteString(w, "hello")
		})
		p := testPool(t, false, time.Hour)
		resp, err := p.RoundTrip(poolRequest(t, t.Context(), "GET", srv.addr(), "/slow"))
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, p, "GET", srv.addr(), "/") // a second connection, left idle
		p.retire()
		<-srv.closed // the idle one
		close(release)
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "hello" {
			t.Fatalf("body of the exchange in flight: %q, %v", b, err)
		}
		resp.Body.Close()
		<-srv.closed // the one in use, at the end of its exchange
		if n := len(srv.closed); n != 0 || srv.conns.Load() != 2 {
			t.Errorf("%d connections accepted, %d more closed", srv.conns.Load(), n)
		}
	})
}

// TestH1PoolEarlyResponse: an upstream that answers before reading the
// whole request body and then closes (net/http's server discards at most
// 256 KiB of an unread body) makes the write fail; its answer is still
// the response, as Envoy forwards a response that comes before the
// request is complete, and the connection is not reused.
func TestH1PoolEarlyResponse(t *testing.T) {
	const size = 64 << 20 // more than the loopback socket buffers hold
	tests := []struct {
		name string
		send func(t *testing.T, p *h1Pool, addr string) (*http.Response, error)
	}{
		{name: "streamed body", send: func(t *testing.T, p *h1Pool, addr string) (*http.Response, error) {
			req := poolRequest(t, t.Context(), "POST", addr, "/")
			req.Body = io.NopCloser(io.LimitReader(zeros{}, size))
			req.ContentLength = -1
			return p.RoundTrip(req)
		}},
		{name: "written directly", send: func(t *testing.T, p *h1Pool, addr string) (*http.Response, error) {
			x := h1TestExchange("POST", "/", "h", "content-type:application/json", make([]byte, size))
			hr, ok := x.h1Request(t.Context(), addr)
			if !ok {
				t.Fatal("the request does not take the direct way")
			}
			return p.roundTripDirect(hr)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/" {
					w.WriteHeader(http.StatusRequestEntityTooLarge)
				}
				_, _ = io.WriteString(w, "too big")
			})
			p := testPool(t, false, time.Hour)
			resp, err := tt.send(t, p, srv.addr())
			if err != nil {
				t.Fatalf("early response lost: %v", err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || string(b) != "too big" || err != nil {
				t.Fatalf("got %d %q, %v; want 413 %q", resp.StatusCode, b, err, "too big")
			}
			if code, body := roundTrip(t, p, "GET", srv.addr(), "/next"); code != 200 || body != "too big" {
				t.Fatalf("next request: got %d %q", code, body)
			}
			if got := srv.conns.Load(); got != 2 {
				t.Errorf("server accepted %d connections, want 2", got)
			}
		})
	}
}

// zeros reads zero bytes without end.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestH1PoolDialErrors: connection failures are dialErrors, so the router
// reports them as UF.
func TestH1PoolDialErrors(t *testing.T) {
	tests := []struct {
		name string
		tls  bool
		addr func(t *testing.T) string
	}{
		{name: "refused", addr: closedAddr},
		{name: "TLS handshake", tls: true, addr: func(t *testing.T) string {
			return startCounting(t, false, func(http.ResponseWriter, *http.Request) {}).addr()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(t, tt.tls, time.Hour)
			_, err := p.RoundTrip(poolRequest(t, t.Context(), "GET", tt.addr(t), "/"))
			var de *dialError
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T), want a dialError", err, err)
			}
		})
	}
}

// TestResetBeforeResponse follows Envoy for a request whose connection
// closes before any response byte (rules.go, "Upstream HTTP/1.1
// connections"): 503, flag UC, reset reason connection termination;
// retried under retry_on "reset", not under "reset-before-request" (the
// request was sent).
func TestResetBeforeResponse(t *testing.T) {
	tests := []struct {
		retryOn   string
		wantCalls int32
		wantBody  string
	}{
		{retryOn: "reset-before-request", wantCalls: 1,
			wantBody: "upstream connect error or disconnect/reset before headers. reset reason: connection termination"},
		{retryOn: "reset", wantCalls: 2,
			wantBody: "upstream connect error or disconnect/reset before headers. retried and the latest reset reason: connection termination"},
	}
	for _, tt := range tests {
		t.Run(tt.retryOn, func(t *testing.T) {
			srv := startRaw(t, func(_ int32, _ net.Conn, br *bufio.Reader) {
				_ = readRequest(br) // then close without a response
			})
			e := newEnv(t, nil, setup{
				routes: []*routev3.Route{clusterRoute("/", "toolsvc_a", func(a *routev3.RouteAction) {
					a.RetryPolicy = &routev3.RetryPolicy{RetryOn: tt.retryOn, NumRetries: wrapperspb.UInt32(1),
						RetryBackOff: &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(time.Millisecond)}}
				})},
				clusters: []*clusterv3.Cluster{staticCluster(t, "toolsvc_a", srv.addr())},
			})
			got := e.do("POST", "/", "body", nil)
			if got.status != 503 || got.body != tt.wantBody || srv.conns.Load() != tt.wantCalls {
				t.Fatalf("got %d %q after %d connections, want 503 %q after %d", got.status, got.body, srv.conns.Load(), tt.wantBody, tt.wantCalls)
			}
		})
	}
}

// TestClusterIdleTimeout: the pool's idle timeout is the cluster's
// common_http_protocol_options.idle_timeout, 1h when unset, none when 0.
func TestClusterIdleTimeout(t *testing.T) {
	tests := []struct {
		name string
		idle *durationpb.Duration
		want time.Duration
	}{
		{name: "unset", want: time.Hour},
		{name: "30s", idle: durationpb.New(30 * time.Second), want: 30 * time.Second},
		{name: "0 disables", idle: durationpb.New(0), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := staticCluster(t, "toolsvc_a", "127.0.0.1:1")
			if tt.idle != nil {
				c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: mustAny(t, &upstreamhttpv3.HttpProtocolOptions{
					CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: tt.idle},
					UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
						ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{}}},
				})}
			}
			cl, err := compileCluster(c)
			if err != nil {
				t.Fatal(err)
			}
			if cl.idleTimeout != tt.want {
				t.Fatalf("idle timeout %v, want %v", cl.idleTimeout, tt.want)
			}
			p, ok := newTransport(cl).(*h1Pool)
			if !ok {
				t.Fatalf("pool %T, want an h1Pool", newTransport(cl))
			}
			if p.timeout != tt.want {
				t.Fatalf("pool idle timeout %v, want %v", p.timeout, tt.want)
			}
		})
	}
}

// TestH1PoolMostRecentFirst: the connection released last is the one the
// next request takes, so connections left over from a burst can idle out.
func TestH1PoolMostRecentFirst(t *testing.T) {
	srv := startCounting(t, false, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.RemoteAddr)
	})
	p := testPool(t, false, time.Hour)
	var resps [2]*http.Response
	for i := range resps {
		resp, err := p.RoundTrip(poolRequest(t, t.Context(), "GET", srv.addr(), "/"))
		if err != nil {
			t.Fatal(err)
		}
		resps[i] = resp // held: the next request needs another connection
	}
	var peers [2]string
	for i, resp := range resps {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		peers[i] = string(b)
	}
	if peers[0] == peers[1] {
		t.Fatalf("both requests on one connection %s", peers[0])
	}
	if _, got := roundTrip(t, p, "GET", srv.addr(), "/"); got != peers[1] {
		t.Errorf("next request on %s, want %s (released last; first was %s)", got, peers[1], peers[0])
	}
}
