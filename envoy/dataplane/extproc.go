package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// This file emulates one ext_proc filter instance on one HTTP stream
// (source/extensions/filters/http/ext_proc/ext_proc.cc and
// processor_state.cc). One gRPC Process stream is opened lazily per HTTP
// request and closed when the request ends, on an ImmediateResponse, or on
// an error.

// streamChunk is the chunk size used for STREAMED bodies.
const streamChunk = 64 << 10

// waitState is what the filter is waiting for (ProcessorState::CallbackState).
type waitState int

const (
	waitRequestHeaders waitState = iota
	waitRequestBody
	waitResponseHeaders
	waitResponseBody
)

func (w waitState) headers() bool { return w == waitRequestHeaders || w == waitResponseHeaders }

// errAbort means the downstream went away; nothing more can be sent.
var errAbort = errors.New("downstream request aborted")

// extProcRun is the per-request state of one ext_proc filter.
type extProcRun struct {
	f                *xdsconfig.ExtProcFilter
	x                *activeStream
	mode             *extprocfilterv3.ProcessingMode // current mode, both directions
	modeBuf          extprocfilterv3.ProcessingMode  // where mode points, unless overridden
	failureModeAllow bool
	receiving        []string
	forwarding       []string
	md               metadata.MD

	complete    bool // processing_complete_
	stream      extprocv3.ExternalProcessor_ProcessClient
	cancel      context.CancelFunc
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

func newExtProcRun(x *activeStream, f *xdsconfig.ExtProcFilter, pr *xdsconfig.ExtProcPerRoute) *extProcRun {
	e := &extProcRun{}
	e.init(x, f, pr)
	return e
}

// init makes e a new filter instance in place, for newExtProcRun and for
// applyPerRoute, which replaces an instance without a second allocation.
func (e *extProcRun) init(x *activeStream, f *xdsconfig.ExtProcFilter, pr *xdsconfig.ExtProcPerRoute) {
	*e = extProcRun{
		f:                f,
		x:                x,
		failureModeAllow: f.FailureModeAllow,
		receiving:        f.Receiving,
		forwarding:       f.Forwarding,
		md:               f.InitialMetadata,
	}
	e.setMode(f.Mode)
	if pr != nil {
		// Filter::mergePerRouteConfig: disabled skips both header phases,
		// and with no body modes set nothing is ever sent.
		if pr.Disabled {
			e.setMode(&extprocfilterv3.ProcessingMode{
				RequestHeaderMode:  extprocfilterv3.ProcessingMode_SKIP,
				ResponseHeaderMode: extprocfilterv3.ProcessingMode_SKIP,
			})
		} else if pr.Mode != nil {
			e.setMode(pr.Mode)
		}
		if pr.HasReceiving {
			e.receiving = pr.Receiving
		}
		if pr.HasForwarding {
			e.forwarding = pr.Forwarding
		}
		if pr.FailureModeAllow != nil {
			e.failureModeAllow = *pr.FailureModeAllow
		}
		if pr.InitialMetadata != nil {
			md := metadata.Join(e.md)
			for k, v := range pr.InitialMetadata {
				md[k] = v
			}
			e.md = md
		}
	}
}

// setMode makes e.mode a copy of m (copyMode) held in e itself.
func (e *extProcRun) setMode(m *extprocfilterv3.ProcessingMode) {
	xdsconfig.CopyModeInto(&e.modeBuf, m)
	e.mode = &e.modeBuf
}

// immediate handles an ImmediateResponse (Filter::sendImmediateResponse).
func (e *extProcRun) immediate(resp *extprocv3.ProcessingResponse) *xdsconfig.LocalReply {
	if e.f.DisableImmediate {
		return e.spurious(resp, rules.SpuriousImmediateDisabled)
	}
	e.setMetadata(resp)
	e.complete = true
	e.close()
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
					e.x.log.Debug("ext_proc immediate response mutation failed", "filter", e.f.Name, "error", err)
				}
			}
		},
	}
}

// spurious handles a message the filter cannot take now (onReceiveMessage,
// FailedPrecondition; see rules.go): with failure_mode_allow the stream is
// closed and the request continues without the server, otherwise it is a
// local reply with status_on_error and msg as details.
func (e *extProcRun) spurious(resp *extprocv3.ProcessingResponse, msg string) *xdsconfig.LocalReply {
	// onReceiveMessage stores the dynamic metadata of any typed response
	// before its handler finds it out of order.
	switch resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders, *extprocv3.ProcessingResponse_RequestBody,
		*extprocv3.ProcessingResponse_ResponseHeaders, *extprocv3.ProcessingResponse_ResponseBody,
		*extprocv3.ProcessingResponse_RequestTrailers, *extprocv3.ProcessingResponse_ResponseTrailers:
		e.setMetadata(resp)
	}
	e.x.log.Warn("spurious ext_proc response", "filter", e.f.Name, "type", fmt.Sprintf("%T", resp.GetResponse()), "error", msg)
	if e.failureModeAllow || !rules.FailCloseSpurious {
		e.finishAndContinue()
		return nil
	}
	return e.failed(errors.New(msg))
}

// failed is Filter::handleErrorResponse: an error in applying a response
// becomes a local reply with status_on_error (default 500) and the error
// text as details.
func (e *extProcRun) failed(err error) *xdsconfig.LocalReply {
	e.complete = true
	e.close()
	return &xdsconfig.LocalReply{Code: e.f.StatusOnError, Details: rules.ResponseDetails(err.Error())}
}

// setMetadata is Filter::setDynamicMetadata: only namespaces listed in
// metadata_options.receiving_namespaces.untyped are stored, merged key by key.
func (e *extProcRun) setMetadata(resp *extprocv3.ProcessingResponse) {
	dm := resp.GetDynamicMetadata()
	if dm == nil || len(e.receiving) == 0 {
		return
	}
	for ns, v := range dm.GetFields() {
		if !contains(e.receiving, ns) {
			e.x.log.Debug("ext_proc metadata namespace not received", "namespace", ns)
			continue
		}
		e.x.setMetadata(ns, v.GetStructValue())
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// decodeHeaders is Filter::decodeHeaders.
func (e *extProcRun) decodeHeaders(eos bool) (*xdsconfig.LocalReply, error) {
	x := e.x
	removeCL := rules.ShouldRemoveContentLength(e.mode.GetRequestBodyMode(), e.mode.GetRequestHeaderMode() != extprocfilterv3.ProcessingMode_SKIP, e.f.AllowCL)
	if e.complete || e.mode.GetRequestHeaderMode() == extprocfilterv3.ProcessingMode_SKIP {
		if removeCL && !e.complete {
			x.reqH.Del("content-length")
		}
		return nil, nil
	}
	lr := e.send(headersMessage(waitRequestHeaders, eos), x.reqH)
	if lr != nil {
		return lr, nil
	}
	// The content-length removal happens right after the headers are sent,
	// with the mode in force then.
	if removeCL && !e.complete {
		x.reqH.Del("content-length")
	}
	resp, lr, err := e.wait(waitRequestHeaders)
	if resp == nil {
		return lr, err
	}
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		e.setMetadata(resp)
		cr := r.RequestHeaders.GetResponse()
		if err := e.applyCommonHeaders(cr, x.reqH, e.mode.GetRequestBodyMode(), true); err != nil {
			return e.failed(err), nil
		}
		if rules.ClearRouteCacheHonoured(e.f.RouteCacheAction, cr.GetHeaderMutation() != nil, cr.GetClearRouteCache()) {
			x.clearRouteCache()
		} else if cr.GetClearRouteCache() {
			x.log.Debug("ext_proc clear_route_cache ignored", "filter", e.f.Name, "reason", "no header_mutation or route_cache_action")
		}
		if cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
			if cr.GetBodyMutation() != nil {
				x.reqH.Del("content-length")
				x.req.replace(applyBodyMutation(cr.GetBodyMutation(), nil))
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
func (e *extProcRun) applyCommonHeaders(cr *extprocv3.CommonResponse, h *headers.Map, body extprocfilterv3.ProcessingMode_BodySendMode, sendHeaders bool) error {
	if cr.GetHeaderMutation() == nil {
		return nil
	}
	return applyHeaderMutation(cr.GetHeaderMutation(), h, e.f.Checker,
		cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
		rules.ShouldRemoveContentLength(body, sendHeaders, e.f.AllowCL), e.limits(h))
}

// limits are the header limits of h: the HTTP connection manager's for the
// request headers, the upstream codec's defaults for response headers
// (cluster common_http_protocol_options.max_headers_count and
// max_response_headers_kb are not emulated; their defaults are 100 and 60
// KiB [verify]).
func (e *extProcRun) limits(h *headers.Map) headerLimits {
	if h == e.x.reqH {
		return headerLimits{count: e.x.cfg.HCM.MaxHeaders, kb: e.x.cfg.HCM.MaxHeadersBytes >> 10}
	}
	return headerLimits{count: rules.DefaultMaxHeadersCount, kb: rules.DefaultMaxHeadersKB}
}

// bufferedBody exchanges one buffered (or partial) body and applies the
// answer: BufferedBodyCallback / BufferedPartialBodyCallback. h is the held
// header map (header mutations apply because headers are still held).
func (e *extProcRun) bufferedBody(dir waitState, h *headers.Map, body []byte, eos bool) ([]byte, *xdsconfig.LocalReply, error) {
	if lr := e.send(bodyMessage(dir, body, eos), nil); lr != nil || e.complete {
		return body, lr, nil
	}
	resp, lr, err := e.wait(dir)
	if resp == nil {
		return body, lr, err
	}
	var cr *extprocv3.CommonResponse
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestBody:
		if dir != waitRequestBody {
			return body, e.spurious(resp, rules.SpuriousKind(resp)), nil
		}
		cr = r.RequestBody.GetResponse()
	case *extprocv3.ProcessingResponse_ResponseBody:
		if dir != waitResponseBody {
			return body, e.spurious(resp, rules.SpuriousKind(resp)), nil
		}
		cr = r.ResponseBody.GetResponse()
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return body, e.immediate(resp), nil
	default:
		return body, e.spurious(resp, rules.SpuriousKind(resp)), nil
	}
	e.setMetadata(resp)
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
		e.x.clearRouteCache()
	}
	return body, nil, nil
}

// streamedChunk exchanges one STREAMED chunk (StreamedBodyCallback). Header
// mutations are ignored — the headers are gone — but clear_route_cache is
// still evaluated against the presence of a header_mutation, as in
// ProcessorState::handleBodyResponse.
func (e *extProcRun) streamedChunk(dir waitState, chunk []byte, eos bool) ([]byte, *xdsconfig.LocalReply, error) {
	if lr := e.send(bodyMessage(dir, chunk, eos), nil); lr != nil || e.complete {
		return chunk, lr, nil
	}
	resp, lr, err := e.wait(dir)
	if resp == nil {
		return chunk, lr, err
	}
	var cr *extprocv3.CommonResponse
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestBody:
		if dir != waitRequestBody {
			return chunk, e.spurious(resp, rules.SpuriousKind(resp)), nil
		}
		cr = r.RequestBody.GetResponse()
	case *extprocv3.ProcessingResponse_ResponseBody:
		if dir != waitResponseBody {
			return chunk, e.spurious(resp, rules.SpuriousKind(resp)), nil
		}
		cr = r.ResponseBody.GetResponse()
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return chunk, e.immediate(resp), nil
	default:
		return chunk, e.spurious(resp, rules.SpuriousKind(resp)), nil
	}
	e.setMetadata(resp)
	if cr.GetBodyMutation().GetStreamedResponse() != nil {
		return chunk, e.spurious(resp, rules.SpuriousStreamedResponse), nil
	}
	if cr.GetBodyMutation() != nil {
		chunk = applyBodyMutation(cr.GetBodyMutation(), chunk)
	}
	if dir == waitRequestBody && rules.ClearRouteCacheHonoured(e.f.RouteCacheAction, cr.GetHeaderMutation() != nil, cr.GetClearRouteCache()) {
		e.x.clearRouteCache()
	}
	return chunk, nil, nil
}

// encodeHeaders is Filter::encodeHeaders. It returns whether a
// CONTINUE_AND_REPLACE replaced the body, and the replacement.
func (e *extProcRun) encodeHeaders(h *headers.Map, eos bool) (replaced []byte, didReplace bool, lr *xdsconfig.LocalReply, err error) {
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

// setMetadata merges one namespace into the stream's dynamic metadata
// (StreamInfo::setDynamicMetadata uses MergeFrom).
func (x *activeStream) setMetadata(ns string, st *structpb.Struct) {
	if st == nil {
		return
	}
	cur, ok := x.meta[ns]
	if !ok {
		// The received struct itself, never written to: a later merge
		// into the namespace makes a new one.
		if x.meta == nil {
			x.meta = map[string]*structpb.Struct{}
		}
		x.meta[ns] = st
		return
	}
	merged := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(cur.GetFields())+len(st.GetFields()))}
	for k, v := range cur.GetFields() {
		merged.Fields[k] = v
	}
	for k, v := range st.GetFields() {
		merged.Fields[k] = v
	}
	x.meta[ns] = merged
}

// forwardMetadata builds metadata_context from the forwarding namespaces.
func (x *activeStream) forwardMetadata(ns []string) *corev3.Metadata {
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	for _, n := range ns {
		if st, ok := x.meta[n]; ok {
			md.FilterMetadata[n] = st
		}
	}
	return md
}

// headersMessage is a request_headers (dir waitRequestHeaders) or
// response_headers message without headers, in one allocation rather than
// three: the message, its oneof wrapper and the HttpHeaders.
func headersMessage(dir waitState, eos bool) *extprocv3.ProcessingRequest {
	if dir == waitRequestHeaders {
		m := &struct {
			req extprocv3.ProcessingRequest
			one extprocv3.ProcessingRequest_RequestHeaders
			h   extprocv3.HttpHeaders
		}{}
		m.h.EndOfStream = eos
		m.one.RequestHeaders = &m.h
		m.req.Request = &m.one
		return &m.req
	}
	m := &struct {
		req extprocv3.ProcessingRequest
		one extprocv3.ProcessingRequest_ResponseHeaders
		h   extprocv3.HttpHeaders
	}{}
	m.h.EndOfStream = eos
	m.one.ResponseHeaders = &m.h
	m.req.Request = &m.one
	return &m.req
}

// bodyMessage is a request_body (dir waitRequestBody) or response_body
// message, in one allocation like headersMessage.
func bodyMessage(dir waitState, body []byte, eos bool) *extprocv3.ProcessingRequest {
	if dir == waitRequestBody {
		m := &struct {
			req extprocv3.ProcessingRequest
			one extprocv3.ProcessingRequest_RequestBody
			b   extprocv3.HttpBody
		}{}
		m.b.Body, m.b.EndOfStream = body, eos
		m.one.RequestBody = &m.b
		m.req.Request = &m.one
		return &m.req
	}
	m := &struct {
		req extprocv3.ProcessingRequest
		one extprocv3.ProcessingRequest_ResponseBody
		b   extprocv3.HttpBody
	}{}
	m.b.Body, m.b.EndOfStream = body, eos
	m.one.ResponseBody = &m.b
	m.req.Request = &m.one
	return &m.req
}

// bytesString is b as a string without copying it. Only for bytes nothing
// writes to afterwards, such as a field of a message received from the
// stream: an ImmediateResponse body can be megabytes, and the local reply
// only reads it.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// addAttributes is Filter::addAttributes for the decoding state.
func (e *extProcRun) addAttributes(req *extprocv3.ProcessingRequest) {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders, *extprocv3.ProcessingRequest_RequestBody,
		*extprocv3.ProcessingRequest_RequestTrailers:
	default:
		return
	}
	if e.attrsSent || len(e.f.RequestAttrs) == 0 {
		return
	}
	e.attrsSent = true
	req.Attributes = map[string]*structpb.Struct{
		rules.ExtProcAttrNamespace: rules.ExtProcAttributes(e.f.RequestAttrs, e.x.r.TLS),
	}
}
