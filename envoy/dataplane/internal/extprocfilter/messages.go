package extprocfilter

// The messages the filter sends: headers and bodies and the request
// attributes.

import (
	"unsafe"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

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
func (e *Filter) addAttributes(req *extprocv3.ProcessingRequest) {
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
		rules.ExtProcAttrNamespace: rules.ExtProcAttributes(e.f.RequestAttrs, e.cb.TLS()),
	}
}
