package extproc

import (
	"context"
	"strconv"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// BenchmarkHandler is the server's own work for the headline scripts of
// BenchmarkVsBaseline, gRPC left out: one request (newRequest, each message
// of the script through next, finish) per iteration, with the wire codec
// installed and the context of a real stream (with the metadata Envoy
// sends) as Process runs it.
func BenchmarkHandler(b *testing.B) {
	srv10, srv10k := benchServer(b, 10), benchServer(b, 10_000)
	ctx := streamContext(b)
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
				x := c.srv.newRequest(ctx)
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

// ctxServer hands out the context of the one stream it serves.
type ctxServer struct {
	extprocv3.UnimplementedExternalProcessorServer
	got chan context.Context
}

func (s ctxServer) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	s.got <- stream.Context()
	_, err := stream.Recv()
	return err
}

// streamContext is the context of a gRPC stream on loopback that carries
// the listener level, as Envoy's streams do (wire.ListenerLevelMetadata).
func streamContext(b *testing.B) context.Context {
	b.Helper()
	s := ctxServer{got: make(chan context.Context, 1)}
	client := serve(b, nil, func(gs *grpc.Server) { extprocv3.RegisterExternalProcessorServer(gs, s) })
	ctx := metadata.AppendToOutgoingContext(b.Context(), wire.ListenerLevelMetadata, strconv.Itoa(wire.ListenerLevel))
	stream, err := client.Process(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		b.Fatal(err)
	}
	return <-s.got
}
