package mcp

// NotFound is the answer to a request whose path names no route: HTTP 404
// with a JSON-RPC Invalid Request error saying which path, e.g. "no MCP
// route at /mcp/foo" (the path clipped like every echoed value). It echoes
// the request's id byte for byte when body is one JSON-RPC request (see
// RequestID); body is nil when the request has none or it was not read.
func (s *Server) NotFound(path string, body []byte) *Reply {
	return ErrorReply(404, s.RequestID(body), CodeInvalidRequest, "no MCP route at "+clip(path), nil)
}

// RequestID returns the id of body, byte for byte, when body is one JSON-RPC
// request by the envelope rules of Handle: valid JSON within the size and
// depth limits, an object without duplicate members, jsonrpc "2.0", a
// string method and a string or number id. Otherwise (a parse error, a
// batch, a notification, a response, an id of another type) it returns
// null, as Handle's own errors about such bodies do.
func (s *Server) RequestID(body []byte) []byte {
	null := []byte("null")
	var m message
	if len(body) == 0 || int64(len(body)) > s.cfg.MaxBodyBytes || scanJSON(body, s.cfg.MaxDepth, &m) != nil {
		return null
	}
	if !isObject(body[skipSpace(body, 0):]) {
		return null
	}
	if m.dup != "" || m.method == nil || !(isString(m.id) || isNumber(m.id)) {
		return null
	}
	if !isJSONRPC20(m.jsonrpc) {
		return null
	}
	if _, ok := stringValue(m.method); !ok {
		return null
	}
	return append([]byte(nil), m.id...) // the reply may outlive body
}
