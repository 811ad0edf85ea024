package extproc

import (
	"bytes"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/eventstream"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/mcp"
)

// A federated server's event stream that answers a tools/call and passes
// unchanged would pass without ext_proc (passThroughOverride); past the
// route timeout Envoy could then only reset it. With a deadline (the route
// timeout less a margin, or federatedStreamTimeout: routedeadline.go) the
// body is FULL_DUPLEX_STREAMED instead (from the request-headers reply,
// duplexresp.go, or else the response-headers reply): every chunk comes here and goes back as a
// StreamedBodyResponse, and when the deadline passes before the server's
// response to the request, the stream is ended from here with that response
// as an isError "timeout" result and end_of_stream. Envoy then completes the
// client's stream and closes the upstream request
// (docs/decisions/0013-federated-stream-deadline.md, envoy/dataplane/internal/rules/rules.go).
//
// An override in the response-headers reply suits only streams that pass
// unchanged: a chunk that reaches Envoy while that reply is on its way goes
// on to the client without the server (ADR 0013), which is harmless only
// when the gateway would have passed it unchanged anyway. On a route with
// federated servers the request-headers reply sets the mode instead
// (duplexresp.go), so streams the gateway translates, remaps or filters
// get the deadline too (duplexChunk, with federatedStream.sse).

// duplexStream is the state of one such stream.
type duplexStream struct {
	deadline time.Time
	buf      eventstream.Splitter // the start of an event whose end has not arrived
	total    int64                // body bytes so far, bounded by MaxResponseBytes
	chunks   int                  // response_body messages received
	seen     bool                 // the server's response to the request passed
	expired  bool                 // the deadline passed before any chunk could be answered
	ended    bool                 // end_of_stream was sent
}

// duplexOverride switches the response body to FULL_DUPLEX_STREAMED. As
// for streamOverride, the effective mode (Envoy fills DEFAULT header and
// trailer modes in from processing_mode) must be the listener's entry
// (xds/listener.go buildExtProc): request body BUFFERED, response trailers
// SEND.
func duplexOverride() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestBodyMode:     extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode:    extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SEND,
	}
}

func streamedResponse(body []byte, eos bool) *extprocv3.ProcessingResponse {
	return procmsg.ResponseBody(&extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{
			Body: body, EndOfStream: eos}}}})
}

// duplexChunk answers one chunk: its complete events go back unchanged
// (the rest waits for its end, so that a final event never lands inside a
// half-sent one), and the whole body once the response passed or the
// upstream ended. A deadline that passed before any chunk came ends the
// stream now.
func (x *request) duplexChunk(s *federatedStream, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	d := s.duplex
	d.chunks++
	if b.GetEndOfStream() {
		d.ended = true
	}
	if t := s.sse; t != nil {
		// A stream the gateway rewrites (duplexresp.go): its complete
		// events are translated as they come (fedStreamMessage notes the
		// response to the request), an incomplete one waits in t.
		out, err := t.Feed(b.GetBody(), b.GetEndOfStream())
		if err != nil {
			if s.answered { // past the response, the rest is only dropped
				d.ended = true
				return streamedResponse(out, true)
			}
			return streamedResponse(append(out, x.fedStreamFailure(s, err)...), true)
		}
		if d.expired && !d.seen && !d.ended {
			return x.duplexEnd(s, out)
		}
		return streamedResponse(out, b.GetEndOfStream())
	}
	d.total += int64(len(b.GetBody()))
	if d.seen {
		if d.total > x.s.cfg.MaxResponseBytes {
			// The response went; what the server sends past the bound
			// after it is dropped, and the stream ends.
			d.ended = true
			return streamedResponse(nil, true)
		}
		return streamedResponse(b.GetBody(), b.GetEndOfStream())
	}
	lim := x.s.cfg.MaxResponseBytes
	d.buf.Max = int(lim)
	d.buf.Write(b.GetBody())
	var out []byte
	for {
		ev, _ := d.buf.Next()
		if ev == nil {
			break
		}
		out = append(out, ev...)
		if isFinalEvent(s.call, ev) {
			d.seen = true
			if d.total > lim {
				// The response is in, the rest of the chunk is past the
				// bound: dropped, and the stream ends.
				d.buf.Rest()
				d.ended = true
				return streamedResponse(out, true)
			}
			out = append(out, d.buf.Rest()...)
			break
		}
	}
	if !d.seen && d.total > lim {
		d.buf.Rest()
		return streamedResponse(append(out, x.fedStreamFailure(s, eventstream.ErrStreamTooLarge)...), true)
	}
	if b.GetEndOfStream() {
		out = append(out, d.buf.Rest()...)
		return streamedResponse(out, true)
	}
	if d.buf.Over() {
		d.buf.Rest()
		return streamedResponse(append(out, x.fedStreamFailure(s, eventstream.ErrEventTooLarge)...), true)
	}
	if d.expired && !d.seen {
		return x.duplexEnd(s, out)
	}
	return streamedResponse(out, false)
}

// isFinalEvent reports whether an event carries the response to the
// request (the client's id: these streams are not remapped).
func isFinalEvent(f *federatedCall, ev []byte) bool {
	data, ok := eventstream.Data(bytes.TrimRight(ev, "\r\n"))
	return ok && eventstream.IsResponse(data, f.id)
}

// duplexDeadline runs when the deadline passes. It returns the message
// that ends the stream, or nil when none may be sent now: Envoy takes a
// StreamedBodyResponse only once it sent a chunk (ProcessorState::
// handleBodyResponse), so without one the next chunk ends the stream.
func (x *request) duplexDeadline(s *federatedStream) *extprocv3.ProcessingResponse {
	d := s.duplex
	if d.ended || d.seen {
		return nil
	}
	if d.chunks == 0 {
		d.expired = true
		return nil
	}
	return x.duplexEnd(s, nil)
}

// duplexEnd ends the stream after out with the request's response: an
// isError "timeout" result. An event still incomplete is dropped.
func (x *request) duplexEnd(s *federatedStream, out []byte) *extprocv3.ProcessingResponse {
	d := s.duplex
	d.buf.Rest()
	d.ended, d.seen = true, true
	x.callOutcome = callTimeout
	res := x.filtered(x.s.proto.CallResult(x.call, mcp.Upstream{Failure: mcp.FailureTimeout}))
	out = append(out, "event: message\ndata: "...)
	out = append(out, res...)
	out = append(out, "\n\n"...)
	return streamedResponse(out, true)
}
