// Package extproc is toolmesh's Envoy external processor: the
// envoy.service.ext_proc.v3.ExternalProcessor gRPC server that sees every
// request to /mcp/{route}. It answers protocol methods itself (as Envoy
// ImmediateResponses), and for a tools/call it tells Envoy which Tool Service
// cluster to use, rewriting :path and body; on the way back it turns the Tool
// Service reply into an MCP result. Requests for federated MCP servers
// (tools/call of their tools, resources/read, prompts/get,
// completion/complete) are routed the same way to the owning server and its
// answer passed back (federated.go).
//
// One gRPC Process stream is one HTTP request. All per-request state lives in
// the stream's goroutine; the route snapshot is captured once, in the
// request-headers phase, and used by every later phase of that request.
//
// The server relies on these ext_proc filter settings (ADR 0001): request
// headers SEND, request body BUFFERED, response headers SEND, response body
// BUFFERED, trailers SKIP, failure_mode_allow false, a message_timeout of
// seconds, and metadata_options.receiving_namespaces.untyped containing
// wire.MetadataNamespace. On an mTLS listener, request_attributes
// carries the caller's SPIFFE ID (mesh.go).
package extproc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolmesh/toolmesh/extproc/catalog"
	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/relay"
	"github.com/toolmesh/toolmesh/extproc/reqtrace"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// DefaultMaxResponseBytes is the default limit on a Tool Service reply.
const DefaultMaxResponseBytes = 4 << 20

// DefaultToolLabels is how many tools of a route get their own tool label
// in toolmesh_tool_calls_total by default.
const DefaultToolLabels = metrics.DefaultToolLabels

// streamWorkers is the number of goroutines kept to serve streams: a
// stream lasts as long as its HTTP request, Tool Service call included, so
// many are in flight per core.
func streamWorkers() uint32 { return uint32(16 * runtime.GOMAXPROCS(0)) }

// grpcHeadroom is what a ProcessingRequest carries besides the body: headers,
// attributes and protobuf framing.
const grpcHeadroom = 1 << 20

// Config configures the extproc server.
type Config struct {
	// MCP configures the protocol answers and HTTP rules.
	MCP mcp.Config
	// TracerProvider, when set, traces every request (tracing.go); nil is
	// tracing off.
	TracerProvider trace.TracerProvider
	// MaxResponseBytes limits a Tool Service reply; a larger one becomes an
	// isError result ("response too large"). Zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Runtime is the per-request configuration in force at start (auth,
	// policies, approval, limits, credentials, filters: runtime.go); nil
	// is none of them. Reloads replace it with UpdateRuntime.
	Runtime *Runtime
	// ToolLabels is how many distinct tools of each route get their own
	// tool label in toolmesh_tool_calls_total; calls of further tools count
	// as tool="(other)". Zero means DefaultToolLabels.
	ToolLabels int
	// Upstreams gives federated MCP servers' header values and the MCP
	// client legacy sessions are opened with. When nil, the servers get no
	// configured headers and a default client is used.
	Upstreams Upstreams
	// UpstreamCallTimeout bounds what the server sends a federated MCP
	// server itself (opening a session, re-issuing a call whose session
	// expired); zero means DefaultUpstreamCallTimeout. Keep it below the
	// ext_proc message_timeout.
	UpstreamCallTimeout time.Duration
	// FederatedStreamTimeout, when positive, bounds a federated server's
	// event stream that answers a tools/call: past it (from the start of
	// the request) without the server's response, the stream ends with an
	// isError "timeout" result (duplex.go). By default such a stream is
	// ended that way shortly before its route timeout anyway
	// (routedeadline.go); this setting matters when it is sooner, or with
	// FederatedStreamDeadlineOff, or with a listener that does not declare
	// its level.
	FederatedStreamTimeout time.Duration
	// FederatedStreamDeadlineOff switches off the default deadline of such
	// streams, the route timeout less a margin (routedeadline.go): then only
	// FederatedStreamTimeout, if set, ends them, as in earlier releases.
	FederatedStreamDeadlineOff bool
}

// Filters gives the filter chain of a route. The chain is captured once per
// request, so both stages of a call see the same configuration even when it
// is reloaded in between.
type Filters interface {
	Chain(route string) *filters.Chain
}

// Routes maps a request path (query already removed) to its route. ok is
// false for a path that names no route; snap is nil for a known route that
// has no snapshot yet. The registry's refresher implements it.
type Routes interface {
	Lookup(path string) (key string, snap *registry.Snapshot, ok bool)
}

// Server is the ExternalProcessor gRPC service. It is safe for concurrent
// use; it holds no per-request state.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	cfg     Config
	proto   *mcp.Server
	routes  Routes
	tracer  trace.Tracer // nil: tracing off
	log     *slog.Logger
	metrics *metrics.Metrics
	visible catalog.VisibleCache // per-route listings with the chain's hidden tools left out
	// runtime is the per-request configuration in force (runtime.go),
	// captured once per stream; runtimeMu serializes its writers only.
	runtime   atomic.Pointer[Runtime]
	runtimeMu sync.Mutex
	// startKeys are the relay keys generated at start, in force while the
	// Runtime names none (one replica only).
	startKeys *relay.Keys
	// startSessionKeys are the session keys generated at start
	// (clientsession.go), likewise.
	startSessionKeys *session.Keys
	// policyViews are the policies' per-route, per-caller views.
	policyViews catalog.Views
	// callerSeam, set only by tests, stands in for token authentication
	// (the request's caller from its headers); nil in production.
	callerSeam func(*corev3.HeaderMap) *identity.Caller
	// sessions are the gateway's own legacy sessions with federated MCP
	// servers.
	sessions sessionCache
	client   *upstream.Client // when cfg.Upstreams is nil
	// wire is set once GRPCServerOptions installed wireCodec: only then
	// may Process send a *procmsg.Wire.
	wire atomic.Bool
}

// upstreamHeaders returns a federated server's configured header values.
func (s *Server) upstreamHeaders(svc registry.ToolService) (map[string]string, error) {
	if s.cfg.Upstreams == nil || len(svc.Headers) == 0 {
		return nil, nil
	}
	return s.cfg.Upstreams.UpstreamHeaders(svc)
}

// upstreamClient is the MCP client of the call path.
func (s *Server) upstreamClient() *upstream.Client {
	if s.cfg.Upstreams != nil {
		if c := s.cfg.Upstreams.Client(); c != nil {
			return c
		}
	}
	return s.client
}

func (s *Server) upstreamTimeout() time.Duration {
	if s.cfg.UpstreamCallTimeout > 0 {
		return s.cfg.UpstreamCallTimeout
	}
	return DefaultUpstreamCallTimeout
}

// clientInfo is the implementation named in _meta when the gateway speaks
// the 2026-07-28 era for a legacy client.
func (s *Server) clientInfo() mcp.Implementation {
	c := s.proto.Config()
	return mcp.Implementation{Name: c.ServerName, Version: c.ServerVersion}
}

// BodyLimits are per-Tool-Service request body limits: the SRE override
// field maxRequestBytes (docs/sre.md). Envoy buffers a request on its public
// path with the largest limit of the route's Tool Services; only this server
// knows which service a tools/call goes to, so it enforces each service's
// own limit.
type BodyLimits struct {
	// Default applies to every Tool Service not in Services (0: none).
	Default int64
	// Services are limits by Tool Service name.
	Services map[string]int64
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// New returns a Server answering from routes. log may be nil (discard); reg
// may be nil (metrics are kept but not exported).
func New(cfg Config, routes Routes, log *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	if routes == nil {
		return nil, errors.New("extproc: routes is nil")
	}
	if cfg.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("extproc: max response bytes %d is negative", cfg.MaxResponseBytes)
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.ToolLabels < 0 {
		return nil, fmt.Errorf("extproc: tool labels %d is negative", cfg.ToolLabels)
	}
	if cfg.ToolLabels == 0 {
		cfg.ToolLabels = DefaultToolLabels
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg, cfg.ToolLabels)
	if err != nil {
		return nil, fmt.Errorf("extproc: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		tracer:  reqtrace.NewTracer(cfg.TracerProvider),
		proto:   mcp.NewServer(cfg.MCP),
		routes:  routes,
		log:     log,
		metrics: m,
		client:  upstream.New(upstream.Options{MaxBytes: cfg.MaxResponseBytes}),
	}
	s.startKeys = relay.Generate()
	s.startSessionKeys = session.Generate()
	rt := cfg.Runtime
	if rt == nil {
		rt = &Runtime{}
	}
	if err := s.SetRuntime(rt); err != nil {
		return nil, fmt.Errorf("extproc: %w", err)
	}
	return s, nil
}

// Register registers the ExternalProcessor service on gs. Create gs with
// GRPCServerOptions so buffered bodies fit in one gRPC message.
func (s *Server) Register(gs *grpc.Server) {
	extprocv3.RegisterExternalProcessorServer(gs, s)
}

// GRPCServerOptions returns the gRPC server options the service needs: a
// receive limit that admits a whole BUFFERED body (the request body limit or
// the Tool Service reply limit, whichever is larger) plus headers. grpc-go's
// default of 4 MiB would otherwise fail the stream, and Envoy would answer 500
// instead of the "response too large" result.
//
// It also installs a codec that is grpc-go's proto codec but sends the
// answers this server prepared in wire format (procmsg.Codec) as they are; from
// then on the server prepares them. Without it every answer is a
// ProcessingResponse that gRPC encodes.
func (s *Server) GRPCServerOptions() []grpc.ServerOption {
	limit := max(s.cfg.MaxResponseBytes, s.proto.Config().MaxBodyBytes)
	s.wire.Store(true)
	// Fixed HTTP/2 windows as large as the largest message: a buffered body
	// never waits for a WINDOW_UPDATE, and grpc-go sends no BDP-estimation
	// PINGs (its dynamic window is off), a round trip Envoy otherwise
	// answers on most requests.
	window := int32(min(max(limit+grpcHeadroom, 64<<10), math.MaxInt32))
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(limit + grpcHeadroom)),
		grpc.ForceServerCodecV2(procmsg.NewCodec()),
		grpc.InitialWindowSize(window),
		grpc.InitialConnWindowSize(window),
		// A write buffer that holds a compressed list page (61 KB for
		// 10,000 tools) with its frames: the answer leaves in one write
		// instead of one per 32 KiB, grpc-go's default
		// (docs/benchmarks.md).
		grpc.WriteBufferSize(writeBufferSize),
		// Streams are served by reused goroutines (more start when all are
		// busy): a new goroutine per request grew its stack by copying on
		// every call, deep in argument validation.
		grpc.NumStreamWorkers(streamWorkers()),
	}
}

// writeBufferSize is the gRPC server's write buffer per connection.
const writeBufferSize = 128 << 10

// Process implements [extprocv3.ExternalProcessorServer.Process]. It serves
// one HTTP request and returns only when Envoy ends the stream: returning
// early would make Envoy continue without the processor.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) (err error) {
	x := s.newRequest(stream.Context())
	defer x.finish()
	defer func() {
		// A bug must cost one request (Envoy answers 500, since
		// failure_mode_allow is false), not the process.
		if p := recover(); p != nil {
			s.log.Error("ext_proc stream panicked", "panic", p, "stack", string(debug.Stack()))
			x.streamErr = fmt.Errorf("panic: %v", p)
			err = status.Error(codes.Internal, "internal error")
		}
	}()
	// One message receives them all: each is decoded (reset first) into
	// req, handled and answered before the next Recv, and nothing keeps
	// req itself; what the request keeps (the header map, attributes,
	// bodies) the decoder allocates anew per message. serveDuplex goes on
	// the same way.
	req := new(extprocv3.ProcessingRequest)
	for {
		if err := stream.RecvMsg(req); err != nil {
			return x.endStream(err)
		}
		if err := x.send(stream, x.next(req)); err != nil {
			return x.endStream(err)
		}
		if d := x.kind.deadline(); d != nil {
			return x.serveDuplex(stream, req, d)
		}
	}
}

// endStream is how a stream ends on a Recv or Send error: nil when the
// peer closed it, else the error, kept for the stream's log line.
func (x *request) endStream(err error) error {
	if endOfStream(err) {
		return nil
	}
	x.streamErr = err
	return err
}

// serveDuplex serves the rest of a stream whose response body is
// FULL_DUPLEX_STREAMED (duplex.go): Envoy's chunks are answered as they
// come, and the deadline may end the body in between. The deadline's timer
// runs its own function, which takes the request (mu) as the handler does
// for each message, so the request is never touched by two goroutines at
// once and the stream never sends from two. Messages are received here, on
// the stream's goroutine, as before the switch: a receiving goroutine and a
// channel per stream cost a goroutine hand-off on every chunk.
func (x *request) serveDuplex(stream extprocv3.ExternalProcessor_ProcessServer, req *extprocv3.ProcessingRequest, d deadlineStream) error {
	var (
		mu      sync.Mutex
		over    bool  // the stream's handler returned: the timer sends nothing
		sendErr error // the timer's send failed
	)
	timer := time.AfterFunc(time.Until(d.at()), func() {
		mu.Lock()
		defer mu.Unlock()
		defer func() {
			// As in Process: a bug costs this request (the stream ends
			// with an error at its next message), not the process.
			if p := recover(); p != nil {
				x.s.log.Error("ext_proc stream panicked", "panic", p, "stack", string(debug.Stack()))
				sendErr = status.Error(codes.Internal, "internal error")
			}
		}()
		if over {
			return
		}
		if m := d.expire(x); m != nil {
			// A failed send breaks the stream: the receive below fails too.
			sendErr = x.send(stream, m)
		}
	})
	defer func() {
		timer.Stop()
		mu.Lock()
		over = true
		mu.Unlock()
	}()
	for {
		err := stream.RecvMsg(req)
		// A func, so that a panic in the handler (recovered by Process)
		// unlocks mu before the deferred stop above takes it.
		func() {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case sendErr != nil:
				err = sendErr
			case err == nil:
				err = x.send(stream, x.next(req))
			}
		}()
		if err != nil {
			return x.endStream(err)
		}
	}
}

// send sends resp (nil: nothing) and then the messages queued behind it
// (duplexresp.go).
func (x *request) send(stream extprocv3.ExternalProcessor_ProcessServer, resp any) error {
	if resp != nil {
		if err := stream.SendMsg(resp); err != nil {
			return err
		}
	}
	for _, m := range x.mode.takeQueued() {
		if err := stream.SendMsg(m); err != nil {
			return err
		}
	}
	return nil
}

// endOfStream reports whether err is Envoy closing the stream: after an
// ImmediateResponse, at the end of the request, or when the client went away.
func endOfStream(err error) bool {
	return errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled
}
