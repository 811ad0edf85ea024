package extproc

import (
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/routedeadline"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
)

// A request's kind (ADR 0021) is what it turned out to be: answered here,
// a call routed to a Tool Service (which the Tool Service's response
// headers may turn into a progress stream), a call or item routed to a
// federated MCP server (which its server's response headers may turn into
// an event stream), a client's answer relayed to one, or a listen stream
// (a legacy client's end of its session is answered here). The message
// that decides it sets it once (the request body; the request headers for
// a listen stream; the response headers for a progress or federated event
// stream), and the kind owns the response phases and their state: the
// request (exchange.go) keeps only what every kind shares, and no phase
// tests flags to learn what it is handling.

// requestKind answers the response phases of one kind of request.
type requestKind interface {
	// routed reports whether the request was sent upstream; its outcome
	// is then the call's (finish).
	routed() bool
	// responseHeaders answers the response headers as the configured
	// (BUFFERED) response body mode expects.
	responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse
	// responseBody answers a response body message: the whole body when
	// BUFFERED, one chunk when the headers reply switched it to STREAMED.
	responseBody(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse
	// streamsBody reports whether, with the response body
	// FULL_DUPLEX_STREAMED (duplexresp.go), its chunks are answered as they
	// come rather than collected into the whole body.
	streamsBody() bool
	// streamedChunk answers one such chunk, and whether the body ended.
	streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool)
	// deadline is the stream this server ends itself when its deadline
	// passes (duplex.go, served by serveDuplex), nil for none.
	deadline() deadlineStream
	// report is what the request's metrics, trace and log line say of the
	// upstream's answer: its HTTP status (0 for none) and whether its body
	// was streamed.
	report() (status int, streamed bool)
}

// deadlineStream is a response body this server may end (duplex.go).
type deadlineStream interface {
	// at is when it ends without the response.
	at() time.Time
	// expire answers the deadline: the message that ends the stream, or
	// nil when none may be sent now.
	expire(x *request) *extprocv3.ProcessingResponse
}

var (
	_ requestKind    = localAnswer{}
	_ requestKind    = (*nativeCall)(nil)
	_ requestKind    = (*progressCall)(nil)
	_ requestKind    = (*federatedCall)(nil)
	_ requestKind    = (*federatedStream)(nil)
	_ requestKind    = (*relayedAnswer)(nil)
	_ requestKind    = (*listenStream)(nil)
	_ deadlineStream = (*federatedStream)(nil)
)

// upstreamHead is what a routed request's response headers said.
type upstreamHead struct {
	status      int
	contentType string
	seen        bool // the response headers came
}

// callReply is the response state of a routed tools/call or item: what the
// upstream answered, and what the client got so far.
type callReply struct {
	up upstreamHead
	// resultSent: the client's result went out (or passes as the upstream
	// sends it); the rest of the body passes.
	resultSent bool
	streaming  bool // the response body was switched to STREAMED
}

// streamedChunk is a chunk answered by the kind's responseBody, as a
// StreamedBodyResponse.
func streamedChunk(k requestKind, x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	r := asStreamed(x.unwire(k.responseBody(x, b)), b)
	return r, r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream()
}

// routedEnvoyReply answers the response headers of Envoy's own reply to a
// routed request (its local reply: timeout, no healthy upstream), nil for
// the upstream's. The reply's body passes as it is.
func routedEnvoyReply(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if kind := localReplyKind(h); kind != "" {
		return x.localReplyHeaders(kind)
	}
	return nil
}

// localAnswer is a request nothing was routed for: answered here, or let
// through untouched. There is nothing to translate.
type localAnswer struct{}

func (localAnswer) routed() bool { return false }
func (localAnswer) responseHeaders(*request, *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	return procmsg.ContinueResponseHeaders
}
func (localAnswer) responseBody(*request, *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	return procmsg.ContinueResponseBody
}
func (localAnswer) streamsBody() bool { return true }
func (k localAnswer) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}
func (localAnswer) deadline() deadlineStream     { return nil }
func (localAnswer) report() (status int, _ bool) { return 0, false }

// nativeCall is a tools/call routed to a Tool Service (routedCall): its
// reply becomes the call's result (response.go).
type nativeCall struct {
	callReply
	// oauth is the OAuth token the call carries (upstreamauth.go), evicted
	// when the Tool Service refuses it; held is the call that carries it,
	// sent again then (upstream401.go).
	oauth *upstreamcred.Token
	held  *callplan.Held
}

func (*nativeCall) routed() bool { return true }
func (k *nativeCall) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if r := routedEnvoyReply(x, h); r != nil {
		k.resultSent = true
		return r
	}
	return x.responseHeaders(k, h)
}
func (k *nativeCall) responseBody(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if k.resultSent {
		return procmsg.ContinueResponseBody // an event stream passed through, or the result made at the headers
	}
	return x.responseBody(k, b)
}
func (k *nativeCall) streamsBody() bool { return k.streaming || k.resultSent }
func (k *nativeCall) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}
func (*nativeCall) deadline() deadlineStream       { return nil }
func (k *nativeCall) report() (status int, _ bool) { return k.up.status, k.streaming }

// progressCall is a native call whose Tool Service answered with a 2xx
// progress stream (progress.go); its response headers made it one.
type progressCall struct {
	*callReply // the native call's
	stream     progressStream
}

func (*progressCall) routed() bool { return true }
func (*progressCall) responseHeaders(x *request, _ *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	x.anomaly("second response_headers message")
	return procmsg.ContinueResponseHeaders
}
func (k *progressCall) responseBody(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if k.stream.events {
		// Every chunk is rewritten, after the result too: the raw
		// frames must never reach the client.
		return x.progressBody(k, b)
	}
	if k.resultSent {
		return procmsg.ContinueResponseBody
	}
	if u, over := x.upstreamReply(k.callReply, b); over {
		return x.resultResponse(k.callReply, u)
	}
	return x.progressBody(k, b) // a buffered progress stream
}
func (k *progressCall) streamsBody() bool { return k.stream.events || k.resultSent }
func (k *progressCall) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}
func (*progressCall) deadline() deadlineStream       { return nil }
func (k *progressCall) report() (status int, _ bool) { return k.up.status, k.streaming }

// federatedCall's kind methods: the type and its state are in federated.go.

func (*federatedCall) routed() bool { return true }
func (f *federatedCall) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	f.routeTimeout = routedeadline.RouteTimeout(h)
	if r := routedEnvoyReply(x, h); r != nil {
		f.resultSent = true
		return r
	}
	return x.fedResponseHeaders(f, h)
}
func (f *federatedCall) responseBody(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if f.resultSent {
		return procmsg.ContinueResponseBody // Envoy's local reply, or the result made at the headers
	}
	return x.fedResponseBody(f, b)
}
func (f *federatedCall) streamsBody() bool { return f.resultSent }
func (f *federatedCall) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(f, x, b)
}
func (*federatedCall) deadline() deadlineStream       { return nil }
func (f *federatedCall) report() (status int, _ bool) { return f.up.status, false }

// federatedStream's kind methods: the type is in federated.go.

func (*federatedStream) routed() bool { return true }

// responseHeaders: a second response_headers message (Envoy sends none)
// is answered as the call's first was.
func (s *federatedStream) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	return s.call.responseHeaders(x, h)
}
func (s *federatedStream) responseBody(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	return x.fedStreamBody(s, b)
}
func (*federatedStream) streamsBody() bool { return true }
func (s *federatedStream) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	d := s.duplex
	if d == nil {
		return streamedChunk(s, x, b)
	}
	if d.ended {
		return nil, false // the deadline ended it
	}
	r := x.duplexChunk(s, b) // with the deadline (duplex.go)
	return r, d.ended
}
func (s *federatedStream) deadline() deadlineStream {
	if s.duplex == nil {
		return nil
	}
	return s
}
func (s *federatedStream) at() time.Time { return s.duplex.deadline }
func (s *federatedStream) expire(x *request) *extprocv3.ProcessingResponse {
	return x.duplexDeadline(s)
}
func (s *federatedStream) report() (status int, _ bool) { return s.call.up.status, true }

// relayedAnswer is a client's answer routed to the federated server that
// asked (relay.go): the server's reply passes as it is.
type relayedAnswer struct {
	up upstreamHead
}

func (*relayedAnswer) routed() bool { return true }
func (k *relayedAnswer) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	return x.relayResponseHeaders(k, h)
}
func (*relayedAnswer) responseBody(*request, *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	return procmsg.ContinueResponseBody
}
func (*relayedAnswer) streamsBody() bool { return true }
func (k *relayedAnswer) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}
func (*relayedAnswer) deadline() deadlineStream       { return nil }
func (k *relayedAnswer) report() (status int, _ bool) { return k.up.status, false }

// listenStream is a GET routed to the notifications server (listen.go):
// its events pass as they are.
type listenStream struct {
	up        upstreamHead
	streaming bool // the notifications server's event stream passes STREAMED
}

func (*listenStream) routed() bool { return true }
func (k *listenStream) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if r := routedEnvoyReply(x, h); r != nil {
		return r
	}
	return x.streamResponseHeaders(k, h)
}
func (*listenStream) responseBody(*request, *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	return procmsg.ContinueResponseBody
}
func (*listenStream) streamsBody() bool { return true }
func (k *listenStream) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}
func (*listenStream) deadline() deadlineStream       { return nil }
func (k *listenStream) report() (status int, _ bool) { return k.up.status, k.streaming }
