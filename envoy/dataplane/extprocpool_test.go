package dataplane

import (
	"context"
	"net"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// peerRecorder is an ExternalProcessor that reports the client address of
// every stream it serves and holds the stream until the client ends it.
type peerRecorder struct {
	extprocv3.UnimplementedExternalProcessorServer
	opened chan string
}

func (p *peerRecorder) Process(ps extprocv3.ExternalProcessor_ProcessServer) error {
	pr, _ := peer.FromContext(ps.Context())
	p.opened <- pr.Addr.String()
	<-ps.Context().Done()
	return nil
}

// TestExtProcStreamsPerConnection: like Envoy's HTTP/2 pool, the data
// plane's ext_proc client opens at most max_concurrent_streams (1024)
// streams on one connection and opens another for the 1025th; a stream
// that ends makes room on its connection again (rules.go, "ext_proc gRPC
// client connection").
func TestExtProcStreamsPerConnection(t *testing.T) {
	if rules.MaxConcurrentStreams != 1024 {
		t.Fatalf("MaxConcurrentStreams %d, want Envoy's default 1024", rules.MaxConcurrentStreams)
	}
	n := rules.MaxConcurrentStreams + 1
	srv := &peerRecorder{opened: make(chan string, n+1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	d, err := New(Options{ExtProcTarget: ln.Addr().String(), Keepalive: Keepalive{Interval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })

	open := func() context.CancelFunc {
		ctx, cancel := context.WithCancel(t.Context())
		if _, _, err := d.client.Processor.Open(ctx); err != nil {
			cancel()
			t.Fatal(err)
		}
		return cancel
	}
	seen := func() string {
		select {
		case p := <-srv.opened:
			return p
		case <-time.After(time.Minute):
			t.Fatal("the server did not see the stream within a minute")
			return ""
		}
	}
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		cancels[i] = open()
	}
	perPeer := map[string]int{}
	for range n {
		perPeer[seen()]++
	}
	var full, other string
	for p, c := range perPeer {
		switch c {
		case rules.MaxConcurrentStreams:
			full = p
		case 1:
			other = p
		}
	}
	if len(perPeer) != 2 || full == "" || other == "" {
		t.Fatalf("streams per connection %v, want %d on one and 1 on another", perPeer, rules.MaxConcurrentStreams)
	}
	// One stream of the full connection ends: the next stream goes there,
	// not to a third connection.
	cancels[0]()
	waitFor(t, "the ended stream's release", func() bool {
		d.pool.mu.Lock()
		defer d.pool.mu.Unlock()
		return d.pool.conns[0].active < rules.MaxConcurrentStreams
	})
	next := open()
	defer next()
	if p := seen(); p != full {
		t.Fatalf("stream after one ended went to %s, want the first connection %s", p, full)
	}
	if got := d.pool.connections(); got != 2 {
		t.Fatalf("%d connections, want 2", got)
	}
	for _, c := range cancels[1:] {
		c()
	}
}

// connections is the number of connections the pool opened.
func (p *extProcPool) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}
