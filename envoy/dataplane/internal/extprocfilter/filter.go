// Package extprocfilter is the local data plane's ext_proc HTTP filter: one
// instance per filter and HTTP stream, as
// source/extensions/filters/http/ext_proc/ext_proc.cc and
// processor_state.cc run it. The connection manager's stream
// (dataplane.activeStream) drives it through the phases (DecodeHeaders,
// BufferedBody, EncodeHeaders, the STREAMED and FULL_DUPLEX_STREAMED body
// readers) and gives it what it needs of the stream through [Callbacks].
// One gRPC Process stream is opened lazily per HTTP request and closed when
// the request ends, on an ImmediateResponse, or on an error. The Envoy rules
// it follows are in the rules package (rules_extproc.go).
package extprocfilter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// Callbacks is the HTTP stream a filter instance runs on, as the filter sees
// it (Envoy's StreamDecoderFilterCallbacks and StreamEncoderFilterCallbacks,
// with the stream info's dynamic metadata).
type Callbacks interface {
	// RequestHeaders is the request header map the filters share.
	RequestHeaders() *headers.Map
	// HeaderLimits are the limits of header map h: the connection
	// manager's max_headers_count and max_request_headers_kb for the
	// request headers, those of the response header map for response
	// headers (the upstream codec's for an upstream response).
	HeaderLimits(h *headers.Map) (count, kb int)
	// ReplaceRequestBody replaces the request body (CONTINUE_AND_REPLACE
	// on the request headers).
	ReplaceRequestBody(body []byte)
	// ClearRouteCache makes the next route lookup match again.
	ClearRouteCache()
	// SetDynamicMetadata merges st into the namespace ns of the stream's
	// dynamic metadata.
	SetDynamicMetadata(ns string, st *structpb.Struct)
	// TLS is the downstream connection's TLS state, nil for plaintext.
	TLS() *tls.ConnectionState
	// StreamIdleTimeout is the stream idle timeout in force (0: none), and
	// OnStreamIdleTimeout records that it fired (flag SI and its details).
	StreamIdleTimeout() time.Duration
	OnStreamIdleTimeout()
	// Reset resets the downstream stream; it does not return.
	Reset(err error)
}

// Client is the ext_proc gRPC client the filters of a data plane share.
type Client struct {
	// Processor opens the Process streams; nil when there is no
	// connection (every stream then fails as Unavailable).
	Processor Opener
	// Own reports a connection the data plane dialled itself: its streams
	// carry the filter's cluster name as :authority. An injected
	// connection (tests, mTLS) keeps its own: grpc-go checks an override
	// against its credentials.
	Own bool
}

// Opener opens a Process stream. release, when not nil, gives the
// stream's place on a pooled connection back; the filter calls it as it
// closes the stream.
type Opener interface {
	Open(ctx context.Context, opts ...grpc.CallOption) (st extprocv3.ExternalProcessor_ProcessClient, release func(), err error)
}

// Unpooled opens every stream on one connection, with nothing to release.
type Unpooled struct {
	extprocv3.ExternalProcessorClient
}

// Open implements Opener.
func (u Unpooled) Open(ctx context.Context, opts ...grpc.CallOption) (extprocv3.ExternalProcessor_ProcessClient, func(), error) {
	st, err := u.Process(ctx, opts...)
	return st, nil, err
}

// streamChunk is the chunk size used for STREAMED bodies.
const streamChunk = 64 << 10

// readBufs are the streamChunk read buffers of streamed and full-duplex
// bodies, one a body while it is read: a new one per call was half of the
// bytes the data plane allocated on a federated call. Every chunk leaves
// as a copy of what was read, so a buffer is reused only once its body
// stopped reading into it.
var readBufs = sync.Pool{New: func() any { return new([streamChunk]byte) }}

// waitState is what the filter is waiting for (ProcessorState::CallbackState).
type waitState int

const (
	waitRequestHeaders waitState = iota
	waitRequestBody
	waitResponseHeaders
	waitResponseBody
)

// Decoding and Encoding are the directions of a body, named by the body
// state the request's (decoding) or response's (encoding) ProcessorState
// waits in.
const (
	Decoding = waitRequestBody
	Encoding = waitResponseBody
)

func (w waitState) headers() bool { return w == waitRequestHeaders || w == waitResponseHeaders }

// ErrAbort means the downstream went away; nothing more can be sent.
var ErrAbort = errors.New("downstream request aborted")

// Filter is the per-request state of one ext_proc filter.
type Filter struct {
	f       *xdsconfig.ExtProcFilter
	cb      Callbacks
	client  *Client
	ctx     context.Context // the downstream request's
	log     *slog.Logger
	mode    *extprocfilterv3.ProcessingMode // current mode, both directions
	modeBuf extprocfilterv3.ProcessingMode  // where mode points, unless overridden

	complete    bool // processing_complete_
	stream      extprocv3.ExternalProcessor_ProcessClient
	cancel      context.CancelFunc
	release     func() // the stream's place on a pooled connection (Opener)
	sentFirst   bool
	timeoutUsed bool // an override_message_timeout was honoured in this state
	// attrsSent is the decoding state's attributes_sent_ (rules.go,
	// extProcAttributes).
	attrsSent bool
	// timer is the message timer, re-armed for every wait of the stream;
	// nil before the first wait and after one whose timer fired.
	timer *msgTimer
	// firstTimer is the stream's first message timer, held here rather
	// than allocated; a timer that fired is never reused, so a later one
	// is allocated.
	firstTimer     msgTimer
	firstTimerUsed bool
	// protocolConfig is the first message's protocol_config.
	protocolConfig extprocv3.ProtocolConfiguration
	// duplex is the FULL_DUPLEX_STREAMED response body, once there is one.
	duplex *duplexReader
}

// msgTimer is a message timer and the race it decides: whether the answer
// or the timeout came first.
type msgTimer struct {
	t     *time.Timer
	state atomic.Int32 // msgWaiting, msgAnswered or msgTimedOut
}

const (
	msgWaiting int32 = iota
	msgAnswered
	msgTimedOut
)

// New is an instance of filter f on the stream of ctx (the downstream
// request's context, which ends when the client goes away).
func New(ctx context.Context, log *slog.Logger, cb Callbacks, client *Client, f *xdsconfig.ExtProcFilter) *Filter {
	e := &Filter{f: f, cb: cb, client: client, ctx: ctx, log: log}
	xdsconfig.CopyModeInto(&e.modeBuf, f.Mode)
	e.mode = &e.modeBuf
	return e
}

// immediate handles an ImmediateResponse (Filter::sendImmediateResponse).
func (e *Filter) immediate(resp *extprocv3.ProcessingResponse) *xdsconfig.LocalReply {
	if e.f.DisableImmediate {
		return e.spurious(resp, rules.SpuriousImmediateDisabled)
	}
	e.setMetadata(resp)
	e.finishAndContinue()
	ir := resp.GetImmediateResponse()
	hm := ir.GetHeaders()
	return &xdsconfig.LocalReply{
		Code:    rules.ImmediateStatus(int(ir.GetStatus().GetCode())),
		Body:    bytesString(ir.GetBody()),
		Details: rules.ResponseDetails(ir.GetDetails()),
		Modify: func(h *headers.Map) {
			if hm != nil {
				// Checked against the filter's mutation_rules; errors are
				// logged and ignored, what was applied so far stays.
				if err := applyHeaderMutation(hm, h, e.f.Checker, false, false, headerLimits{}); err != nil {
					e.log.Debug("ext_proc immediate response mutation failed", "filter", e.f.Name, "error", err)
				}
			}
		},
	}
}

// spurious handles a message the filter cannot take now (onReceiveMessage,
// FailedPrecondition; see rules.go): with failure_mode_allow the stream is
// closed and the request continues without the server, otherwise it is a
// local reply with status_on_error and msg as details.
func (e *Filter) spurious(resp *extprocv3.ProcessingResponse, msg string) *xdsconfig.LocalReply {
	// onReceiveMessage stores the dynamic metadata of any typed response
	// before its handler finds it out of order.
	switch resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders, *extprocv3.ProcessingResponse_RequestBody,
		*extprocv3.ProcessingResponse_ResponseHeaders, *extprocv3.ProcessingResponse_ResponseBody,
		*extprocv3.ProcessingResponse_RequestTrailers, *extprocv3.ProcessingResponse_ResponseTrailers:
		e.setMetadata(resp)
	}
	e.log.Warn("spurious ext_proc response", "filter", e.f.Name, "type", fmt.Sprintf("%T", resp.GetResponse()), "error", msg)
	if e.f.FailureModeAllow || !rules.FailCloseSpurious {
		e.finishAndContinue()
		return nil
	}
	return e.failed(errors.New(msg))
}

// failed is Filter::handleErrorResponse: an error in applying a response
// becomes a local reply with status_on_error (default 500) and the error
// text as details.
func (e *Filter) failed(err error) *xdsconfig.LocalReply {
	e.finishAndContinue()
	return &xdsconfig.LocalReply{Code: e.f.StatusOnError, Details: rules.ResponseDetails(err.Error())}
}

// setMetadata is Filter::setDynamicMetadata: only namespaces listed in
// metadata_options.receiving_namespaces.untyped are stored, merged key by key.
func (e *Filter) setMetadata(resp *extprocv3.ProcessingResponse) {
	dm := resp.GetDynamicMetadata()
	if dm == nil || len(e.f.Receiving) == 0 {
		return
	}
	for ns, v := range dm.GetFields() {
		if !slices.Contains(e.f.Receiving, ns) {
			e.log.Debug("ext_proc metadata namespace not received", "namespace", ns)
			continue
		}
		e.cb.SetDynamicMetadata(ns, v.GetStructValue())
	}
}

// DecodeHeaders is Filter::decodeHeaders.
func (e *Filter) DecodeHeaders(eos bool) (*xdsconfig.LocalReply, error) {
	reqH := e.cb.RequestHeaders()
	removeCL := rules.ShouldRemoveContentLength(e.mode.GetRequestBodyMode(), e.mode.GetRequestHeaderMode() != extprocfilterv3.ProcessingMode_SKIP, e.f.AllowCL)
	if e.complete || e.mode.GetRequestHeaderMode() == extprocfilterv3.ProcessingMode_SKIP {
		if removeCL && !e.complete {
			reqH.Del("content-length")
		}
		return nil, nil
	}
	lr := e.send(headersMessage(waitRequestHeaders, eos), reqH)
	if lr != nil {
		return lr, nil
	}
	// The content-length removal happens right after the headers are sent,
	// with the mode in force then.
	if removeCL && !e.complete {
		reqH.Del("content-length")
	}
	resp, lr, err := e.wait(waitRequestHeaders)
	if resp == nil {
		return lr, err
	}
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		e.setMetadata(resp)
		cr := r.RequestHeaders.GetResponse()
		if err := e.applyCommonHeaders(cr, reqH, e.mode.GetRequestBodyMode(), true); err != nil {
			return e.failed(err), nil
		}
		if rules.ClearRouteCacheHonoured(e.f.RouteCacheAction, cr.GetHeaderMutation() != nil, cr.GetClearRouteCache()) {
			e.cb.ClearRouteCache()
		} else if cr.GetClearRouteCache() {
			e.log.Debug("ext_proc clear_route_cache ignored", "filter", e.f.Name, "reason", "no header_mutation or route_cache_action")
		}
		if cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
			if cr.GetBodyMutation() != nil {
				reqH.Del("content-length")
				e.cb.ReplaceRequestBody(applyBodyMutation(cr.GetBodyMutation(), nil))
			}
			e.mode.RequestBodyMode = extprocfilterv3.ProcessingMode_NONE
			e.mode.RequestTrailerMode = extprocfilterv3.ProcessingMode_SKIP
		}
		return nil, nil
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return e.immediate(resp), nil
	default:
		return e.spurious(resp, rules.SpuriousKind(resp)), nil
	}
}

// applyCommonHeaders applies a CommonResponse header_mutation to h.
func (e *Filter) applyCommonHeaders(cr *extprocv3.CommonResponse, h *headers.Map, body extprocfilterv3.ProcessingMode_BodySendMode, sendHeaders bool) error {
	if cr.GetHeaderMutation() == nil {
		return nil
	}
	return applyHeaderMutation(cr.GetHeaderMutation(), h, e.f.Checker,
		cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
		rules.ShouldRemoveContentLength(body, sendHeaders, e.f.AllowCL), newHeaderLimits(e.cb.HeaderLimits(h)))
}

// Complete reports that processing is complete (processing_complete_):
// the filter passes everything on without the server.
func (e *Filter) Complete() bool { return e.complete }

// Mode is the processing mode in force, both directions.
func (e *Filter) Mode() *extprocfilterv3.ProcessingMode { return e.mode }

// BufferedBody exchanges one BUFFERED or BUFFERED_PARTIAL body of
// direction dir (eos: the whole body) and applies the answer
// (BufferedBodyCallback / BufferedPartialBodyCallback): it returns the body
// as the server left it, or the local reply a failure is. h is the held
// header map (header mutations apply because headers are still held).
func (e *Filter) BufferedBody(dir waitState, h *headers.Map, body []byte, eos bool) ([]byte, *xdsconfig.LocalReply, error) {
	resp, cr, lr, err := e.exchangeBody(dir, body, eos)
	if resp == nil {
		return body, lr, err
	}
	bodyMode, sendHeaders := e.mode.GetRequestBodyMode(), e.mode.GetRequestHeaderMode() != extprocfilterv3.ProcessingMode_SKIP
	if dir == waitResponseBody {
		bodyMode, sendHeaders = e.mode.GetResponseBodyMode(), e.mode.GetResponseHeaderMode() != extprocfilterv3.ProcessingMode_SKIP
	}
	if err := e.applyCommonHeaders(cr, h, bodyMode, sendHeaders); err != nil {
		return body, e.failed(err), nil
	}
	if cr.GetBodyMutation() != nil {
		if bodyMode == extprocfilterv3.ProcessingMode_BUFFERED {
			if err := checkContentLength(h, cr.GetBodyMutation()); err != nil {
				return body, e.failed(err), nil
			}
		}
		body = applyBodyMutation(cr.GetBodyMutation(), body)
	}
	if dir == waitRequestBody && rules.ClearRouteCacheHonoured(e.f.RouteCacheAction, cr.GetHeaderMutation() != nil, cr.GetClearRouteCache()) {
		e.cb.ClearRouteCache()
	}
	return body, nil, nil
}

// streamedChunk exchanges one STREAMED chunk (StreamedBodyCallback). Header
// mutations are ignored — the headers are gone — but clear_route_cache is
// still evaluated against the presence of a header_mutation, as in
// ProcessorState::handleBodyResponse.
func (e *Filter) streamedChunk(dir waitState, chunk []byte, eos bool) ([]byte, *xdsconfig.LocalReply, error) {
	resp, cr, lr, err := e.exchangeBody(dir, chunk, eos)
	if resp == nil {
		return chunk, lr, err
	}
	if cr.GetBodyMutation().GetStreamedResponse() != nil {
		return chunk, e.spurious(resp, rules.SpuriousStreamedResponse), nil
	}
	if cr.GetBodyMutation() != nil {
		chunk = applyBodyMutation(cr.GetBodyMutation(), chunk)
	}
	if dir == waitRequestBody && rules.ClearRouteCacheHonoured(e.f.RouteCacheAction, cr.GetHeaderMutation() != nil, cr.GetClearRouteCache()) {
		e.cb.ClearRouteCache()
	}
	return chunk, nil, nil
}

// exchangeBody sends one body message of direction dir and waits for the
// server's body response of that direction, whose dynamic metadata it
// stores. resp is nil when none came: then lr is the local reply it came
// to instead (nil, nil: processing completed without the server).
func (e *Filter) exchangeBody(dir waitState, body []byte, eos bool) (resp *extprocv3.ProcessingResponse, cr *extprocv3.CommonResponse, lr *xdsconfig.LocalReply, err error) {
	if lr := e.send(bodyMessage(dir, body, eos), nil); lr != nil || e.complete {
		return nil, nil, lr, nil
	}
	if resp, lr, err = e.wait(dir); resp == nil {
		return nil, nil, lr, err
	}
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestBody:
		if dir == waitRequestBody {
			e.setMetadata(resp)
			return resp, r.RequestBody.GetResponse(), nil, nil
		}
	case *extprocv3.ProcessingResponse_ResponseBody:
		if dir == waitResponseBody {
			e.setMetadata(resp)
			return resp, r.ResponseBody.GetResponse(), nil, nil
		}
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return nil, nil, e.immediate(resp), nil
	}
	return nil, nil, e.spurious(resp, rules.SpuriousKind(resp)), nil
}

// EncodeHeaders is Filter::encodeHeaders. It returns whether a
// CONTINUE_AND_REPLACE replaced the body, and the replacement.
func (e *Filter) EncodeHeaders(h *headers.Map, eos bool) (replaced []byte, didReplace bool, lr *xdsconfig.LocalReply, err error) {
	removeCL := rules.ShouldRemoveContentLength(e.mode.GetResponseBodyMode(), e.mode.GetResponseHeaderMode() != extprocfilterv3.ProcessingMode_SKIP, e.f.AllowCL)
	if e.complete {
		return nil, false, nil, nil
	}
	if e.mode.GetResponseHeaderMode() == extprocfilterv3.ProcessingMode_SKIP {
		if e.mode.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_NONE {
			// Nothing more to process: Envoy closes the stream here.
			e.finishAndContinue()
			return nil, false, nil, nil
		}
		if removeCL {
			h.Del("content-length")
		}
		return nil, false, nil, nil
	}
	if lr := e.send(headersMessage(waitResponseHeaders, eos), h); lr != nil {
		return nil, false, lr, nil
	}
	if removeCL && !e.complete {
		h.Del("content-length")
	}
	resp, lr, err := e.wait(waitResponseHeaders)
	if resp == nil {
		return nil, false, lr, err
	}
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		e.setMetadata(resp)
		cr := r.ResponseHeaders.GetResponse()
		if err := e.applyCommonHeaders(cr, h, e.mode.GetResponseBodyMode(), true); err != nil {
			return nil, false, e.failed(err), nil
		}
		// clear_route_cache on the response path has no effect.
		replace := cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
		if replace {
			e.mode.ResponseBodyMode = extprocfilterv3.ProcessingMode_NONE
			e.mode.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SKIP
		}
		if rules.LastResponseHeaders(eos, e.mode) {
			e.finishAndContinue()
		}
		if replace && cr.GetBodyMutation() != nil {
			h.Del("content-length")
			return applyBodyMutation(cr.GetBodyMutation(), nil), true, nil, nil
		}
		return nil, false, nil, nil
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		// Outside the request path Envoy still sends the local reply
		// directly while the response has not started.
		return nil, false, e.immediate(resp), nil
	default:
		return nil, false, e.spurious(resp, rules.SpuriousKind(resp)), nil
	}
}
