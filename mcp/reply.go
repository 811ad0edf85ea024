package mcp

import (
	"encoding/json"
	"strconv"
)

// Response headers.
const (
	headerContentType = "content-type"
	headerAllow       = "allow"
	contentTypeJSON   = "application/json"
)

// jsonHeaders is fresh per reply so a caller may change or extend it.
func jsonHeaders() []Header { return []Header{{Key: headerContentType, Value: contentTypeJSON}} }

// The headers of a list page, copied into each (newPageReply). varyPageHeaders
// are those of a JSON answer that is gzip-coded for clients that accept it
// (a large list page) but not for this one; gzipPageHeaders those of the
// gzip-coded answer. Vary tells caches the body depends on Accept-Encoding
// (RFC 9110 §12.5.5).
var (
	jsonPageHeaders = [...]Header{{Key: headerContentType, Value: contentTypeJSON}}
	varyPageHeaders = [...]Header{{Key: headerContentType, Value: contentTypeJSON}, {Key: "Vary", Value: "Accept-Encoding"}}
	gzipPageHeaders = [...]Header{{Key: headerContentType, Value: contentTypeJSON}, {Key: "Content-Encoding", Value: "gzip"},
		{Key: "Vary", Value: "Accept-Encoding"}}
)

// maxEcho bounds how much of a client-supplied value (method, tool name,
// header) an error message repeats.
const maxEcho = 128

// ErrorReply is a JSON-RPC error response with the given HTTP status.
func ErrorReply(status int, id json.RawMessage, code int, message string, data any) *Reply {
	var raw []byte
	if data != nil {
		switch d := data.(type) {
		case json.RawMessage:
			raw = d
		default:
			// A value that does not marshal is dropped: the error itself
			// matters more than its details.
			raw, _ = json.Marshal(d)
		}
	}
	return &Reply{Status: status, Headers: jsonHeaders(), Body: errorBody(id, code, message, raw)}
}

// errorBody is {"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M,"data":D}}.
func errorBody(id []byte, code int, message string, data []byte) []byte {
	b := make([]byte, 0, 64+len(id)+len(message)+len(data))
	b = appendEnvelope(b, id)
	b = append(b, `"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = appendString(b, message)
	if len(data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	return append(b, "}}"...)
}

// appendEnvelope appends `{"jsonrpc":"2.0","id":ID,`; an empty id is null.
func appendEnvelope(b, id []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, id...)
	}
	return append(b, ',')
}

// resultBody is {"jsonrpc":"2.0","id":ID,"result":RESULT}.
func resultBody(id, result []byte) []byte {
	b := make([]byte, 0, 40+len(id)+len(result))
	b = appendEnvelope(b, id)
	b = append(b, `"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// ResultReply is the 200 JSON answer with result to the request id.
func ResultReply(id json.RawMessage, result []byte) *Reply { return resultReply(id, result) }

func resultReply(id, result []byte) *Reply {
	return &Reply{Status: 200, Headers: jsonHeaders(), Body: resultBody(id, result)}
}

// accepted is the 202 answer to a notification or a client response.
func accepted() *Reply { return &Reply{Status: 202} }

// clip shortens a client-supplied value before an error message repeats it.
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}
