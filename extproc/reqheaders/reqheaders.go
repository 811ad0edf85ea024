// Package reqheaders reads the client's request headers as Envoy sends
// them: the protocol's view of the request (mcp.HTTPRequest), the headers
// filters see, the client's address, whether it takes an event stream, and
// which headers an upstream may receive (the allow-list of ADR 0024). It keeps no state; the stream
// handler (package extproc) owns the header map.
package reqheaders

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// MCPParamPrefix starts the SEP-2243 headers that mirror tool arguments.
const MCPParamPrefix = "mcp-param-"

// sensitiveHeaders are never logged in clear.
var sensitiveHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
	"x-api-key":           true,
}

// Headers is what Read found besides the protocol's view of the request.
type Headers struct {
	RequestID string // x-request-id
	SessionID string // mcp-session-id
	// Owned are the client-supplied x-toolmesh-* header names, which are
	// never trusted.
	Owned []string
	// Log are the headers for a debug log line, redacted; nil unless
	// Read was asked for them.
	Log []slog.Attr
}

// Read fills r from Envoy's request headers and returns the correlation
// ids and the client's x-toolmesh-* header names; with debug, also the
// headers for the log, credentials and queries redacted.
//
// It runs for every request: a value is read only for the headers kept, a
// header on one line is not joined, the usual Content-Length is read
// without strconv, and the loop (readLines) keeps its state behind
// pointers rather than in a dozen locals it would save and reload on
// every header.
func Read(hm *corev3.HeaderMap, r *mcp.HTTPRequest, debug bool) Headers {
	var x Headers
	if debug {
		x.Log = logHeaders(hm)
	}
	var lines repeated
	readLines(hm.GetHeaders(), r, &x, &lines)
	r.Accept, r.AcceptEncoding = lines.accept, lines.encodings
	return x
}

// repeated are the headers whose lines Read joins with ", " when there
// are several (RFC 9110 §5.3), and how many lines each had.
type repeated struct {
	accept, encodings   string
	nAccept, nEncodings int
}

// readLines is Read's loop over the header lines hs.
func readLines(hs []*corev3.HeaderValue, r *mcp.HTTPRequest, x *Headers, lines *repeated) {
	for _, h := range hs {
		switch key := h.GetKey(); key {
		case ":path":
			r.Path, _, _ = strings.Cut(procmsg.HeaderValue(h), "?")
		case ":method":
			r.Method = procmsg.HeaderValue(h)
		case ":authority", "host":
			if r.Host == "" {
				r.Host = procmsg.HeaderValue(h)
			}
		case "content-type":
			if r.ContentType == "" {
				r.ContentType = procmsg.HeaderValue(h)
			}
		case "accept":
			r.HasAccept = true
			lines.accept = joinLine(lines.accept, procmsg.HeaderValue(h), lines.nAccept)
			lines.nAccept++
		case "accept-encoding":
			lines.encodings = joinLine(lines.encodings, procmsg.HeaderValue(h), lines.nEncodings)
			lines.nEncodings++
		case "mcp-protocol-version":
			if !r.HasProtocolVersion {
				r.ProtocolVersion, r.HasProtocolVersion = procmsg.HeaderValue(h), true
			}
		case "mcp-method":
			if !r.HasMcpMethod {
				r.McpMethod, r.HasMcpMethod = procmsg.HeaderValue(h), true
			}
		case "mcp-name":
			if !r.HasMcpName {
				r.McpName, r.HasMcpName = procmsg.HeaderValue(h), true
			}
		case "origin":
			if !r.HasOrigin {
				r.Origin, r.HasOrigin = procmsg.HeaderValue(h), true
			}
		case "content-length":
			if n, ok := contentLength(procmsg.HeaderValue(h)); ok {
				r.ContentLength = n
			}
		case "x-request-id":
			x.RequestID = procmsg.HeaderValue(h)
		case "mcp-session-id":
			x.SessionID = procmsg.HeaderValue(h)
		default:
			switch {
			case strings.HasPrefix(key, wire.HeaderPrefix):
				if !slices.Contains(x.Owned, key) {
					x.Owned = append(x.Owned, key)
				}
			case strings.HasPrefix(key, MCPParamPrefix):
				r.ParamHeaders = append(r.ParamHeaders, mcp.Header{Key: key[len(MCPParamPrefix):], Value: procmsg.HeaderValue(h)})
			}
		}
	}
}

// joinLine is joined, the n lines of a header so far, with the next line v.
func joinLine(joined, v string, n int) string {
	if n == 0 {
		return v
	}
	return joined + ", " + v
}

// contentLength is a Content-Length value as a count of bytes, ok false
// when it is none. Plain digits, which is what clients send, are read
// here; anything else as strconv.ParseInt reads the value trimmed.
func contentLength(v string) (int64, bool) {
	if len(v) == 0 || len(v) > 18 { // 18 digits never overflow an int64
		return slowContentLength(v)
	}
	var n int64
	for i := 0; i < len(v); i++ {
		d := v[i] - '0'
		if d > 9 {
			return slowContentLength(v)
		}
		n = n*10 + int64(d)
	}
	return n, true
}

// slowContentLength is contentLength of a value that is not only digits.
func slowContentLength(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n, err == nil && n >= 0
}

// logHeaders are hm's headers for a debug log line: credentials and a
// :path's query redacted.
func logHeaders(hm *corev3.HeaderMap) []slog.Attr {
	var out []slog.Attr
	for _, h := range hm.GetHeaders() {
		key := h.GetKey()
		lv := procmsg.HeaderValue(h)
		if sensitiveHeaders[key] {
			lv = "[redacted]"
		} else if p, _, q := strings.Cut(lv, "?"); q && key == ":path" {
			lv = p + "?[redacted]" // a query may carry an access_token
		}
		out = append(out, slog.String(key, lv))
	}
	return out
}

// ForFilters are the client's request headers for filters: lowercase
// names, no pseudo-headers, the first value of a repeated header. Built only
// for calls that run a chain.
func ForFilters(hm *corev3.HeaderMap) map[string]string {
	// Sized for the headers kept: counting the pseudo-headers too would
	// make a typical request's map outgrow its first group.
	n := 0
	for _, h := range hm.GetHeaders() {
		if clientHeader(strings.ToLower(h.GetKey())) {
			n++
		}
	}
	out := make(map[string]string, n)
	for _, h := range hm.GetHeaders() {
		k := strings.ToLower(h.GetKey())
		if !clientHeader(k) {
			continue
		}
		if _, seen := out[k]; !seen {
			out[k] = procmsg.HeaderValue(h)
		}
	}
	return out
}

// clientHeader reports whether filters see the header named k (lowercase).
func clientHeader(k string) bool {
	return !strings.HasPrefix(k, ":") && !strings.HasPrefix(k, wire.HeaderPrefix)
}

// ClientAddress is the downstream peer Envoy appended to x-forwarded-for
// (use_remote_address, xds/listener.go): the last entry of the last value.
func ClientAddress(hm *corev3.HeaderMap) string {
	var last string
	for _, h := range hm.GetHeaders() {
		if strings.EqualFold(h.GetKey(), "x-forwarded-for") {
			last = procmsg.HeaderValue(h)
		}
	}
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return strings.TrimSpace(last)
}

// IsEventStream reports whether a content type is text/event-stream.
func IsEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// AcceptsEventStream reports whether an Accept header names
// text/event-stream with a non-zero weight. Wildcards do not count: a
// client that did not ask for a stream gets one JSON result.
func AcceptsEventStream(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}

// Credentials are what authentication reads of the request headers: the
// first Authorization value, how many Authorization headers there were, and
// the raw query of :path (where a client may have put an access_token).
func Credentials(hm *corev3.HeaderMap) (authorization string, count int, query string) {
	for _, h := range hm.GetHeaders() {
		switch h.GetKey() {
		case "authorization":
			if count == 0 {
				authorization = procmsg.HeaderValue(h)
			}
			count++
		case ":path":
			_, query, _ = strings.Cut(procmsg.HeaderValue(h), "?")
		}
	}
	return authorization, count, query
}
