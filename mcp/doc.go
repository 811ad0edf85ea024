// Package mcp holds the JSON-RPC 2.0 and Model Context Protocol rules of the
// public endpoint (docs/contracts/mcp.md) for both protocol eras: the stateless 2026-07-28
// era and the legacy 2025-11-25/2025-06-18/2025-03-26 era. It does no I/O:
// callers hand it the HTTP request's headers and body and get back either a
// complete HTTP reply or a tool call to route.
//
// A request goes through [Server.CheckHeaders] (headers only), optionally
// [Server.PeekCall] (route a 2026 tools/call in the headers phase), then
// [Server.Handle] (the body). A routed call's outcome becomes the client's
// answer through [Server.CallResult] or [Server.ToolError].
//
// # Eras
//
// The era is chosen per request. The effective protocol version is the
// MCP-Protocol-Version header, else params._meta
// ["io.modelcontextprotocol/protocolVersion"], else 2025-03-26 (a client too
// old to send the header). 2026-07-28 selects the stateless era, anything
// else the legacy era. server/discover is answered in the 2026 shape
// whatever the era, unless the header says 2026-07-28 and the 2026 header
// rules fail: legacy clients that probe with it settle at once.
//
// # Decisions where the specifications leave room
//
//   - Nesting deeper than Config.MaxDepth is -32600 Invalid Request (HTTP
//     400), not -32700: the scanner stops at the limit without reading the
//     rest, so the body may well be valid JSON that the gateway declines.
//   - Invalid UTF-8 is a parse error (-32700); RFC 8259 requires UTF-8, and
//     silently replacing bytes would let the gateway and a Tool Service read
//     different arguments.
//   - A body that repeats "jsonrpc", "id", "method", "params", "result" or
//     "error" is -32600, and a params object that repeats "name",
//     "arguments", "cursor", "protocolVersion" or "_meta" (or a _meta that
//     repeats the protocol version) is -32602: different JSON readers keep
//     different duplicates.
//   - Transport rejections (403, 406, 413, 415) carry a JSON-RPC error body
//     with id null and code -32600. 405 and 202 have empty bodies.
//   - CheckHeaders order: 405, 403 (Origin, then Host), 413, 415, 406, 400.
//   - An empty Accept header counts as absent; a media range weighted q=0
//     does not count. text/* is not accepted: only the ranges that admit an
//     application/json or text/event-stream answer are.
//   - A tools/list page of GzipMinBytes or more that the catalog shares
//     (Catalog.ToolsPageShared returns its SharedItems) is answered gzip-coded when Accept-Encoding
//     accepts gzip (AcceptsGzip), with Vary: Accept-Encoding in both
//     codings; without the header it is not compressed, although RFC 9110
//     would allow it: a client that can decompress says so.
//   - A request id of the wrong type (null, boolean, object, array) makes the
//     request invalid (-32600, id null). Every Invalid Request (-32600)
//     answers with id null, as docs/contracts/mcp.md says, even when the id was readable;
//     every other reply echoes the id byte for byte, errors included.
//   - params must be an object, an array or null (JSON-RPC); the MCP methods
//     need an object (-32602 otherwise). params null counts as absent.
//   - The MCP-Protocol-Version header and the _meta protocol version must
//     agree whenever both are present, in either era (400, -32020). When only
//     _meta carries a version it must be a supported one (400, -32022). A
//     2026-07-28 request whose _meta lacks the version is accepted: the
//     header already says it.
//   - A 2026-07-28 request (by _meta) without the MCP-Protocol-Version header
//     is rejected with -32020 (a required header is missing), as are a
//     missing Mcp-Method, or a missing Mcp-Name on tools/call. The Mcp-Name
//     value is decoded from the =?base64?…?= sentinel (padded or not) before
//     it is compared with params.name. Mcp-Param-* headers are not seen by
//     this package; the caller holds the tool's schema.
//   - Other JSON-RPC errors of the stateless era use HTTP 200 except -32601
//     (404, as the 2026 transport requires); the legacy era always uses 200.
//   - initialize answers the requested version when it is a supported legacy
//     one, else 2025-11-25; a missing or malformed protocolVersion is not an
//     error. It declares {"tools":{"listChanged":false}}; the gateway
//     never issues Mcp-Session-Id.
//   - tools/list with a null cursor is the first page. A nil Catalog is an
//     empty one.
//   - tools/call with arguments absent or null routes "{}". params.task is
//     ignored (tasks are not offered). A string or number
//     _meta.progressToken is copied to Call.ProgressToken (any other value
//     is ignored); ProgressEvent and ResultEvent encode what a streamed
//     native call sends the client.
//   - Call.ID is a copy; Call.Arguments aliases the body given to Handle,
//     which must not change while the Call is in use.
//   - Search mode (a catalog whose SearchMode is true): tools/call of search_tools is answered here, with
//     structuredContent {"tools":[…]} and one text item repeating it (or
//     saying nothing matched, for an empty shortlist); its invalid arguments
//     (missing or empty query, limit not an integer in 1..Shortlist, an
//     unknown or repeated argument) are one isError result listing every
//     problem. tools/call of call_tool returns the Call of the tool it names
//     (Via "call_tool"), resolved as a direct call; its malformed arguments
//     are -32602, as malformed tools/call params are, and the inner tool's
//     Mcp-Param-* headers are not checked. Other names resolve as usual.
//   - CallResult reads a 2xx body as JSON when its Content-Type is absent,
//     application/json or +json, and the body is valid JSON; otherwise it is
//     text. In the stateless era a passed-through CallToolResult gets
//     "resultType":"complete" and the serverInfo _meta inserted only when it
//     lacks them (an existing _meta is left as it is). Error texts quote at
//     most 512 bytes of the Tool Service's body.
package mcp
