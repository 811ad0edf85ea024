package extproc

import (
	"context"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// BenchmarkHandler is the server's own work for the headline scripts of
// BenchmarkVsBaseline, gRPC left out: one request (newRequest, each message
// of the script through next, finish) per iteration, with the wire codec
// installed as Process runs it.
func BenchmarkHandler(b *testing.B) {
	srv10, srv10k := benchServer(b, 10), benchServer(b, 10_000)
	for _, c := range []struct {
		name string
		srv  *Server
		seq  []*extprocv3.ProcessingRequest
	}{
		{"routed-call/native", srv10, callSeq},
		{"tools-list/10", srv10, listSeq},
		{"tools-list/10k/gzip", srv10k, listSeqAccepting("gzip, deflate")},
	} {
		c.srv.GRPCServerOptions()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				x := c.srv.newRequest(context.Background())
				for _, m := range c.seq {
					if x.next(m) == nil {
						b.Fatal("no answer")
					}
				}
				x.finish()
			}
		})
	}
}
