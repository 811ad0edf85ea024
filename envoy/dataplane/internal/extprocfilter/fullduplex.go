package extprocfilter

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
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
// Two goroutines share the work, one at a time (mu), as Envoy's dispatcher
// thread does it alone: the activeStream's goroutine (Read) receives the
// server's messages and applies them; a second one reads the upstream body
// and sends each chunk to the server itself. Each goroutine waits on its
// own source, so a chunk or an answer reaches the server or the client
// without a hand-off between goroutines (ADR 0029). Once processing
// completed (or the stream is gone), nothing is received any more and the
// chunks come to the activeStream's goroutine (chunks), which passes them
// on.
type duplexReader struct {
	e      *Filter
	mu     sync.Mutex // held by whichever goroutine is not waiting
	chunks chan duplexChunk
	stop   context.CancelFunc
	ctx    context.Context
	// start and active (nanoseconds since start) time the stream idle
	// timer: active is the last event, a chunk read or a step.
	start  time.Time
	active atomic.Int64

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

// NewDuplexReader is src, a response body, in FULL_DUPLEX_STREAMED mode
// entered at the response headers: it starts reading src.
func (e *Filter) NewDuplexReader(src io.Reader) io.Reader { return e.newDuplexReader(src, nil) }

// newDuplexReader starts reading src; h, when not nil, are the response
// headers held until the server's reply to them (DuplexHeaders).
func (e *Filter) newDuplexReader(src io.Reader, h *headers.Map) *duplexReader {
	ctx, stop := context.WithCancel(e.ctx)
	d := &duplexReader{e: e, chunks: make(chan duplexChunk), stop: stop, ctx: ctx, start: time.Now()}
	if h != nil {
		d.awaitHeaders, d.holdHeaders, d.h = true, true, h
	}
	e.duplex = d
	go d.readSource(src)
	return d
}

// direct reports whether the chunks go to the server from the reading
// goroutine and the server's messages are received: processing goes on
// with the server. mu held.
func (d *duplexReader) direct() bool {
	return !d.replaced && !d.passThrough && !d.e.complete && d.e.stream != nil
}

// touch records an event for the stream idle timer.
func (d *duplexReader) touch() { d.active.Store(int64(time.Since(d.start))) }

func (d *duplexReader) readSource(src io.Reader) {
	// One read buffer (readBufs); each chunk goes on as a copy of what was
	// read, so a small event costs its size, not a 64 KiB buffer per read.
	b := readBufs.Get().(*[streamChunk]byte)
	defer readBufs.Put(b)
	buf := b[:]
	for {
		n, err := src.Read(buf)
		eos := errors.Is(err, io.EOF)
		if n == 0 && err == nil {
			continue
		}
		c := duplexChunk{err: err, eos: eos}
		if eos || err == nil {
			c.err = nil
			c.data = bytes.Clone(buf[:n])
		}
		d.touch()
		d.mu.Lock()
		if d.done || d.err != nil {
			d.mu.Unlock()
			return
		}
		if d.direct() {
			d.chunk(c)
			d.mu.Unlock()
		} else {
			d.mu.Unlock()
			select {
			case d.chunks <- c:
			case <-d.ctx.Done():
				return
			}
		}
		if eos || c.err != nil {
			return
		}
	}
}

func (d *duplexReader) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
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

// step waits for the next server message, or once processing completed
// for the next upstream chunk. mu held, but not while it waits.
func (d *duplexReader) step() {
	if d.srcDone && (d.passThrough || d.e.complete) {
		d.finish(nil) // nothing more can come
		return
	}
	d.touch()
	if d.direct() {
		d.receive()
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
	d.mu.Unlock()
	select {
	case c := <-chunks:
		d.mu.Lock()
		d.chunk(c)
	case <-idle:
		d.mu.Lock()
		d.idleTimeout()
	case <-d.e.ctx.Done():
		d.mu.Lock()
		d.e.Close()
		d.finish(ErrAbort)
	}
}

// receive waits for the server's next message and applies it. The stream
// idle timer, re-armed by every event of either goroutine, cancels the
// stream as it fires; the downstream's going away ends the Recv with the
// stream's context, which response treats as such. mu held, but not while
// it waits.
func (d *duplexReader) receive() {
	st := d.e.stream
	var w *msgTimer
	if t := d.e.cb.StreamIdleTimeout(); t > 0 {
		w = &msgTimer{}
		cancel := d.e.cancel
		// Created stopped and then armed, so that the function sees w.t.
		w.t = time.AfterFunc(math.MaxInt64, func() {
			if w.state.Load() != msgWaiting {
				return // answered meanwhile
			}
			if rest := t - (time.Since(d.start) - time.Duration(d.active.Load())); rest > 0 {
				w.t.Reset(rest) // an event since it was armed
				return
			}
			if w.state.CompareAndSwap(msgWaiting, msgTimedOut) {
				cancel()
			}
		})
		w.t.Reset(t)
	}
	d.mu.Unlock()
	resp, err := st.Recv()
	d.mu.Lock()
	if w != nil {
		w.t.Stop()
		if !w.state.CompareAndSwap(msgWaiting, msgAnswered) {
			d.idleTimeout()
			return
		}
	}
	if d.done || d.err != nil || d.e.stream != st {
		// The reading goroutine ended the body or closed the stream
		// meanwhile: what the Recv returned comes after that.
		return
	}
	d.response(resp, err)
}

// idleTimeout is ActiveStream::onIdleTimeout: the upstream's response
// headers were received, so the stream is reset, not answered 408
// (rules.go, "Stream idle timeout").
func (d *duplexReader) idleTimeout() {
	d.e.cb.OnStreamIdleTimeout()
	d.idled = true
	d.holdHeaders = false
	d.fail(nil)
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
	if lr := d.e.send(bodyMessage(waitResponseBody, c.data, c.eos), nil); lr != nil {
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
func (d *duplexReader) response(resp *extprocv3.ProcessingResponse, err error) {
	e := d.e
	if err != nil {
		d.streamEnd(err)
		return
	}
	if resp.GetOverrideMessageTimeout() != nil {
		// onNewTimeout: no message timer runs in this mode, so the
		// request is ignored.
		return
	}
	if d.awaitHeaders {
		d.headersResponse(resp)
		return
	}
	rb, ok := resp.GetResponse().(*extprocv3.ProcessingResponse_ResponseBody)
	if !ok {
		if _, imm := resp.GetResponse().(*extprocv3.ProcessingResponse_ImmediateResponse); imm && !e.f.DisableImmediate {
			// sendImmediateResponse once the headers left: a reset.
			e.setMetadata(resp)
			e.finishAndContinue()
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

// streamEnd is Filter::onGrpcClose, or onGrpcError, for the error that
// ended the stream. A clean close, or an error while
// Filter::failureModeAllow() holds with failure_mode_allow (it is false
// once a body chunk went to the server in this mode), completes processing
// (clearAsyncState continues headers still held unchanged) and the rest of
// the body passes without the server; the chunks it was sent are lost. Any
// other error is a local reply, which after the response headers is a
// reset.
func (d *duplexReader) streamEnd(err error) {
	switch e := d.e; {
	case e.ctx.Err() != nil:
		e.Close()
		d.finish(ErrAbort)
	case errors.Is(err, io.EOF) || (!d.bodyReceived && e.f.FailureModeAllow):
		d.passOn()
	default:
		d.fail(e.grpcErrorReply(status.Convert(err)))
	}
}

// passOn completes processing: the rest of the body, and the headers if
// they are held, go on without the server.
func (d *duplexReader) passOn() {
	d.e.finishAndContinue()
	d.passThrough = true
	d.awaitHeaders, d.holdHeaders = false, false
}

// spurious is the FailedPrecondition branch of onReceiveMessage in this
// mode: Filter::failureModeAllow() is false once a chunk went to the
// server, so only before that does failure_mode_allow let the body continue
// without the server; otherwise handleErrorResponse sends a local reply,
// which once the headers left resets the stream.
func (d *duplexReader) spurious(resp *extprocv3.ProcessingResponse, msg string) {
	e := d.e
	e.log.Warn("spurious ext_proc response", "filter", e.f.Name, "error", msg)
	if !d.bodyReceived && (e.f.FailureModeAllow || !rules.FailCloseSpurious) {
		d.passOn()
		return
	}
	d.fail(&xdsconfig.LocalReply{Code: e.f.StatusOnError, Details: rules.ResponseDetails(msg)})
}

// fail ends processing with a local reply: sent as such while the
// response headers are held, a reset once they left
// (FilterManager::sendLocalReply).
func (d *duplexReader) fail(lr *xdsconfig.LocalReply) {
	d.e.finishAndContinue()
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
	d := e.newDuplexReader(src, h)
	d.mu.Lock()
	for (d.awaitHeaders || (d.holdHeaders && d.srcDone && d.streaming)) && !d.done && d.err == nil {
		d.step()
	}
	lr, err, idled := d.lr, d.err, d.idled
	d.holdHeaders = false
	d.mu.Unlock()
	if lr != nil {
		return nil, lr, nil
	}
	if errors.Is(err, ErrAbort) {
		return nil, nil, ErrAbort
	}
	if idled {
		e.cb.Reset(errors.New("stream idle timeout"))
	}
	return d, nil, nil
}

// headersResponse is Filter::onReceiveMessage while the response-headers
// reply is outstanding in FULL_DUPLEX_STREAMED.
func (d *duplexReader) headersResponse(resp *extprocv3.ProcessingResponse) {
	e := d.e
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
		d.passOn() // disable_immediate_response with fail open
	default:
		// A body response before the headers reply: isValidBodyCallbackState
		// is false in HeadersCallback.
		e.setMetadata(resp)
		d.spurious(resp, rules.SpuriousKind(resp))
	}
}
