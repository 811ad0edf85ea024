package envoy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// h1Pool is the connection pool of an HTTP/1.1 cluster, plaintext or TLS.
// Like Envoy's HTTP/1.1 pool and codec, which run in the worker's event
// loop (source/common/http/http1/conn_pool.cc, source/common/http/codec_client.cc,
// source/common/http/http1/codec_impl.cc), the goroutine that sends a
// request writes it and reads its response itself: no goroutine per
// connection and no hand-off per request, unlike net/http's Transport,
// whose persistConn passes every request to a writeLoop goroutine and every
// response back from a readLoop goroutine. The wire format is net/http's
// ((*http.Request).Write, or the same bytes written from the header map by
// h1Request.write; http.ReadResponse).
//
// A connection goes back to the idle pool only when its response body was
// read to the end and neither side asked to close (rules.go, "Upstream
// HTTP/1.1 connections").
type h1Pool struct {
	dial    func(ctx context.Context, addr string) (*h1Conn, error)
	idle    sync.Map      // host ("addr:port") → *idleList, at most h1MaxIdle connections
	timeout time.Duration // idle timeout; 0: none
	retired atomic.Bool
}

const (
	// h1MaxIdle bounds the idle connections per endpoint, as
	// http.Transport's MaxIdleConnsPerHost did before this pool.
	h1MaxIdle = 64
	// h1MaxHeaderBytes bounds the response headers (1xx responses
	// included), as http.Transport's MaxResponseHeaderBytes default does.
	h1MaxHeaderBytes = 10 << 20
)

func newH1Pool(cl *cluster) *h1Pool {
	p := &h1Pool{timeout: cl.idleTimeout}
	dialer := &net.Dialer{Timeout: cl.connectTimeout}
	var tc *tls.Config
	if cl.tlsConfig != nil {
		tc = cl.tlsConfig.Clone()
	}
	p.dial = func(ctx context.Context, addr string) (*h1Conn, error) {
		nc, err := dialUpstream(ctx, dialer, tc, addr)
		if err != nil {
			return nil, err
		}
		// The idle check peeks at the TCP socket, under any TLS.
		sock := nc
		if t, ok := nc.(*tls.Conn); ok {
			sock = t.NetConn()
		}
		sc, ok := sock.(syscall.Conn)
		if !ok {
			_ = nc.Close()
			return nil, &dialError{err: fmt.Errorf("dial %s: %T is not a socket", addr, sock)}
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			_ = nc.Close()
			return nil, &dialError{err: err}
		}
		c := &h1Conn{pool: p, host: addr, nc: nc, raw: raw}
		c.closeFn = c.close
		c.br = bufio.NewReader(c)
		c.bw = bufio.NewWriter(c)
		return c, nil
	}
	return p
}

// h1Conn is one upstream connection. Only the goroutine whose exchange
// holds it uses it, except for the cancellation and idle-timeout callbacks,
// which only close it.
type h1Conn struct {
	pool      *h1Pool
	host      string
	nc        net.Conn        // *net.TCPConn or *tls.Conn
	raw       syscall.RawConn // the TCP socket, for the idle check
	br        *bufio.Reader   // reads through c (readLimit)
	bw        *bufio.Writer   // writes through c (werr)
	readLimit int64
	idleTimer *time.Timer // closes the connection after the idle timeout
	peek      idlePeek
	closeFn   func() // c.close, made once: the cancellation callback of each exchange
	werr      error  // the first error writing to the socket
}

// idlePeek is the state of the idle check of one connection (check, per
// platform).
type idlePeek struct {
	buf  [1]byte
	idle bool
	fn   func(fd uintptr) bool
}

// Read reads from the connection within readLimit, which bounds the
// response headers.
func (c *h1Conn) Read(p []byte) (int, error) {
	if c.readLimit <= 0 {
		return 0, fmt.Errorf("response headers from %s exceed %d bytes", c.host, h1MaxHeaderBytes)
	}
	if int64(len(p)) > c.readLimit {
		p = p[:c.readLimit]
	}
	n, err := c.nc.Read(p)
	c.readLimit -= int64(n)
	return n, err
}

// Write writes to the connection and keeps its first error, which tells a
// failed socket from a failed request body (exchange).
func (c *h1Conn) Write(p []byte) (int, error) {
	n, err := c.nc.Write(p)
	if err != nil && c.werr == nil {
		c.werr = err
	}
	return n, err
}

func (c *h1Conn) close() { _ = c.nc.Close() }

func (c *h1Conn) stopIdleTimer() {
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
}

// idleList is the idle connections to one endpoint, most recently used
// last. Like Envoy's pool, whose newStreamImpl takes ready_clients_.front()
// and moves a client that becomes ready to the front of that list
// (source/common/conn_pool/conn_pool_base.cc, LinkedObject in
// source/common/common/linked_object.h), the most recently used
// connection is taken first, so after a burst the extra connections reach
// their idle timeout. The lock guards a push or a pop, never I/O.
type idleList struct {
	mu    sync.Mutex
	conns []*h1Conn
}

func (p *h1Pool) list(host string) *idleList {
	if v, ok := p.idle.Load(host); ok {
		return v.(*idleList)
	}
	v, _ := p.idle.LoadOrStore(host, &idleList{})
	return v.(*idleList)
}

// get returns an idle connection to host that is still usable, or nil.
func (p *h1Pool) get(host string) *h1Conn {
	v, ok := p.idle.Load(host)
	if !ok {
		return nil
	}
	l := v.(*idleList)
	for {
		l.mu.Lock()
		n := len(l.conns)
		if n == 0 {
			l.mu.Unlock()
			return nil
		}
		c := l.conns[n-1]
		l.conns[n-1] = nil
		l.conns = l.conns[:n-1]
		l.mu.Unlock()
		if c.idleTimer != nil && !c.idleTimer.Stop() {
			continue // the idle timeout fired: its callback closes c
		}
		if !c.idleUsable() {
			c.close()
			continue
		}
		return c
	}
}

// put returns a connection whose exchange ended cleanly to the idle pool,
// or closes it when the pool is full or retired.
func (p *h1Pool) put(c *h1Conn) {
	l := p.list(c.host)
	l.mu.Lock()
	if p.retired.Load() || len(l.conns) >= h1MaxIdle {
		l.mu.Unlock()
		c.close()
		return
	}
	switch {
	case p.timeout <= 0:
	case c.idleTimer == nil:
		c.idleTimer = time.AfterFunc(p.timeout, c.idleTimeout)
	default:
		c.idleTimer.Reset(p.timeout)
	}
	l.conns = append(l.conns, c)
	l.mu.Unlock()
}

// idleTimeout closes an idle connection and takes it out of its list
// (CodecClient's idle timer).
func (c *h1Conn) idleTimeout() {
	l := c.pool.list(c.host)
	l.mu.Lock()
	for i, ic := range l.conns {
		if ic == c {
			n := copy(l.conns[i:], l.conns[i+1:])
			l.conns[i+n] = nil
			l.conns = l.conns[:i+n]
			break
		}
	}
	l.mu.Unlock()
	c.close()
}

// retire closes the idle connections and makes every connection still in
// use close when its exchange ends: the pool's cluster is gone or changed.
func (p *h1Pool) retire() {
	p.retired.Store(true)
	p.idle.Range(func(_, v any) bool {
		l := v.(*idleList)
		l.mu.Lock()
		conns := l.conns
		l.conns = nil
		l.mu.Unlock()
		for _, c := range conns {
			c.stopIdleTimer()
			c.close()
		}
		return true
	})
}

// idleUsable reports whether an idle connection can carry a request:
// nothing unread is buffered and the socket has nothing to read, which on
// an idle connection means the upstream closed it (FIN), reset it, or sent
// bytes no request asked for. Envoy's event loop sees such an idle
// connection close and removes it from the pool
// (source/common/http/codec_client.cc CodecClient::onEvent,
// source/common/conn_pool/conn_pool_base.cc onConnectionEvent); here the
// check happens before reuse, one non-blocking MSG_PEEK on the socket. On
// a TLS connection any readable byte counts too (a close_notify alert comes
// with the FIN; post-handshake messages arrive before the first response,
// which reads them), so an idle TLS connection with data waiting is
// replaced rather than decrypted.
func (c *h1Conn) idleUsable() bool {
	return c.br.Buffered() == 0 && c.peek.check(c.raw)
}

// RoundTrip sends req on an idle or new connection and reads the response
// headers. The connection stays with the response body: reading it to the
// end releases the connection to the pool, closing it earlier closes the
// connection. Cancelling req's context closes the connection at any point
// of the exchange (Envoy resets the upstream stream, which closes an
// HTTP/1.1 connection).
func (p *h1Pool) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := validRequest(req); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return p.roundTrip(req.Context(), req.URL.Host, req, nil)
}

// roundTripDirect is RoundTrip for a request written from the header map
// (h1write.go); exchange.h1Request made the checks validRequest makes.
func (p *h1Pool) roundTripDirect(hr *h1Request) (*http.Response, error) {
	return p.roundTrip(hr.ctx, hr.addr, &hr.resp, hr)
}

// roundTrip is RoundTrip after validRequest: req is written, unless hr is
// set, which is then written instead (req then only gives the method).
func (p *h1Pool) roundTrip(ctx context.Context, host string, req *http.Request, hr *h1Request) (*http.Response, error) {
	c := p.get(host)
	if c == nil {
		var err error
		if c, err = p.dial(ctx, host); err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
	}
	stop := context.AfterFunc(ctx, c.closeFn)
	resp, early, err := c.exchange(req, hr)
	if err != nil {
		stop()
		c.close()
		return nil, err
	}
	closeAfter := early || resp.Close || req.Close || resp.StatusCode == http.StatusSwitchingProtocols
	if resp.Body == http.NoBody {
		c.release(stop, closeAfter)
		return resp, nil
	}
	resp.Body = &h1Body{ctx: ctx, c: c, body: resp.Body, stop: stop, closeAfter: closeAfter}
	return resp, nil
}

// exchange writes req and reads the response headers, skipping interim
// 1xx responses as http.Transport did (101 is final). early reports a
// response that came although the request could not be written whole.
func (c *h1Conn) exchange(req *http.Request, hr *h1Request) (resp *http.Response, early bool, err error) {
	if hr != nil {
		err = hr.write(c.bw)
	} else {
		err = req.Write(c.bw)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		werr := fmt.Errorf("write request to %s: %w", c.host, err)
		if c.werr == nil {
			return nil, false, werr // not the socket: the request body failed
		}
		// The socket failed while the request was being written: the
		// upstream closed or reset the connection, or the request's
		// cancellation closed it (then the read fails at once). One
		// that answers before reading the whole body (413, 401) and then
		// closes has its answer waiting: Envoy's codec reads a response
		// while the request is still encoded and forwards it, closing the
		// connection after it (ConnPoolImpl::onResponseComplete, "response
		// before request complete"), as net/http's Transport did too.
		if resp, rerr := c.readResponse(req); rerr == nil {
			return resp, true, nil
		}
		return nil, false, werr
	}
	resp, err = c.readResponse(req)
	return resp, false, err
}

// readResponse reads the response headers, skipping interim 1xx responses.
func (c *h1Conn) readResponse(req *http.Request) (*http.Response, error) {
	c.readLimit = h1MaxHeaderBytes
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, fmt.Errorf("read response from %s: %w", c.host, err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		c.readLimit = math.MaxInt64
		return resp, nil
	}
}

// release ends an exchange: the connection goes back to the pool unless a
// side asked to close or the request's context closed it (stop reports
// whether the cancellation callback was still pending).
func (c *h1Conn) release(stop func() bool, closeAfter bool) {
	if stop() && !closeAfter {
		c.pool.put(c)
		return
	}
	c.close()
}

// h1Body is a response body that owns its connection until the end.
type h1Body struct {
	ctx        context.Context
	c          *h1Conn
	body       io.ReadCloser
	stop       func() bool
	closeAfter bool
	done       atomic.Bool // the exchange ended: the connection is released or closed
	eof        atomic.Bool // ... at the end of the body
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done.Load() {
		if b.eof.Load() {
			return 0, io.EOF
		}
		return 0, http.ErrBodyReadAfterClose
	}
	// Once the request is cancelled its body ends there, whatever is
	// already buffered (the callback that closes the connection runs on
	// its own goroutine and may land later), as Envoy resets the stream.
	if err := b.ctx.Err(); err != nil {
		if b.done.CompareAndSwap(false, true) {
			b.stop()
			b.c.close()
		}
		return 0, err
	}
	n, err := b.body.Read(p)
	if err != nil && b.done.CompareAndSwap(false, true) {
		if err == io.EOF {
			b.eof.Store(true)
			b.c.release(b.stop, b.closeAfter)
		} else {
			b.stop()
			b.c.close()
		}
	}
	return n, err
}

// Close before the end of the body closes the connection: what is left of
// the response cannot be skipped without reading it (Envoy resets the
// stream, closing an HTTP/1.1 connection).
func (b *h1Body) Close() error {
	if b.done.CompareAndSwap(false, true) {
		b.stop()
		b.c.close()
	}
	return nil
}

// validRequest applies the checks http.Transport made before sending a
// request, with the httpguts functions it uses, so that a request it
// refused is refused here too.
func validRequest(req *http.Request) error {
	if req.URL == nil || req.URL.Host == "" {
		return errors.New("http: no Host in request URL")
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	if !httpguts.ValidHeaderFieldName(req.Method) {
		return fmt.Errorf("net/http: invalid method %q", req.Method)
	}
	return nil
}
