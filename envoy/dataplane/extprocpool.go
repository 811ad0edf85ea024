package dataplane

import (
	"context"
	"errors"
	"sync"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
)

// extProcPool is the ext_proc client's HTTP/2 connection pool. Envoy opens
// at most max_concurrent_streams streams on one connection (1024 unless
// http2_protocol_options set it, rules.MaxConcurrentStreams) and opens
// another connection when every one is full; grpc-go puts every stream of
// a ClientConn on one connection, so the pool keeps a ClientConn per
// connection and opens the next when the others carry the maximum.
type extProcPool struct {
	dial func() (*grpc.ClientConn, error)
	max  int

	mu     sync.Mutex
	conns  []*pooledConn
	closed bool
}

type pooledConn struct {
	cc     *grpc.ClientConn
	client extprocv3.ExternalProcessorClient
	active int // streams open on it; guarded by the pool's mu
}

// Open opens a stream on the first connection with room, or on a new
// one (extprocfilter.Opener). The stream counts until release is called
// (extprocfilter Filter.Close calls it as it closes the stream, on its own
// goroutine) or ctx ends, whichever comes first; only the second starts a
// goroutine (context.AfterFunc).
func (p *extProcPool) Open(ctx context.Context, opts ...grpc.CallOption) (extprocv3.ExternalProcessor_ProcessClient, func(), error) {
	pc, err := p.acquire()
	if err != nil {
		return nil, nil, err
	}
	st, err := pc.client.Process(ctx, opts...)
	if err != nil {
		p.release(pc)
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { p.release(pc) })
	return st, func() {
		if stop() {
			p.release(pc)
		}
	}, nil
}

func (p *extProcPool) acquire() (*pooledConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("ext_proc connection pool closed")
	}
	for _, pc := range p.conns {
		if pc.active < p.max {
			pc.active++
			return pc, nil
		}
	}
	cc, err := p.dial()
	if err != nil {
		return nil, err
	}
	pc := &pooledConn{cc: cc, client: extprocv3.NewExternalProcessorClient(cc), active: 1}
	p.conns = append(p.conns, pc)
	return pc, nil
}

func (p *extProcPool) release(pc *pooledConn) {
	p.mu.Lock()
	pc.active--
	p.mu.Unlock()
}

// close closes every connection.
func (p *extProcPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, pc := range p.conns {
		errs = append(errs, pc.cc.Close())
	}
	return errors.Join(errs...)
}
