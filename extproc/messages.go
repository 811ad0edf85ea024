package extproc

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/extproc/reqheaders"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"google.golang.org/protobuf/types/known/structpb"
)

// The message builders of package procmsg under the names the stream
// files of the federated, progress, listen and duplex paths use
// (federated.go, progress.go, listen.go, duplex*.go, immediatehead.go,
// upstream401.go, clientsession.go). The rest of extproc calls procmsg
// directly; these go once those files do too.

const contentTypeJSON = procmsg.ContentTypeJSON

var responseTrailersResponse = procmsg.ResponseTrailers

func setHeader(key, value string) *corev3.HeaderValueOption { return procmsg.SetHeader(key, value) }
func headerValue(h *corev3.HeaderValue) string              { return procmsg.HeaderValue(h) }
func immediateHead(r *mcp.Reply, hasBody bool, details string) *extprocv3.ImmediateResponse {
	return procmsg.ImmediateHead(r, hasBody, details)
}
func requestHeadersResponse(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return procmsg.RequestHeaders(cr)
}
func requestBodyResponse(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return procmsg.RequestBody(cr)
}
func responseHeadersResponse(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return procmsg.ResponseHeaders(cr)
}
func responseBodyResponse(cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	return procmsg.ResponseBody(cr)
}
func replaceBody(b []byte) *extprocv3.BodyMutation    { return procmsg.ReplaceBody(b) }
func newWireCodec() procmsg.Codec                     { return procmsg.NewCodec() }
func streamOverride() *extprocfilterv3.ProcessingMode { return procmsg.StreamOverride() }

// From package callplan, for federated.go and progress.go.

func resultHeaders(extra ...*corev3.HeaderValueOption) *extprocv3.HeaderMutation {
	return callplan.ResultHeaders(extra...)
}
func callMetadata(call *mcp.Call, t *registry.Tool) *structpb.Struct {
	return callplan.Metadata(call, t)
}

// From package metrics, for federated.go.

func methodLabel(m string) string { return metrics.MethodLabel(m) }

// From package reqheaders, for federated.go, listen.go and progress.go.

func isEventStream(contentType string) bool { return reqheaders.IsEventStream(contentType) }
func acceptsEventStream(accept string) bool { return reqheaders.AcceptsEventStream(accept) }

// From package session, for clientsession.go, federated.go and sessions.go.

type clientCaps = session.Caps

const capElicitForm = session.CapElicitForm

func capsOf(body []byte) clientCaps { return session.CapsOf(body) }
func capsFrom(c []byte) clientCaps  { return session.CapsFrom(c) }
