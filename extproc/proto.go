package extproc

import (
	"strings"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// Small builders for the ProcessingResponse shapes the server sends. They
// encode the ext_proc rules of ADR 0001 (envoy/dataplane/internal/rules/rules.go cites Envoy's
// source for each): raw_value only, an explicit
// OVERWRITE_IF_EXISTS_OR_ADD, content-type on every local reply with a body,
// never a grpc_status.

// ImmediateResponse details (Envoy's %RESPONSE_CODE_DETAILS%). They all start
// with "toolmesh_" so local_reply_config mappers and access logs can tell the
// gateway's own answers from Envoy's.
const (
	detailsUnknownRoute      = "toolmesh_unknown_route"
	detailsRouteNotReady     = "toolmesh_route_not_ready"
	detailsRejected          = "toolmesh_http_rejected"
	detailsEmptyBody         = "toolmesh_empty_body"
	detailsReply             = "toolmesh_reply"
	detailsError             = "toolmesh_error_reply"
	detailsInvalidArguments  = "toolmesh_invalid_arguments"
	detailsDenied            = "toolmesh_filter_denied"
	detailsHeadersNotHandled = "toolmesh_headers_not_processed"
	detailsBodyTooLarge      = "toolmesh_body_too_large"
)

const contentTypeJSON = "application/json"

// setHeader is a header mutation that replaces any value the header had.
func setHeader(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// headerValue is the value of a header as Envoy sends it: in raw_value, or
// in value when the send_header_raw_value runtime flag is off.
//
// The string shares raw_value's bytes rather than copying them (a copy per
// header per message was a tenth of extproc's allocations): they belong to a
// message received from the stream, which nothing writes to, and each is its
// own allocation, so a value kept longer keeps only itself alive.
func headerValue(h *corev3.HeaderValue) string {
	if raw := h.GetRawValue(); len(raw) > 0 {
		return unsafe.String(unsafe.SliceData(raw), len(raw))
	}
	return h.GetValue()
}

// immediate turns a protocol reply into an ImmediateResponse. A reply in
// Parts is joined here; the stream sends those as a wireMessage instead.
func immediate(r *mcp.Reply, details string) *extprocv3.ProcessingResponse {
	r.Flatten()
	ir := immediateHead(r, len(r.Body) > 0, details)
	ir.Body = r.Body // Envoy sets content-length itself
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: ir},
		// Envoy stores it before sending the reply (ext_proc.cc
		// onReceiveMessage), so local_reply_config can leave this JSON-RPC
		// reply alone while it reshapes Envoy's own 400/413/5xx.
		DynamicMetadata: answeredMetadata,
	}
}

// immediateHead is the ImmediateResponse of r without its body.
func immediateHead(r *mcp.Reply, hasBody bool, details string) *extprocv3.ImmediateResponse {
	set := make([]*corev3.HeaderValueOption, 0, len(r.Headers)+1)
	hasType := false
	for _, h := range r.Headers {
		key := strings.ToLower(h.Key)
		hasType = hasType || key == "content-type"
		set = append(set, setHeader(key, h.Value))
	}
	if hasBody && !hasType {
		// Without it Envoy labels a local reply text/plain.
		set = append(set, setHeader("content-type", contentTypeJSON))
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

// requestHeadersResponse answers a request_headers message.
func requestHeadersResponse(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{Response: cr},
		},
	}
}

// Answers that are the same for every request, built once and shared: gRPC
// only reads a message it marshals (callplan.go), and nothing changes an
// answer once dispatch returned it.
var (
	// removeClusterHeader answers request headers that carry no client
	// x-toolmesh-* header: only the routing header is removed.
	removeClusterHeader = requestHeadersResponse(&extprocv3.CommonResponse{
		HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{wire.ClusterHeader}},
	})
	continueResponseHeaders = responseHeadersResponse(&extprocv3.CommonResponse{})
	continueResponseBody    = responseBodyResponse(&extprocv3.CommonResponse{})
)

// requestBodyResponse answers a request_body message.
func requestBodyResponse(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: cr},
		},
	}
}

// responseHeadersResponse answers a response_headers message.
func responseHeadersResponse(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{Response: cr},
		},
	}
}

// responseBodyResponse answers a response_body message.
func responseBodyResponse(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: cr},
		},
	}
}

// replaceBody is a body mutation that replaces the whole body.
func replaceBody(b []byte) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: b}}
}
