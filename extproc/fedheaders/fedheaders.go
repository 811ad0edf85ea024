// Package fedheaders builds the headers of a request the gateway routes to
// a federated MCP server and filters those of its response: the batched
// set_headers of the routed request, the headers a new upstream session's
// handshake carries, and the allow-list of response headers a client may
// see (docs/contracts/mcp.md). It keeps no state.
package fedheaders

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/callplan"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/mcp"
)

// Sets builds the set_headers of one reply with four allocations
// (options, values, their bytes, the list) instead of three per header as
// procmsg.SetHeader makes them: a federated request sets a dozen or more.
type Sets struct {
	opts []corev3.HeaderValueOption
	vals []corev3.HeaderValue
	raw  []byte
	used int
	set  []*corev3.HeaderValueOption
}

// Append adds options made elsewhere, as they are.
func (s *Sets) Append(opts ...*corev3.HeaderValueOption) { s.set = append(s.set, opts...) }

// List is the set_headers built so far.
func (s *Sets) List() []*corev3.HeaderValueOption { return s.set }

// NewSets has room for n headers added and extra set as they are.
func NewSets(n, extra int) *Sets {
	return &Sets{opts: make([]corev3.HeaderValueOption, n), vals: make([]corev3.HeaderValue, n),
		raw: make([]byte, 0, 256), set: make([]*corev3.HeaderValueOption, 0, n+extra)}
}

// Add sets key to value, as procmsg.SetHeader does.
func (s *Sets) Add(key, value string) {
	if s.used == len(s.opts) {
		s.set = append(s.set, procmsg.SetHeader(key, value))
		return
	}
	start := len(s.raw)
	// Should raw grow, the values before keep the old array (capped).
	s.raw = append(s.raw, value...)
	v, o := &s.vals[s.used], &s.opts[s.used]
	s.used++
	v.Key, v.RawValue = key, s.raw[start:len(s.raw):len(s.raw)]
	o.Header, o.AppendAction = v, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	s.set = append(s.set, o)
}

// Handshake is what a new session's handshake sends: the credential (and
// forwarded Authorization) headers, without the protocol headers of the
// call, which the handshake sets itself (a stale Mcp-Session-Id would make
// the server refuse it), and without the headers of skip.
func Handshake(h http.Header, skip []string) map[string]string {
	m := make(map[string]string, len(h))
	for k := range h {
		switch k {
		case http.CanonicalHeaderKey(mcp.HeaderProtocolVersion), http.CanonicalHeaderKey(mcp.HeaderSessionID),
			http.CanonicalHeaderKey(mcp.HeaderMethod), http.CanonicalHeaderKey(mcp.HeaderName):
			continue
		}
		if slices.ContainsFunc(skip, func(s string) bool { return http.CanonicalHeaderKey(s) == k }) {
			continue
		}
		m[k] = h.Get(k)
	}
	return m
}

func SortedKeys(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Allowed reports whether a response header of a federated
// MCP server may reach the client (lower-case name): the content's type,
// length and encoding, the MCP headers but the session, cache validators
// and lifetimes, and tracing. Anything else (Set-Cookie, CORS,
// WWW-Authenticate, Location, arbitrary headers) would speak for the
// gateway's origin and is dropped; docs/contracts/mcp.md lists the same.
func Allowed(k string) bool {
	switch k {
	case "content-type", "content-length", "content-encoding",
		"cache-control", "etag", "last-modified", "expires", "vary", "age",
		"traceparent", "tracestate", "baggage", "x-request-id",
		"date", "x-envoy-upstream-service-time":
		return true
	case "mcp-session-id": // the gateway's, never the client's
		return false
	}
	return strings.HasPrefix(k, ":") || strings.HasPrefix(k, "mcp-")
}

// AppendDropped appends to remove the headers of h that no client may see.
func AppendDropped(remove []string, h *extprocv3.HttpHeaders) []string {
	for _, hv := range h.GetHeaders().GetHeaders() {
		if k := strings.ToLower(hv.GetKey()); !Allowed(k) && !slices.Contains(remove, k) {
			remove = append(remove, k)
		}
	}
	return remove
}

// WithStatus sets the :status of h to status.
func WithStatus(h *extprocv3.HeaderMutation, status int) *extprocv3.HeaderMutation {
	for i, sh := range h.SetHeaders {
		if sh.GetHeader().GetKey() == ":status" {
			h.SetHeaders[i] = procmsg.SetHeader(":status", strconv.Itoa(status))
		}
	}
	return h
}

// Result are resultHeaders without the server's Mcp-Session-Id: the
// session is the gateway's, never the client's.
func Result(extra *corev3.HeaderValueOption) *extprocv3.HeaderMutation {
	m := callplan.ResultHeaders(extra)
	m.RemoveHeaders = append(m.RemoveHeaders, "mcp-session-id")
	return m
}
