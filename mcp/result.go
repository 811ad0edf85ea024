package mcp

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxExcerpt bounds the part of a failed Tool Service reply quoted back.
const maxExcerpt = 512

// CallResult turns what a Tool Service (or Envoy on its behalf) returned into
// the JSON-RPC response body for the client, per the mapping table of docs/contracts/mcp.md.
// Execution failures are results with isError: true, never JSON-RPC errors:
//
//   - 2xx, a JSON object with a "content" array: passed through verbatim;
//     in the stateless era "resultType":"complete" and the serverInfo _meta
//     are inserted when the object lacks them, nothing else changes
//   - 2xx, any other JSON: structuredContent = the value (legacy era: only
//     an object) and one text item with the JSON text
//   - 2xx, anything else (or a JSON-looking body declared as non-JSON
//     content): one text item with the body
//   - 401, 403: isError, "permission denied" with the status
//   - any other status: isError naming the status, with a bounded excerpt
//   - Envoy's own failures: isError, "timeout", "unavailable", "reset" or
//     "response too large"
func (s *Server) CallResult(c *Call, u Upstream) []byte {
	id, era := callID(c)
	b := make([]byte, 0, 160+len(id)+len(u.Body)+len(u.Body)/8)
	b = appendEnvelope(b, id)
	b = append(b, `"result":`...)
	switch {
	case u.Failure != FailureNone:
		b = s.appendError(b, era, failureText(c, u.Failure))
	case u.Status >= 200 && u.Status <= 299:
		b = s.appendSuccess(b, era, u)
	default:
		b = s.appendError(b, era, statusText(c, u.Status, u.Body))
	}
	return append(b, '}')
}

// ToolError is a CallToolResult with isError: true and one text item per
// message (schema validation failures, filter denials).
func (s *Server) ToolError(c *Call, messages ...string) []byte {
	id, era := callID(c)
	if len(messages) == 0 {
		messages = []string{ToolFailed(toolName(c), "error")}
	}
	b := make([]byte, 0, 128)
	b = appendEnvelope(b, id)
	b = append(b, `"result":`...)
	b = s.appendError(b, era, messages...)
	return append(b, '}')
}

// ToolFailed is the one wording of a failed tool call's text: "tool NAME
// failed: WHAT", WHAT starting with the kind of failure (timeout,
// unavailable, permission denied, invalid arguments, denied, ...). Envoy's
// own replies to routed calls say the same (xds/localreply.go).
func ToolFailed(tool, what string) string { return "tool " + tool + " failed: " + what }

func toolName(c *Call) string {
	if c == nil {
		return ""
	}
	return c.Tool
}

func callID(c *Call) ([]byte, Era) {
	if c == nil {
		return nil, EraLegacy
	}
	return c.ID, c.Era
}

// appendError appends {"content":[text…],"isError":true} in era's shape.
func (s *Server) appendError(b []byte, era Era, texts ...string) []byte {
	b = s.openResult(b, era)
	b = append(b, `"content":[`...)
	for i, t := range texts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendText(b, t)
	}
	b = append(b, `],"isError":true`...)
	return s.closeResult(b, era)
}

func (s *Server) appendSuccess(b []byte, era Era, u Upstream) []byte {
	body := trimSpace(u.Body)
	if !jsonMediaType(u.ContentType) || len(body) == 0 || validJSON(body, 0) != nil {
		b = s.openResult(b, era)
		b = append(b, `"content":[`...)
		b = appendText(b, u.Body)
		b = append(b, ']')
		return s.closeResult(b, era)
	}
	if isObject(body) {
		var content, resultType, meta []byte
		members(body, func(key, val []byte) bool {
			switch string(memberKey(key)) {
			case "content":
				content = val
			case "resultType":
				resultType = val
			case "_meta":
				meta = val
			}
			return true
		})
		if isArray(content) {
			return s.appendPassThrough(b, era, body, resultType == nil, meta == nil)
		}
	}
	b = s.openResult(b, era)
	b = append(b, `"content":[`...)
	b = appendText(b, body)
	b = append(b, ']')
	if era == EraStateless || isObject(body) {
		b = append(b, `,"structuredContent":`...)
		b = append(b, body...)
	}
	return s.closeResult(b, era)
}

// appendPassThrough appends a Tool Service's CallToolResult as it came,
// adding only what the stateless era requires right after the opening brace.
func (s *Server) appendPassThrough(b []byte, era Era, obj []byte, addType, addMeta bool) []byte {
	if era != EraStateless || (!addType && !addMeta) {
		return append(b, obj...)
	}
	b = append(b, '{')
	if addType {
		b = append(b, `"resultType":"complete",`...)
	}
	if addMeta {
		b = append(b, s.serverInfoMeta...)
		b = append(b, ',')
	}
	return append(b, obj[1:]...) // the object has members: it has "content"
}

// openResult and closeResult frame a result the gateway writes itself.
func (s *Server) openResult(b []byte, era Era) []byte {
	if era == EraStateless {
		return append(b, `{"resultType":"complete",`...)
	}
	return append(b, '{')
}

func (s *Server) closeResult(b []byte, era Era) []byte {
	if era == EraStateless {
		b = append(b, ',')
		b = append(b, s.serverInfoMeta...)
	}
	return append(b, '}')
}

func appendText[T ~string | ~[]byte](b []byte, text T) []byte {
	b = append(b, `{"type":"text","text":`...)
	b = appendString(b, text)
	return append(b, '}')
}

// jsonMediaType reports whether a reply's Content-Type allows reading it as
// JSON: absent (sniffed), application/json or any +json type.
func jsonMediaType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func failureText(c *Call, f Failure) string {
	switch f {
	case FailureTimeout:
		return ToolFailed(toolName(c), "timeout: the Tool Service did not answer in time")
	case FailureReset:
		return ToolFailed(toolName(c), "unavailable: the Tool Service closed the connection before answering")
	case FailureTooLarge:
		return ToolFailed(toolName(c), "response too large: the Tool Service reply exceeded the gateway's limit")
	}
	return ToolFailed(toolName(c), "unavailable: no healthy Tool Service instance could take the call")
}

func statusText(c *Call, status int, body []byte) string {
	var b strings.Builder
	if status == 401 || status == 403 {
		b.WriteString("permission denied: ")
	}
	if status <= 0 {
		b.WriteString("the Tool Service sent no status")
	} else {
		b.WriteString("the Tool Service answered HTTP ")
		b.WriteString(strconv.Itoa(status))
		if t := reasons[status]; t != "" {
			b.WriteString(" " + t)
		}
	}
	if e := excerpt(body); e != "" {
		b.WriteString(": ")
		b.WriteString(e)
	}
	return ToolFailed(toolName(c), b.String())
}

// reasons are the HTTP reason phrases worth naming (net/http stays out of
// this package).
var reasons = map[int]string{
	300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 304: "Not Modified",
	307: "Temporary Redirect", 308: "Permanent Redirect",
	400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
	405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 410: "Gone",
	413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content",
	429: "Too Many Requests", 500: "Internal Server Error", 501: "Not Implemented",
	502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}

// excerpt is the start of a body, whitespace collapsed, at most maxExcerpt
// bytes, cut on a rune boundary.
func excerpt(body []byte) string {
	if len(body) > 4*maxExcerpt {
		body = body[:4*maxExcerpt]
	}
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) <= maxExcerpt {
		return s
	}
	cut := maxExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ResultOf returns the CallToolResult inside a response body that CallResult
// or ToolError built for c, without parsing it; nil when body is not one.
// Result-stage filters work on this object.
func ResultOf(c *Call, body []byte) []byte {
	id, _ := callID(c)
	prefix := appendEnvelope(make([]byte, 0, 32+len(id)), id)
	prefix = append(prefix, `"result":`...)
	if len(body) <= len(prefix) || !bytes.HasPrefix(body, prefix) || body[len(body)-1] != '}' {
		return nil
	}
	return body[len(prefix) : len(body)-1]
}

// WithResult is the response body for c carrying result, a CallToolResult
// object (a result-stage filter's rewrite), passed through as it is.
func (s *Server) WithResult(c *Call, result []byte) []byte {
	id, _ := callID(c)
	b := make([]byte, 0, 40+len(id)+len(result))
	b = appendEnvelope(b, id)
	b = append(b, `"result":`...)
	b = append(b, result...)
	return append(b, '}')
}
