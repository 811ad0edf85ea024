package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// Interim answer for tools of federated MCP servers (protocol mcp), until
// the call path that passes tools/call through to the server's MCP endpoint
// exists. Such a tool is listed, but a call to it must never be routed as a
// native Tool Service call (POST {url}/tools/{name}): it is answered here,
// in the body phase, and never routed in the headers phase. The call-path
// work replaces this file.

// detailsFederatedUnavailable names the interim answer in access logs.
const (
	detailsFederatedUnavailable = "toolmesh_federated_call_unavailable"
	callFederatedUnavailable    = "federated_unavailable"
)

// federatedCallUnavailable answers a call of a federated tool with an
// isError result saying that such calls are not available yet.
func (x *exchange) federatedCallUnavailable(call *mcp.Call, t *registry.Tool) *extprocv3.ProcessingResponse {
	x.callOutcome = callFederatedUnavailable
	msg := "tool " + t.Name + " is served by the federated MCP server " + t.Service +
		"; calls to federated MCP servers are not available yet in this toolmesh version"
	return x.answer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call, msg)}, outcomeAnswered, detailsFederatedUnavailable)
}
