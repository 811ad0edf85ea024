// Package procmsg builds the ext_proc messages the server sends Envoy,
// under the rules of ADR 0001 (envoy/dataplane/internal/rules/rules.go
// cites Envoy's source for each): raw_value only, an explicit
// OVERWRITE_IF_EXISTS_OR_ADD, content-type on every local reply with a
// body, never a grpc_status. It also holds the answers every request
// shares and writes answers in protobuf wire format with the gRPC codec
// that sends them as they are (wire.go), so a large list page is neither
// copied nor encoded twice. It keeps no request state: the stream handler
// (package extproc) decides what to answer, this package how it is written.
package procmsg

import (
	"strings"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// ContentTypeJSON is the content type of every JSON answer.
const ContentTypeJSON = "application/json"

// SetHeader is a header mutation that replaces any value the header had.
func SetHeader(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// HeaderValue is the value of a header as Envoy sends it: in raw_value, or
// in value when the send_header_raw_value runtime flag is off.
//
// The string shares raw_value's bytes rather than copying them (a copy per
// header per message was a tenth of extproc's allocations): they belong to a
// message received from the stream, which nothing writes to, and each is its
// own allocation, so a value kept longer keeps only itself alive.
func HeaderValue(h *corev3.HeaderValue) string {
	if raw := h.GetRawValue(); len(raw) > 0 {
		return unsafe.String(unsafe.SliceData(raw), len(raw))
	}
	return h.GetValue()
}

// FirstHeader is the value of the first header of hm named key, in any
// case: a request's headers as Envoy sent them.
func FirstHeader(hm *corev3.HeaderMap, key string) string {
	for _, h := range hm.GetHeaders() {
		if strings.EqualFold(h.GetKey(), key) {
			return HeaderValue(h)
		}
	}
	return ""
}

// Immediate turns a protocol reply into an ImmediateResponse. A reply in
// Parts is joined here; the stream sends those as a Wire instead
// (ImmediateWire.Encode).
func Immediate(r *mcp.Reply, details string) *extprocv3.ProcessingResponse {
	r.Flatten()
	ir := ImmediateHead(r, len(r.Body) > 0, details)
	ir.Body = r.Body // Envoy sets content-length itself
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: ir},
		// Envoy stores it before sending the reply (ext_proc.cc
		// onReceiveMessage), so local_reply_config can leave this JSON-RPC
		// reply alone while it reshapes Envoy's own 400/413/5xx.
		DynamicMetadata: answeredMetadata,
	}
}

// ImmediateHead is the ImmediateResponse of r without its body.
func ImmediateHead(r *mcp.Reply, hasBody bool, details string) *extprocv3.ImmediateResponse {
	set := make([]*corev3.HeaderValueOption, 0, len(r.Headers)+1)
	hasType := false
	for _, h := range r.Headers {
		key := strings.ToLower(h.Key)
		hasType = hasType || key == "content-type"
		set = append(set, SetHeader(key, h.Value))
	}
	if hasBody && !hasType {
		// Without it Envoy labels a local reply text/plain.
		set = append(set, SetHeader("content-type", ContentTypeJSON))
	}
	var mut *extprocv3.HeaderMutation
	if len(set) > 0 {
		mut = &extprocv3.HeaderMutation{SetHeaders: set}
	}
	return &extprocv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode(r.Status)},
		Headers: mut,
		Details: details,
	}
}

// answeredMetadata marks an ImmediateResponse of this server.
var answeredMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{
	wire.MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		wire.MetadataAnswered: structpb.NewStringValue("true"),
	}}),
}}

// RequestHeaders answers a request_headers message.
func RequestHeaders(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{Response: cr},
		},
	}
}

// Answers that are the same for every request, built once and shared: gRPC
// only reads a message it marshals, and nothing may change an answer once
// it is built. The codec sends each as its encoding made once (wire.go).
var (
	// RemoveClusterHeader answers request headers that carry no client
	// x-toolmesh-* header: only the routing header is removed.
	RemoveClusterHeader = RequestHeaders(&extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{wire.ClusterHeader}},
	})
	// ContinueResponseHeaders and ContinueResponseBody let a response
	// message pass untouched.
	ContinueResponseHeaders = ResponseHeaders(&extprocv3.CommonResponse{})
	ContinueResponseBody    = ResponseBody(&extprocv3.CommonResponse{})
	// ResponseTrailers answers response trailers: they pass untouched.
	ResponseTrailers = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
		ResponseTrailers: &extprocv3.TrailersResponse{}}}
)

// RequestBody answers a request_body message.
func RequestBody(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: cr},
		},
	}
}

// ResponseHeaders answers a response_headers message.
func ResponseHeaders(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{Response: cr},
		},
	}
}

// ResponseBody answers a response_body message.
func ResponseBody(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: cr},
		},
	}
}

// ReplaceBody is a body mutation that replaces the whole body.
func ReplaceBody(b []byte) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: b}}
}

// StreamOverride switches the response body to STREAMED. Envoy (>= 1.34,
// source/extensions/filters/http/ext_proc/ext_proc.cc effectiveModeOverride)
// fills the DEFAULT header and trailer modes in from its processing_mode but
// takes both body modes as given, so request_body_mode repeats BUFFERED:
// only then is the effective mode the listener's allowed_override_modes
// entry (xds/listener.go buildExtProc); anything else is ignored.
func StreamOverride() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestBodyMode:  extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED,
	}
}

// PassThroughOverride stops sending the response body to ext_proc: a body
// that passes unchanged needs no message per chunk. The effective mode
// (effectiveModeOverride, as for StreamOverride) is the listener's second
// allowed_override_modes entry: response_body_mode NONE, the rest as
// configured (xds/listener.go buildExtProc). Should Envoy ignore it (a
// listener without that entry), the body arrives BUFFERED and is answered
// unchanged, as every body of a call whose result was sent.
func PassThroughOverride() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestBodyMode:  extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode: extprocfilterv3.ProcessingMode_NONE,
	}
}
