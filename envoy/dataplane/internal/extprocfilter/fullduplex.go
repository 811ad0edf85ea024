package extprocfilter

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/status"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// duplexReader is a response body in FULL_DUPLEX_STREAMED mode, entered
// through a mode_override in the response-headers reply (rules.go,
// "FULL_DUPLEX_STREAMED response bodies"). Each upstream chunk goes to the
// server at once and is not passed on (handleDataStreamedModeBase drains
// it); what reaches the client is what the server's streamed_response
// messages carry, whenever they come, and the body ends when one carries
// end_of_stream, whether or not the upstream has ended.
//
// Two goroutines only block: one reads the upstream body, one receives
// from the gRPC stream; the activeStream's goroutine (Read) owns the filter
// state, sends the chunks and applies the responses, as Envoy's dispatcher
// thread does.
type duplexReader struct {
	e      *Filter
	chunks chan duplexChunk
	resps  chan duplexResp
	stop   context.CancelFunc
	ctx    context.Context

	out          []byte
	done         bool // the body ended (streamed end_of_stream, or without the server)
	err          error
	srcDone      bool // the upstream's last chunk was sent
	bodyReceived bool // ProcessorState::bodyReceived: a chunk went to the server
	streaming    bool // callback state StreamedBodyCallback
	passThrough  bool // processing completed: chunks go on without the server

	// A body FULL_DUPLEX_STREAMED before its headers were sent (a
	// request-headers mode_override; DuplexHeaders): awaitHeaders while the
	// headers reply is outstanding (callback state HeadersCallback, chunks
	// still sent), holdHeaders until the headers go on to the client, h
	// the held headers, lr the local reply that a failure meanwhile is.
	awaitHeaders bool
	holdHeaders  bool
	replaced     bool // CONTINUE_AND_REPLACE: the rest of the body is drained
	h            *headers.Map
	lr           *xdsconfig.LocalReply

	// idle is the stream idle timer (activeStream.idleTimeout), re-armed by
	// every event; idled reports that it fired.
	idle  *time.Timer
	idled bool
}

type duplexChunk struct {
	data []byte
	eos  bool
	err  error
}

type duplexResp struct {
	resp *extprocv3.ProcessingResponse
	err  error
}

// NewDuplexReader is src, a response body, in FULL_DUPLEX_STREAMED mode
// entered at the response headers: it starts reading src and the server's
// messages.
func (e *Filter) NewDuplexReader(src io.Reader) io.Reader { return e.newDuplexReader(src) }

func (e *Filter) newDuplexReader(src io.Reader) *duplexReader {
	ctx, stop := context.WithCancel(e.ctx)
	d := &duplexReader{e: e, chunks: make(chan duplexChunk), resps: make(chan duplexResp), stop: stop, ctx: ctx}
	go d.readSource(src)
	if st := e.stream; st != nil {
		go d.receive(st)
	}
	return d
}

func (d *duplexReader) readSource(src io.Reader) {
	// One read buffer (readBufs); each chunk goes on as a copy of what was
	// read, so a small event costs its size, not a 64 KiB buffer per read.
	b := readBufs.Get().(*[streamChunk]byte)
	defer readBufs.Put(b)
	buf := b[:]
	for {
		n, err := src.Read(buf)
		eos := errors.Is(err, io.EOF)
		if err != nil && !eos {
			select {
			case d.chunks <- duplexChunk{err: err}:
			case <-d.ctx.Done():
			}
			return
		}
		if n == 0 && !eos {
			continue
		}
		select {
		case d.chunks <- duplexChunk{data: bytes.Clone(buf[:n]), eos: eos}:
		case <-d.ctx.Done():
			return
		}
		if eos {
			return
		}
	}
}

func (d *duplexReader) receive(st extprocv3.ExternalProcessor_ProcessClient) {
	for {
		resp, err := st.Recv()
		select {
		case d.resps <- duplexResp{resp: resp, err: err}:
		case <-d.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (d *duplexReader) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		if d.done {
			return 0, io.EOF
		}
		d.step()
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

// finish ends the body: the helper goroutines stop, and the activeStream's
// write loop returns, after which the router closes the upstream body.
func (d *duplexReader) finish(err error) {
	d.stop()
	if d.idle != nil {
		d.idle.Stop()
	}
	if err != nil {
		d.err = err
	} else {
		d.done = true
	}
}

// step waits for the next upstream chunk or server message.
func (d *duplexReader) step() {
	if d.srcDone && (d.passThrough || d.e.complete) {
		d.finish(nil) // nothing more can come
		return
	}
	chunks := d.chunks
	if d.srcDone {
		chunks = nil
	}
	var idle <-chan time.Time
	if t := d.e.cb.StreamIdleTimeout(); t > 0 {
		if d.idle == nil {
			d.idle = time.NewTimer(t)
		} else {
			d.idle.Reset(t)
		}
		idle = d.idle.C
	}
	select {
	case c := <-chunks:
		d.chunk(c)
	case r := <-d.resps:
		d.response(r)
	case <-idle:
		// ActiveStream::onIdleTimeout: the upstream's response headers
		// were received, so the stream is reset, not answered 408
		// (rules.go, "Stream idle timeout").
		d.e.cb.OnStreamIdleTimeout()
		d.idled = true
		d.holdHeaders = false
		d.fail(nil)
	case <-d.e.ctx.Done():
		d.e.Close()
		d.finish(ErrAbort)
	}
}

// chunk is Filter::encodeData in FULL_DUPLEX_STREAMED mode
// (handleDataFullDuplexStreamedMode → handleDataStreamedModeBase).
func (d *duplexReader) chunk(c duplexChunk) {
	if c.err != nil {
		// An upstream reset after the response started resets the
		// downstream (router.cc onUpstreamReset).
		d.e.Close()
		d.finish(c.err)
		return
	}
	d.srcDone = c.eos
	if d.replaced {
		// onData: bodyReplaced drains what the upstream still sends.
		if c.eos {
			d.finish(nil)
		}
		return
	}
	if d.passThrough || d.e.complete {
		// processing_complete_: onData continues without the server.
		d.out = append(d.out, c.data...)
		if c.eos {
			d.finish(nil)
		}
		return
	}
	d.bodyReceived = true
	lr := d.e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: c.data, EndOfStream: c.eos}}}, nil)
	if lr != nil {
		d.finish(errStreamFailed)
		return
	}
	// sendBodyChunk → onStartProcessorCall(StreamedBodyCallback), with no
	// message timer in this mode; while the headers reply is outstanding
	// the state stays HeadersCallback (handleDataStreamedModeBase).
	if !d.awaitHeaders {
		d.streaming = true
	}
}

// response is Filter::onReceiveMessage for a filter whose response body mode
// is FULL_DUPLEX_STREAMED.
func (d *duplexReader) response(r duplexResp) {
	e := d.e
	if d.awaitHeaders {
		d.headersResponse(r)
		return
	}
	if r.err != nil {
		if e.ctx.Err() != nil {
			e.Close()
			d.finish(ErrAbort)
			return
		}
		if errors.Is(r.err, io.EOF) {
			// onGrpcClose: processing completes and the rest of the body
			// passes without the server; the chunks it was sent are lost.
			e.finishAndContinue()
			d.passThrough = true
			return
		}
		// onGrpcError: failureModeAllow() is false once a body chunk went
		// to the server in this mode, so it is a local reply, which after
		// the response headers is a reset.
		if !d.bodyReceived && e.failureModeAllow {
			e.finishAndContinue()
			d.passThrough = true
			return
		}
		st := status.Convert(r.err)
		d.fail(&xdsconfig.LocalReply{Code: e.f.StatusOnError, Details: rules.GRPCErrorDetails(uint32(st.Code()), st.Message())})
		return
	}
	resp := r.resp
	if resp.GetOverrideMessageTimeout() != nil {
		// onNewTimeout: no message timer runs in this mode, so the
		// request is ignored.
		return
	}
	rb, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ResponseBody)
	if !ok {
		if _, imm := resp.GetResponse().(*extprocv3.ProcessingResponse_ImmediateResponse); imm && !e.f.DisableImmediate {
			// sendImmediateResponse once the headers left: a reset.
			e.setMetadata(resp)
			e.complete = true
			e.Close()
			d.finish(errStreamFailed)
			return
		}
		d.spurious(resp, rules.SpuriousKind(resp))
		return
	}
	if !d.streaming {
		// handleBodyResponse: isValidBodyCallbackState is false before
		// the first chunk was sent (and after the last response).
		d.spurious(resp, rules.SpuriousMessage)
		return
	}
	e.setMetadata(resp)
	sr := rb.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse()
	if sr == nil {
		d.spurious(resp, rules.SpuriousNormalInDuplex)
		return
	}
	// handleDuplexStreamedBodyResponse: the body is injected downstream;
	// end_of_stream ends the response (closeGrpcStreamIfLastRespReceived
	// closes the gRPC stream).
	// injectEncodedDataToFilterChain continues headers still held first
	// (source/common/http/filter_manager.cc).
	d.holdHeaders = false
	d.out = append(d.out, sr.GetBody()...)
	if sr.GetEndOfStream() {
		d.streaming = false
		e.finishAndContinue()
		d.finish(nil)
	}
}

// spurious is the FailedPrecondition branch of onReceiveMessage in this
// mode: Filter::failureModeAllow() is false once a chunk went to the
// server, so only before that does failure_mode_allow let the body continue
// without the server; otherwise handleErrorResponse sends a local reply,
// which once the headers left resets the stream.
func (d *duplexReader) spurious(resp *extprocv3.ProcessingResponse, msg string) {
	e := d.e
	e.log.Warn("spurious ext_proc response", "filter", e.f.Name, "error", msg)
	if !d.bodyReceived && (e.failureModeAllow || !rules.FailCloseSpurious) {
		e.finishAndContinue()
		d.passThrough = true
		d.awaitHeaders, d.holdHeaders = false, false
		return
	}
	d.fail(&xdsconfig.LocalReply{Code: e.f.StatusOnError, Details: rules.ResponseDetails(msg)})
}

// fail ends processing with a local reply: sent as such while the
// response headers are held, a reset once they left
// (FilterManager::sendLocalReply).
func (d *duplexReader) fail(lr *xdsconfig.LocalReply) {
	e := d.e
	e.complete = true
	e.Close()
	if d.holdHeaders {
		d.lr = lr
	}
	d.awaitHeaders = false
	d.finish(errStreamFailed)
}

// DuplexHeaders is Filter::encodeHeaders for a response whose body mode is
// FULL_DUPLEX_STREAMED before its headers are sent: a mode_override in the
// request-headers reply (rules.go, "FULL_DUPLEX_STREAMED response
// bodies"). The headers go to the server and the body chunks follow as they
// arrive, without waiting for the headers reply and without a message
// timer; the headers leave once the reply came (and, when the whole body
// was sent before it, once the server streams body back). It returns the
// client's body, or the local reply a failure before that is.
func (e *Filter) DuplexHeaders(h *headers.Map, src io.Reader) (io.Reader, *xdsconfig.LocalReply, error) {
	if lr := e.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{EndOfStream: false},
	}}, h); lr != nil {
		return nil, lr, nil
	}
	if e.complete {
		return src, nil, nil
	}
	// shouldRemoveContentLength: always in this mode.
	if rules.ShouldRemoveContentLength(e.mode.GetResponseBodyMode(), true, e.f.AllowCL) {
		h.Del("content-length")
	}
	d := e.newDuplexReader(src)
	d.awaitHeaders, d.holdHeaders, d.h = true, true, h
	for (d.awaitHeaders || (d.holdHeaders && d.srcDone && d.streaming)) && !d.done && d.err == nil {
		d.step()
	}
	if d.lr != nil {
		return nil, d.lr, nil
	}
	if errors.Is(d.err, ErrAbort) {
		return nil, nil, ErrAbort
	}
	if d.idled {
		e.cb.Reset(errors.New("stream idle timeout"))
	}
	d.holdHeaders = false
	return d, nil, nil
}

// headersResponse is Filter::onReceiveMessage while the response-headers
// reply is outstanding in FULL_DUPLEX_STREAMED.
func (d *duplexReader) headersResponse(r duplexResp) {
	e := d.e
	if r.err != nil {
		switch {
		case e.ctx.Err() != nil:
			e.Close()
			d.finish(ErrAbort)
		case errors.Is(r.err, io.EOF) || (!d.bodyReceived && e.failureModeAllow):
			// onGrpcClose (or onGrpcError with failure_mode_allow while
			// Filter::failureModeAllow() still holds): clearAsyncState
			// continues the headers unchanged; the chunks sent are lost.
			e.finishAndContinue()
			d.passThrough = true
			d.awaitHeaders, d.holdHeaders = false, false
		default:
			st := status.Convert(r.err)
			d.fail(&xdsconfig.LocalReply{Code: e.f.StatusOnError, Details: rules.GRPCErrorDetails(uint32(st.Code()), st.Message())})
		}
		return
	}
	resp := r.resp
	if resp.GetOverrideMessageTimeout() != nil {
		return // onNewTimeout: no timer runs in this mode
	}
	switch rr := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		e.setMetadata(resp)
		cr := rr.ResponseHeaders.GetResponse()
		if err := e.applyCommonHeaders(cr, d.h, e.mode.GetResponseBodyMode(), true); err != nil {
			d.fail(&xdsconfig.LocalReply{Code: e.f.StatusOnError, Details: rules.ResponseDetails(err.Error())})
			return
		}
		d.awaitHeaders = false
		if cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
			// handleHeadersResponse: the body is replaced, the mode is NONE
			// and the stream closes (closeGrpcStreamIfLastRespReceived);
			// what the upstream still sends is drained. [choice] Not used
			// by toolmesh in this mode.
			d.h.Del("content-length")
			d.out = applyBodyMutation(cr.GetBodyMutation(), nil)
			d.replaced, d.holdHeaders = true, false
			e.finishAndContinue()
			if d.srcDone {
				d.finish(nil)
			}
			return
		}
		// getCallbackStateAfterHeaderResp: StreamedBodyCallback once a
		// chunk was sent. The headers continue now unless the whole body
		// was sent already (complete_body_available_): then the first
		// streamed response (or its end) continues them.
		d.streaming = d.bodyReceived
		if !(d.srcDone && d.streaming) {
			d.holdHeaders = false
		}
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		if lr := e.immediate(resp); lr != nil {
			d.lr = lr
			d.awaitHeaders = false
			d.finish(errStreamFailed)
			return
		}
		d.passThrough = true // disable_immediate_response with fail open
		d.awaitHeaders, d.holdHeaders = false, false
	default:
		// A body response before the headers reply: isValidBodyCallbackState
		// is false in HeadersCallback.
		e.setMetadata(resp)
		d.spurious(resp, rules.SpuriousKind(resp))
	}
}
