package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/routedeadline"
	"github.com/toolmesh/toolmesh/registry"
)

// With the route deadline (routedeadline.go: by default, where the listener
// allows it) or a federatedStreamTimeout, a route that has federated MCP
// servers gets its response bodies in FULL_DUPLEX_STREAMED from the start: the
// request-headers reply carries the mode_override, so no body chunk can
// reach Envoy in another mode while a response-headers reply is on its way
// (the race of docs/decisions/0013-federated-stream-deadline.md, point 6),
// and a stream the gateway translates, remaps or filters can be ended here
// like one that passes unchanged (duplex.go).
//
// What Envoy does then (source/extensions/filters/http/ext_proc/ext_proc.cc
// and processor_state.cc; envoy/dataplane/internal/rules/rules_extproc.go,
// "FULL_DUPLEX_STREAMED response bodies", whose open marker names the functions
// still to be read at v1.40.0):
//   - Filter::onReceiveMessage takes a mode_override while either direction
//     waits for a headers reply (inHeaderProcessState), the request's
//     included, and sets it on both directions: the request body stays
//     BUFFERED (the override repeats it), the response body becomes
//     FULL_DUPLEX_STREAMED. The effective mode (effectiveModeOverride: DEFAULT
//     header and trailer modes from processing_mode) is the listener's
//     allowed entry (xds/listener.go buildExtProc), the one a response-headers
//     override has always used.
//   - ProcessorState::onStartProcessorCall starts no message timer when the
//     direction's body mode is FULL_DUPLEX_STREAMED: the response headers
//     and every chunk wait for this server without a message timeout.
//   - Filter::onData sends each chunk at once, also while the headers reply
//     is outstanding (the callback state stays HeadersCallback), and drains
//     it; so the response headers reply may wait here until the body has
//     come. A body response before the headers reply is spurious
//     (isValidBodyCallbackState), which is a local reply: the server keeps
//     the headers-body order (processing_mode.proto: "The server response
//     has to maintain the headers-body-trailers ordering").
//   - The headers reply applies its header mutation to the held headers
//     (content-length is removed in this mode, and not set by a mutation:
//     shouldRemoveContentLength); after it a StreamedBodyResponse is applied
//     once a chunk was sent (getCallbackStateAfterHeaderResp:
//     StreamedBodyCallback when bodyReceived), and end_of_stream ends the
//     response (handleDuplexStreamedBodyResponse).
//
// So every response of such a route comes here in chunks, JSON answers and
// Envoy's local replies included. An answer the configured BUFFERED mode
// would have taken whole is collected here instead: its headers reply is
// held, and at its end the usual buffered logic (the kind's responseBody) runs
// and its result goes out as the headers reply and the body, in
// StreamedBodyResponse messages with end_of_stream. An event stream, and a
// body that passes as it is, get their headers reply at once and the
// STREAMED logic chunk by chunk.

// maxStreamedBody is the most body one StreamedBodyResponse carries
// (processing_mode.proto, FULL_DUPLEX_STREAMED: the server may split the
// body into chunks; external_processor.proto StreamedBodyResponse
// recommends chunks of at most 64 KiB).
const maxStreamedBody = 64 << 10

// duplexResponse is the state of one response in FULL_DUPLEX_STREAMED.
type duplexResponse struct {
	stream bool                      // chunks are answered as they come
	mut    *extprocv3.HeaderMutation // the held headers reply's mutation
	// ready is a result made at the headers (readyAtHeaders), sent with
	// the first chunk.
	ready          []byte
	readyAtHeaders bool
	body           []byte // the body collected so far
	over           bool   // the body passed the response size limit
	chunks         int
	done           bool // end_of_stream was sent
	// routeTimeout: the held headers carry wire.RouteTimeoutHeader,
	// removed from the reply (routedeadline.go).
	routeTimeout bool
}

// duplexRequest adds the mode_override to a request-headers reply on a
// route whose federated streams this server must be able to end (the route
// deadline or a federatedStreamTimeout, duplexRoute): any federated MCP server's stream may need
// translating (a client of the other era), its ids remapping (the shared
// legacy session) or its result filtering, and in the 2025-11-25 era the
// method is in the body, so every POST of the route gets it.
func (x *request) duplexRequest(resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	rh, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_RequestHeaders)
	if !ok || resp.GetModeOverride() != nil || !x.duplexRoute() {
		return resp
	}
	x.mode = &duplexResponseMode{}
	// A copy: resp may be shared (removeClusterHeader).
	return &extprocv3.ProcessingResponse{Response: rh, DynamicMetadata: resp.GetDynamicMetadata(), ModeOverride: duplexOverride()}
}

// duplexRoute reports whether this request's response body goes
// FULL_DUPLEX_STREAMED (duplexRequest).
func (x *request) duplexRoute() bool {
	if x.snap == nil || x.req.Method != "POST" {
		return false
	}
	if !hasFederated(x.snap.ToolServices()) {
		return false
	}
	// An explicit federatedStreamTimeout asserts the listener allows the
	// override, as in the release that introduced it; the default needs
	// the listener to say so (routedeadline.go), which is read only for a
	// route with a federated server.
	return x.s.cfg.FederatedStreamTimeout > 0 || x.routeDeadlineOn()
}

// hasFederated reports whether svcs has a federated MCP server. It
// compares the field ToolService.IsMCP reads: calling that method, even
// inlined, copied each ToolService (152 bytes) per iteration, as
// slices.ContainsFunc would.
func hasFederated(svcs []registry.ToolService) bool {
	for i := range svcs {
		if svcs[i].Protocol == registry.ProtocolMCP {
			return true
		}
	}
	return false
}

// unwire returns a prepared wire-format answer as a message.
func (x *request) unwire(r *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	if r != sendPrepared {
		return r
	}
	m := x.prepared
	x.prepared = nil
	out, err := m.Message()
	if err != nil {
		panic(err) // written here: a bug, caught per request
	}
	return out
}

// duplexHeaders answers the response headers: at once for a stream or a
// body that passes, held for an answer taken whole.
func (x *request) duplexHeaders(m *duplexResponseMode, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	r := x.unwire(x.kind.responseHeaders(x, h))
	hr := r.GetResponseHeaders()
	if hr == nil {
		return r // an ImmediateResponse: Envoy's local reply, the headers not sent yet
	}
	if r.GetModeOverride() != nil {
		// The body is FULL_DUPLEX_STREAMED already; an override now would
		// be honoured (the configured mode is not that one) and lose the
		// chunks Envoy has sent meanwhile.
		r = &extprocv3.ProcessingResponse{Response: r.GetResponse(), DynamicMetadata: r.GetDynamicMetadata()}
	}
	if h.GetEndOfStream() {
		m.dx = &duplexResponse{done: true}
		return r // no body: as in any mode
	}
	cr := hr.GetResponse()
	switch {
	case cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE:
		// A result made now (reissue): Envoy takes a body response only
		// once it sent a chunk, so it goes with the first one.
		m.dx = &duplexResponse{mut: cr.GetHeaderMutation(), ready: cr.GetBodyMutation().GetBody(), readyAtHeaders: true}
	case x.kind.streamsBody():
		m.dx = &duplexResponse{stream: true}
		return r
	default:
		m.dx = &duplexResponse{mut: cr.GetHeaderMutation()}
	}
	m.dx.routeTimeout = routedeadline.Carries(h)
	return nil
}

// duplexBody answers one chunk.
func (x *request) duplexBody(m *duplexResponseMode, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	d := m.dx
	if d == nil {
		// No response headers came (response_header_mode is not SEND).
		x.anomaly("response_body before response_headers")
		d = &duplexResponse{stream: true}
		m.dx = d
	}
	if d.done {
		return nil // after end_of_stream Envoy takes nothing more
	}
	d.chunks++
	switch {
	case d.readyAtHeaders:
		return m.final(d.mut, d.ready)
	case d.stream:
		r, done := x.kind.streamedChunk(x, b) // kinds.go
		d.done = done
		return r
	}
	if !d.over {
		d.body = append(d.body, b.GetBody()...)
		// One byte past the limit is enough for the buffered logic to
		// answer "too large"; the rest is not kept.
		if int64(len(d.body)) > x.s.cfg.MaxResponseBytes {
			d.body, d.over = d.body[:x.s.cfg.MaxResponseBytes+1], true
		}
	}
	if !b.GetEndOfStream() && !d.over {
		return nil
	}
	// The whole answer (or enough of it): the buffered logic, unchanged.
	r := x.unwire(x.kind.responseBody(x, &extprocv3.HttpBody{Body: d.body, EndOfStream: true}))
	if r.GetResponseBody() == nil {
		d.done = true
		return r // an ImmediateResponse: Envoy's local reply, the headers still held
	}
	cr := r.GetResponseBody().GetResponse()
	body := d.body
	if bm := cr.GetBodyMutation(); bm != nil {
		body = procmsg.MutatedBody(bm, body)
	}
	return m.final(procmsg.MergeMutations(d.mut, cr.GetHeaderMutation()), body)
}

// final answers the held response headers with mut and queues body, in
// StreamedBodyResponse messages of at most maxStreamedBody, the last with
// end_of_stream.
func (m *duplexResponseMode) final(mut *extprocv3.HeaderMutation, body []byte) *extprocv3.ProcessingResponse {
	m.dx.done = true
	for len(body) > maxStreamedBody {
		m.queued = append(m.queued, streamedResponse(body[:maxStreamedBody], false))
		body = body[maxStreamedBody:]
	}
	m.queued = append(m.queued, streamedResponse(body, true))
	r := procmsg.ResponseHeaders(&extprocv3.CommonResponse{HeaderMutation: procmsg.WithoutContentLength(mut)})
	if m.dx.routeTimeout {
		r = routedeadline.Without(r)
	}
	return r
}

// duplexTrailers answers response trailers. They mark the end of the body
// (its last chunk came without end_of_stream), so what the body still owes
// is sent first; in FULL_DUPLEX_STREAMED Envoy takes a trailers reply while
// it waits for body responses (ProcessorState::handleTrailersResponse
// accepts a trailers reply when the body mode is FULL_DUPLEX_STREAMED
// whatever the callback state) [verify:
// source/extensions/filters/http/ext_proc/processor_state.cc
// ProcessorState::handleTrailersResponse: read in stored copies, none at
// v1.40.0; no test runs this path: toolmesh's upstreams send no trailers
// over HTTP/1.1, and the local data plane never sends them].
func (x *request) duplexTrailers(m *duplexResponseMode) *extprocv3.ProcessingResponse {
	if m.dx == nil || m.dx.done {
		return procmsg.ResponseTrailers
	}
	end := x.duplexBody(m, &extprocv3.HttpBody{EndOfStream: true})
	if end == nil {
		return procmsg.ResponseTrailers
	}
	m.queued = append(m.queued, procmsg.ResponseTrailers)
	return end
}

// takeQueued returns and clears the messages queued behind an answer.
func (m *duplexResponseMode) takeQueued() []*extprocv3.ProcessingResponse {
	q := m.queued
	m.queued = nil
	return q
}

// asStreamed turns a STREAMED chunk answer into FULL_DUPLEX_STREAMED's: the
// chunk after its body mutation, with the chunk's end_of_stream.
func asStreamed(r *extprocv3.ProcessingResponse, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	rb := r.GetResponseBody()
	if rb == nil || rb.GetResponse().GetBodyMutation().GetStreamedResponse() != nil {
		return r
	}
	body := b.GetBody()
	if bm := rb.GetResponse().GetBodyMutation(); bm != nil {
		body = procmsg.MutatedBody(bm, body)
	}
	return streamedResponse(body, b.GetEndOfStream())
}
