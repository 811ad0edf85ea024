package mcp

import "encoding/json"

// Server applies the protocol rules with one Config. It is immutable and safe
// for concurrent use.
type Server struct {
	cfg Config
}

// NewServer returns a Server with cfg's zero fields set to their defaults.
func NewServer(cfg Config) *Server {
	panic("mcp: NewServer not written yet") // owned by the mcp work item
}

// CheckHeaders applies the HTTP rules that need no body (SPEC §2: method 405
// with Allow: POST, content type 415, accept 406, origin/host 403, protocol
// version header 400 with -32022, content-length over the limit 413). nil
// means "go on and read the body".
func (s *Server) CheckHeaders(r *HTTPRequest) *Reply {
	panic("mcp: CheckHeaders not written yet")
}

// PeekCall reports the tool a stateless-era tools/call names in its headers
// (Mcp-Method: tools/call, Mcp-Name decoded), so it can be routed in the
// request-headers phase. ok is false for anything else.
func (s *Server) PeekCall(r *HTTPRequest) (tool string, ok bool) {
	panic("mcp: PeekCall not written yet")
}

// Handle applies every JSON-RPC and MCP rule to one request body whose
// headers passed CheckHeaders, answering protocol methods from cat and
// returning a Call for a tools/call that must be routed.
func (s *Server) Handle(r *HTTPRequest, body []byte, cat Catalog) Outcome {
	panic("mcp: Handle not written yet")
}

// CallResult turns what a Tool Service (or Envoy on its behalf) returned into
// the JSON-RPC response body for the client, per the SPEC §2 mapping table.
func (s *Server) CallResult(c *Call, u Upstream) []byte {
	panic("mcp: CallResult not written yet")
}

// ToolError is a CallToolResult with isError: true and one text item per
// message (schema validation failures, filter denials).
func (s *Server) ToolError(c *Call, messages ...string) []byte {
	panic("mcp: ToolError not written yet")
}

// ErrorReply is a JSON-RPC error response with the given HTTP status.
func ErrorReply(status int, id json.RawMessage, code int, message string, data any) *Reply {
	panic("mcp: ErrorReply not written yet")
}
