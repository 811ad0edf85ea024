package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/routedeadline"
)

// A request's kind (ADR 0021) is what it turned out to be: answered here,
// a call routed to a Tool Service (which the Tool Service's response
// headers may turn into a progress stream), a call or item routed to a
// federated MCP server, a client's answer relayed to one, or a listen
// stream. The message that decides it sets it once (the request body; the
// request headers for a listen stream; the response headers for a progress
// stream), and the kind owns the response phases: no phase tests flags to
// learn what it is handling.

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
	streamsBody(x *request) bool
	// streamedChunk answers one such chunk, and whether the body ended.
	streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool)
}

var (
	_ requestKind = localAnswer{}
	_ requestKind = nativeCall{}
	_ requestKind = progressCall{}
	_ requestKind = federatedCall{}
	_ requestKind = relayedAnswer{}
	_ requestKind = listenStream{}
)

// streamedChunk is a chunk answered by the kind's responseBody, as a
// StreamedBodyResponse.
func streamedChunk(k requestKind, x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	r := asStreamed(x.unwire(k.responseBody(x, b)), b)
	return r, r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream()
}

// routedEnvoyReply answers the response headers of Envoy's own reply to a routed
// request (its local reply: timeout, no healthy upstream), nil for the
// upstream's.
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
func (localAnswer) streamsBody(*request) bool { return true }
func (k localAnswer) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}

// nativeCall is a tools/call routed to a Tool Service (routedCall): its
// reply becomes the call's result (response.go).
type nativeCall struct{}

func (nativeCall) routed() bool { return true }
func (nativeCall) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if r := routedEnvoyReply(x, h); r != nil {
		return r
	}
	return x.responseHeaders(h)
}
func (nativeCall) responseBody(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if x.resultSent {
		return procmsg.ContinueResponseBody // an event stream passed through, or the result made at the headers
	}
	return x.responseBody(b)
}
func (nativeCall) streamsBody(x *request) bool { return x.streaming || x.resultSent }
func (k nativeCall) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}

// progressCall is a native call whose Tool Service answered with a 2xx
// progress stream (progress.go); its response headers made it one.
type progressCall struct{}

func (progressCall) routed() bool { return true }
func (progressCall) responseHeaders(x *request, _ *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	x.anomaly("second response_headers message")
	return procmsg.ContinueResponseHeaders
}
func (progressCall) responseBody(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if x.progress.events {
		// Every chunk is rewritten, after the result too: the raw
		// frames must never reach the client.
		return x.progressBody(b)
	}
	if x.resultSent {
		return procmsg.ContinueResponseBody
	}
	if u, over := x.upstreamReply(b); over {
		return x.resultResponse(u)
	}
	return x.progressBody(b) // a buffered progress stream
}
func (progressCall) streamsBody(x *request) bool { return x.progress.events || x.resultSent }
func (k progressCall) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}

// federatedCall is a request routed to a federated MCP server (a
// tools/call of its tool or an item it owns: federated.go); x.fed is its
// state.
type federatedCall struct{}

func (federatedCall) routed() bool { return true }
func (federatedCall) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	x.routeTimeout = routedeadline.RouteTimeout(h)
	if r := routedEnvoyReply(x, h); r != nil {
		return r
	}
	return x.fedResponseHeaders(h)
}
func (federatedCall) responseBody(x *request, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if !x.streaming && x.resultSent {
		return procmsg.ContinueResponseBody
	}
	return x.fedResponseBody(b)
}
func (federatedCall) streamsBody(x *request) bool { return x.streaming || x.resultSent }
func (k federatedCall) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	d := x.fed.duplex
	if d == nil {
		return streamedChunk(k, x, b)
	}
	if d.ended {
		return nil, false // the deadline ended it
	}
	r := x.duplexChunk(b) // with the deadline (duplex.go)
	return r, d.ended
}

// relayedAnswer is a client's answer routed to the federated server that
// asked (relay.go): the server's reply passes as it is.
type relayedAnswer struct{}

func (relayedAnswer) routed() bool { return true }
func (relayedAnswer) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	return x.relayResponseHeaders(h)
}
func (relayedAnswer) responseBody(*request, *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	return procmsg.ContinueResponseBody
}
func (relayedAnswer) streamsBody(*request) bool { return true }
func (k relayedAnswer) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}

// listenStream is a GET routed to the notifications server (listen.go):
// its events pass as they are.
type listenStream struct{}

func (listenStream) routed() bool { return true }
func (listenStream) responseHeaders(x *request, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if r := routedEnvoyReply(x, h); r != nil {
		return r
	}
	return x.streamResponseHeaders(h)
}
func (listenStream) responseBody(*request, *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	return procmsg.ContinueResponseBody
}
func (listenStream) streamsBody(*request) bool { return true }
func (k listenStream) streamedChunk(x *request, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, bool) {
	return streamedChunk(k, x, b)
}
