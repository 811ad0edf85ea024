// Package h2grpc is a gRPC client over cleartext HTTP/2 (h2c with prior
// knowledge) that behaves like Envoy's own gRPC client on an HTTP/2
// connection pool for one host: one reader goroutine per connection
// demultiplexes the frames, DATA is reassembled into whole gRPC messages
// before the stream's receiver is woken, writes are serialized by a mutex
// with one flush per message, and connections are opened, drained and
// replaced as Envoy's pool does. envoy/rules.go ("ext_proc gRPC client
// connection") lists what is emulated and the Envoy source each point
// follows.
//
// [ClientConn] implements grpc.ClientConnInterface, so generated clients
// work on it unchanged. Only what the local data plane uses is honoured:
// the call options ForceCodecV2, MaxCallRecvMsgSize and MaxCallSendMsgSize,
// and outgoing metadata from the context; other call options are ignored.
package h2grpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Options configures a [ClientConn].
type Options struct {
	// Target is the server's host:port.
	Target string
	// Authority is the :authority of every stream (default Target). Envoy
	// sends envoy_grpc.authority, or the cluster name without it
	// (source/common/grpc/async_client_impl.cc AsyncStreamImpl::initialize).
	Authority string
	// StreamWindow and ConnWindow are the initial HTTP/2 receive windows of
	// each stream and of each connection (default 65535, the protocol's).
	StreamWindow, ConnWindow uint32
	// Keepalive is the connections' PING keepalive; a zero or negative
	// Interval sends no PINGs.
	Keepalive Keepalive
	// ConnectTimeout bounds a connection attempt (default 5s, cluster.proto
	// connect_timeout's default).
	ConnectTimeout time.Duration
	// Logger receives connection events at debug level; nil discards.
	Logger *slog.Logger
	// Dial opens a connection (default a TCP dial), for tests.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

const (
	defaultWindow         = 65535
	defaultConnectTimeout = 5 * time.Second
	maxWindow             = 1<<31 - 1
)

// ClientConn is a pool of HTTP/2 connections to one server. Streams go on
// the first connection that is neither draining nor at the server's
// SETTINGS_MAX_CONCURRENT_STREAMS; when there is none, a new connection is
// opened for them.
type ClientConn struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex // guards conns and closed; taken before any conn's mu
	conns  []*conn    // connecting or open, not draining
	closed bool
}

var _ grpc.ClientConnInterface = (*ClientConn)(nil)

// NewClient returns a connection pool for opts.Target. No connection is
// opened until the first stream, as Envoy's pool connects on demand.
func NewClient(opts Options) (*ClientConn, error) {
	if opts.Target == "" {
		return nil, errors.New("h2grpc: no target address")
	}
	if opts.Authority == "" {
		opts.Authority = opts.Target
	}
	for _, w := range []*uint32{&opts.StreamWindow, &opts.ConnWindow} {
		if *w == 0 {
			*w = defaultWindow
		}
		if *w < defaultWindow || *w > maxWindow {
			return nil, fmt.Errorf("h2grpc: window %d outside [%d, %d]", *w, defaultWindow, maxWindow)
		}
	}
	// Envoy's KeepaliveSettings require a timeout, and any interval set,
	// of at least 1ms (api/envoy/config/core/v3/protocol.proto); a zero
	// timeout would close the connection at its first PING.
	if ka := opts.Keepalive; ka.Interval > 0 && (ka.Interval < time.Millisecond || ka.Timeout < time.Millisecond) {
		return nil, fmt.Errorf("h2grpc: keepalive interval %v and timeout %v must each be at least 1ms", ka.Interval, ka.Timeout)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = defaultConnectTimeout
	}
	if opts.Dial == nil {
		opts.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ClientConn{opts: opts, log: log.With("target", opts.Target)}, nil
}

// errClosing is grpc-go's ErrClientConnClosing.
var errClosing = status.Error(codes.Canceled, "grpc: the client connection is closing")

// reserve takes a stream slot on a usable connection, opening one if there
// is none.
func (cc *ClientConn) reserve() (*conn, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return nil, errClosing
	}
	for _, c := range cc.conns {
		if c.tryReserve() {
			return c, nil
		}
	}
	c := newConn(cc)
	c.active = 1
	cc.conns = append(cc.conns, c)
	go c.connect()
	return c, nil
}

// remove takes c out of the connections new streams may use.
func (cc *ClientConn) remove(c *conn) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.conns = slices.DeleteFunc(cc.conns, func(x *conn) bool { return x == c })
}

// Close closes every connection; their open streams fail with Canceled,
// grpc-go's ErrClientConnClosing.
func (cc *ClientConn) Close() error {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		return nil
	}
	cc.closed = true
	conns := cc.conns
	cc.conns = nil
	cc.mu.Unlock()
	for _, c := range conns {
		c.fail(errClosing)
	}
	return nil
}

// NewStream opens a stream for method, e.g. "/pkg.Service/Method".
func (cc *ClientConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s := &stream{ctx: ctx, method: method, codec: protoCodec, maxRecv: defaultMaxRecv, maxSend: defaultMaxSend}
	s.applyOptions(opts)
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	for {
		c, err := cc.reserve()
		if err != nil {
			return nil, err
		}
		select {
		case <-c.ready:
		case <-ctx.Done():
			c.release()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		retry, err := c.start(s)
		if retry {
			continue // the connection began draining: another one
		}
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// Invoke is a unary call on a stream, as grpc-go's.
func (cc *ClientConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{}, method, opts...)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(args); err != nil && !errors.Is(err, errDone) {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	if err := cs.RecvMsg(reply); err != nil {
		if errors.Is(err, errDone) {
			return status.Error(codes.Internal, "cardinality violation: received no response message from non-streaming RPC")
		}
		return err
	}
	if err := cs.RecvMsg(reply); !errors.Is(err, errDone) {
		if err == nil {
			return status.Error(codes.Internal, "cardinality violation: expected <EOF> for non server-streaming RPCs, but received another message")
		}
		return err
	}
	return nil
}
