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

// Process opens a stream on the first connection with room, or on a new
// one. The stream counts until it is released (extprocfilter Filter.Close
// releases it as it closes it) or ctx ends, whichever comes first: the
// request's end cancels it in any case.
func (p *extProcPool) Process(ctx context.Context, opts ...grpc.CallOption) (extprocv3.ExternalProcessor_ProcessClient, error) {
	pc, err := p.acquire()
	if err != nil {
		return nil, err
	}
	st, err := pc.client.Process(ctx, opts...)
	if err != nil {
		p.release(pc)
		return nil, err
	}
	ps := &pooledStream{ExternalProcessor_ProcessClient: st}
	ps.stop = context.AfterFunc(ctx, func() { p.release(pc) })
	ps.release = func() { p.release(pc) }
	return ps, nil
}

// pooledStream is a stream of the pool that the filter can release as it
// closes it: the release then happens on the filter's goroutine, not on the
// goroutine context.AfterFunc starts when the context ends (one per call).
type pooledStream struct {
	extprocv3.ExternalProcessor_ProcessClient
	stop    func() bool
	release func()
}

// Release gives the stream's place on its connection back, unless the
// context's end did already.
func (s *pooledStream) Release() {
	if s.stop() {
		s.release()
	}
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
