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
func Read(hm *corev3.HeaderMap, r *mcp.HTTPRequest, debug bool) Headers {
	var x Headers
	var accept, encodings []string
	for _, h := range hm.GetHeaders() {
		key := h.GetKey()
		v := procmsg.HeaderValue(h)
		if debug {
			lv := v
			if sensitiveHeaders[key] {
				lv = "[redacted]"
			} else if p, _, q := strings.Cut(v, "?"); q && key == ":path" {
				lv = p + "?[redacted]" // a query may carry an access_token
			}
			x.Log = append(x.Log, slog.String(key, lv))
		}
		switch key {
		case ":path":
			r.Path, _, _ = strings.Cut(v, "?")
		case ":method":
			r.Method = v
		case ":authority", "host":
			if r.Host == "" {
				r.Host = v
			}
		case "content-type":
			if r.ContentType == "" {
				r.ContentType = v
			}
		case "accept":
			r.HasAccept = true
			accept = append(accept, v)
		case "accept-encoding":
			encodings = append(encodings, v)
		case "mcp-protocol-version":
			if !r.HasProtocolVersion {
				r.ProtocolVersion, r.HasProtocolVersion = v, true
			}
		case "mcp-method":
			if !r.HasMcpMethod {
				r.McpMethod, r.HasMcpMethod = v, true
			}
		case "mcp-name":
			if !r.HasMcpName {
				r.McpName, r.HasMcpName = v, true
			}
		case "origin":
			if !r.HasOrigin {
				r.Origin, r.HasOrigin = v, true
			}
		case "content-length":
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
				r.ContentLength = n
			}
		case "x-request-id":
			x.RequestID = v
		case "mcp-session-id":
			x.SessionID = v
		default:
			switch {
			case strings.HasPrefix(key, wire.HeaderPrefix):
				if !slices.Contains(x.Owned, key) {
					x.Owned = append(x.Owned, key)
				}
			case strings.HasPrefix(key, MCPParamPrefix):
				r.ParamHeaders = append(r.ParamHeaders, mcp.Header{Key: key[len(MCPParamPrefix):], Value: v})
			}
		}
	}
	// A header sent on several lines is the lines joined with ", " (RFC
	// 9110 §5.3); strings.Join copies nothing for none or one.
	r.Accept = strings.Join(accept, ", ")
	r.AcceptEncoding = strings.Join(encodings, ", ")
	return x
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
