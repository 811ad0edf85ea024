package extprocfilter

// The ext_proc filter's gRPC stream: opening, sending, waiting with the
// message timer, and closing it (filter.go has the filter's phases).

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// open opens the gRPC stream if needed (Filter::openStream). A failure to
// open is handled like a gRPC error on the stream.
func (e *Filter) open() *xdsconfig.LocalReply {
	if e.stream != nil {
		return nil
	}
	client := e.client.Processor
	if client == nil {
		return e.onGrpcError(status.Error(codes.Unavailable, "no ext_proc connection"))
	}
	ctx, cancel := context.WithCancel(e.ctx)
	if len(e.f.InitialMetadata) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, e.f.InitialMetadata)
	}
	opts := xdsconfig.ExtProcCallOptions
	if e.client.Own {
		// An injected connection (tests, mTLS) keeps its own authority:
		// grpc-go checks an override against its credentials.
		opts = e.f.CallOptions
	}
	st, release, err := client.Open(ctx, opts...)
	if err != nil {
		cancel()
		return e.onGrpcError(err)
	}
	e.stream, e.cancel, e.release = st, cancel, release
	return nil
}

// Close ends the gRPC stream (Filter::closeStream). Envoy's default close is
// not graceful: ExternalProcessorStreamImpl::close half-closes and then
// resets the stream, and the server sees it end (EOF or Canceled). Here
// CloseSend is the half-close and the context's cancel the reset (rules.go,
// "ext_proc gRPC client connection", for the RST_STREAM code).
func (e *Filter) Close() {
	if e.stream == nil {
		return
	}
	_ = e.stream.CloseSend()
	if e.release != nil {
		// A pooled stream gives its place back before the cancel, which
		// would otherwise start a goroutine to do it (Opener).
		e.release()
	}
	e.cancel()
	e.stream, e.release = nil, nil
	e.timer = nil // it calls this stream's cancel
}

// End closes the stream as the request ends, whatever state it is in. A
// FULL_DUPLEX_STREAMED body the client stopped reading is ended first, so
// that its reading goroutine sends nothing more.
func (e *Filter) End() {
	if d := e.duplex; d != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.done && d.err == nil {
			d.finish(ErrAbort)
		}
	}
	e.Close()
}

// finishAndContinue marks processing complete (processing_complete_) and
// closes the stream: the request continues without the server, or ends in
// the local reply of a failure.
func (e *Filter) finishAndContinue() {
	e.complete = true
	e.Close()
}

// onGrpcError is Filter::onGrpcError.
func (e *Filter) onGrpcError(err error) *xdsconfig.LocalReply {
	st := e.envoyStatus(err)
	e.log.Debug("ext_proc stream error", "filter", e.f.Name, "code", st.Code(), "message", st.Message())
	e.finishAndContinue()
	if e.f.FailureModeAllow {
		return nil
	}
	return e.grpcErrorReply(st)
}

// grpcErrorReply is the local reply of a gRPC error: status_on_error, with
// the status in the details.
func (e *Filter) grpcErrorReply(st *status.Status) *xdsconfig.LocalReply {
	return &xdsconfig.LocalReply{Code: e.f.StatusOnError, Details: rules.GRPCErrorDetails(uint32(st.Code()), st.Message())}
}

// envoyStatus is the status Envoy's gRPC client would report for err, one
// of grpc-go's (rules.go, "ext_proc gRPC client connection"): a connect
// failure is the router's local reply, Unavailable with its text and
// details; a reset stream, or a connection lost after the response
// headers, is Internal (AsyncStreamImpl::onReset).
func (e *Filter) envoyStatus(err error) *status.Status {
	st := status.Convert(err)
	msg := st.Message()
	switch {
	case st.Code() == codes.Unavailable && strings.Contains(msg, "while dialing"):
		why := msg[strings.LastIndex(msg, "while dialing")+len("while dialing"):]
		why = strings.TrimSuffix(strings.TrimPrefix(why, ": "), `"`)
		return status.New(codes.Unavailable, "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure{"+
			rules.DetailsResetBeforeStarted+"{remote_connection_failure|"+rules.ResponseDetails("delayed connect error: "+why)+"}}")
	case strings.HasPrefix(msg, "stream terminated by RST_STREAM"):
		return status.New(codes.Internal, msg)
	case st.Code() == codes.Unavailable && e.stream != nil && !strings.HasPrefix(msg, "upstream"):
		if _, herr := e.stream.Header(); herr == nil {
			return status.New(codes.Internal, msg)
		}
	}
	return st
}

// send sends one message (the first one carries protocol_config, as Envoy
// ≥ 1.36 does) with the forwarded dynamic metadata. A headers message
// comes with its header map, h, which goes into the message as it is now;
// otherwise h is nil.
func (e *Filter) send(req *extprocv3.ProcessingRequest, h *headers.Map) *xdsconfig.LocalReply {
	if lr := e.open(); lr != nil || e.complete {
		return lr
	}
	if !e.sentFirst {
		e.sentFirst = true
		e.protocolConfig.RequestBodyMode = e.mode.GetRequestBodyMode()
		e.protocolConfig.ResponseBodyMode = e.mode.GetResponseBodyMode()
		req.ProtocolConfig = &e.protocolConfig
	}
	e.addAttributes(req)
	e.timeoutUsed = false
	if h != nil {
		hm := h.ToProto()
		if rh := req.GetRequestHeaders(); rh != nil {
			rh.Headers = hm
		} else {
			req.GetResponseHeaders().Headers = hm
		}
	}
	if err := e.stream.Send(req); err != nil {
		if errors.Is(err, io.EOF) {
			// The server already ended the stream; Recv reports how.
			return nil
		}
		return e.onGrpcError(err)
	}
	return nil
}

// wait waits for the server's answer to the message just sent, applying
// message_timeout and override_message_timeout. It returns the response,
// or nil with a local reply (or nil, nil when processing completed and the
// request continues without the server).
//
// The answer is received on the request's own goroutine (no reader
// goroutine and channel hand-off per message). Each Recv has its own timer,
// armed for what is left until the deadline, and one compare-and-swap
// decides whether the answer or the timeout came first; a timeout cancels
// the stream, which ends the Recv, as Envoy's onMessageTimeout closes it.
func (e *Filter) wait(state waitState) (*extprocv3.ProcessingResponse, *xdsconfig.LocalReply, error) {
	if e.complete {
		return nil, nil, nil
	}
	deadline := time.Now().Add(e.f.MessageTimeout)
	for {
		var resp *extprocv3.ProcessingResponse
		ok, err := true, error(nil)
		if e.duplexDirection(state) {
			// ProcessorState::onStartProcessorCall starts no message
			// timer when the direction's body mode is FULL_DUPLEX_STREAMED.
			resp, err = e.stream.Recv()
		} else {
			resp, ok, err = e.recvBy(deadline)
		}
		if !ok {
			// Filter::onMessageTimeout.
			e.log.Debug("ext_proc message timeout", "filter", e.f.Name)
			e.finishAndContinue()
			if e.f.FailureModeAllow {
				return nil, nil, nil
			}
			return nil, &xdsconfig.LocalReply{Code: 504, Details: rules.DetailsMessageTimeout}, nil
		}
		if err != nil {
			if e.ctx.Err() != nil {
				e.Close()
				return nil, nil, ErrAbort
			}
			if errors.Is(err, io.EOF) {
				// Filter::onGrpcClose: a clean close means "continue
				// without the server".
				e.finishAndContinue()
				return nil, nil, nil
			}
			return nil, e.onGrpcError(err), nil
		}
		if d := resp.GetOverrideMessageTimeout(); d != nil {
			// Filter::onNewTimeout: at most once per state, within
			// [1ms, max_message_timeout]; otherwise ignored.
			nd := d.AsDuration()
			if e.f.MaxMessageTimeout >= time.Millisecond && nd >= time.Millisecond &&
				nd <= e.f.MaxMessageTimeout && !e.timeoutUsed {
				e.timeoutUsed = true
				deadline = time.Now().Add(nd)
			}
			continue
		}
		// Filter::onReceiveMessage: a mode_override counts only with
		// allow_mode_override, without
		// send_body_without_waiting_for_header_response, and while a
		// headers message is outstanding; the effective override must
		// pass the allow-list, and then replaces both directions' mode.
		if e.f.AllowModeOverride && !e.f.BodyWithoutWait && state.headers() && resp.GetModeOverride() != nil {
			eff := xdsconfig.EffectiveOverride(e.f.ConfiguredMode, resp.GetModeOverride())
			if state == waitRequestHeaders && eff.GetRequestBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
				// Not emulated (rules.go): ignored rather than half done.
				e.log.Warn("ext_proc mode override to a FULL_DUPLEX_STREAMED request body is not emulated", "filter", e.f.Name)
			} else if e.f.OverrideAllowed(eff) {
				e.mode = xdsconfig.NormalizeMode(eff)
			} else {
				e.log.Debug("ext_proc mode override not in allowed_override_modes", "filter", e.f.Name)
			}
		}
		return resp, nil, nil
	}
}

// duplexDirection reports whether the direction of state has its body in
// FULL_DUPLEX_STREAMED (only the response's can be: rules.go).
func (e *Filter) duplexDirection(state waitState) bool {
	return (state == waitResponseHeaders || state == waitResponseBody) &&
		e.mode.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
}

// DuplexBeforeHeaders reports whether a response with a body meets a
// FULL_DUPLEX_STREAMED response body mode before its headers are sent (a
// request-headers mode_override): DuplexHeaders serves it.
func (e *Filter) DuplexBeforeHeaders(eos bool) bool {
	return !eos && !e.complete && e.duplexDirection(waitResponseHeaders) &&
		e.mode.GetResponseHeaderMode() != extprocfilterv3.ProcessingMode_SKIP
}

// recvBy receives the next message unless the deadline passes first;
// ok is false when it did (the stream is then cancelled).
//
// One timer serves all the waits of a stream (a timer per message was a
// fifth of the data plane's allocations on a routed call). It is re-armed
// only after a Stop that caught it: once it has fired, its function may
// still be about to run, so the next wait gets a timer of its own and a
// late function can only find its own, decided, race.
func (e *Filter) recvBy(deadline time.Time) (resp *extprocv3.ProcessingResponse, ok bool, err error) {
	d := max(time.Until(deadline), 0)
	mt := e.timer
	if mt == nil {
		if !e.firstTimerUsed {
			e.firstTimerUsed = true
			mt = &e.firstTimer
		} else {
			mt = &msgTimer{}
		}
		cancel := e.cancel
		mt.t = time.AfterFunc(d, func() {
			if mt.state.CompareAndSwap(msgWaiting, msgTimedOut) {
				cancel()
			}
		})
		e.timer = mt
	} else {
		mt.state.Store(msgWaiting)
		mt.t.Reset(d)
	}
	resp, err = e.stream.Recv()
	if !mt.t.Stop() {
		e.timer = nil
	}
	return resp, mt.state.CompareAndSwap(msgWaiting, msgAnswered), err
}
