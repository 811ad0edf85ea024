package registry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// MaxForwardHeaders bounds a Tool Service's forwardHeaders list.
const MaxForwardHeaders = 32

// DefaultForwardHeaders are the client request headers every Tool Service
// and MCP server receives: content and MCP headers, tracing, request ids
// and the data plane's own forwarding headers. None carries a credential.
// Every other client header is removed from a routed request unless the
// service's forwardHeaders names it (docs/security.md); Authorization goes
// its own way (forwardAuthorization, upstreamAuth).
var DefaultForwardHeaders = []string{
	// content
	"accept", "accept-language", "content-length", "content-type", "user-agent",
	// MCP (mcp-session-id as the gateway manages it; mcp-param-* by prefix)
	"mcp-method", "mcp-name", "mcp-protocol-version", "mcp-session-id",
	// tracing (W3C, B3, Envoy's OpenTracing context)
	"traceparent", "tracestate", "baggage", "b3", "x-b3-traceid", "x-b3-spanid",
	"x-b3-parentspanid", "x-b3-sampled", "x-b3-flags", "x-ot-span-context",
	// request id, and what the data plane itself sets about the connection
	"x-request-id", "x-forwarded-for", "x-forwarded-proto",
}

// defaultForward is DefaultForwardHeaders as a set.
var defaultForward = func() map[string]bool {
	m := make(map[string]bool, len(DefaultForwardHeaders))
	for _, h := range DefaultForwardHeaders {
		m[h] = true
	}
	return m
}()

// ForwardedByDefault reports whether the client request header k (lower
// case) reaches every upstream whatever its forwardHeaders say.
func ForwardedByDefault(k string) bool {
	return defaultForward[k] || strings.HasPrefix(k, "mcp-param-")
}

// notForwardable are names forwardHeaders may not list: the client's token
// (forwardAuthorization and upstreamAuth decide about it) and the
// connection's own headers, which no ext_proc mutation may or should touch.
var notForwardable = []string{
	"authorization", "connection", "host", "keep-alive", "proxy-connection",
	"te", "trailer", "transfer-encoding", "upgrade",
}

// checkForwardHeaders returns the problems of forwardHeaders; each error
// starts with the field name.
func (s ToolService) checkForwardHeaders() []error {
	var errs []error
	if len(s.ForwardHeaders) > MaxForwardHeaders {
		errs = append(errs, fmt.Errorf("forwardHeaders: at most %d names, has %d", MaxForwardHeaders, len(s.ForwardHeaders)))
	}
	for i, name := range s.ForwardHeaders {
		switch {
		case !headerNameRE.MatchString(name):
			errs = append(errs, fmt.Errorf("forwardHeaders[%d]: %q is not a valid HTTP header name", i, name))
		case name != strings.ToLower(name):
			errs = append(errs, fmt.Errorf("forwardHeaders[%d]: %q must be lower case, as the data plane passes header names", i, name))
		case name == "authorization" && s.IsMCP():
			errs = append(errs, fmt.Errorf("forwardHeaders[%d]: authorization is forwarded by forwardAuthorization only", i))
		case name == "authorization":
			errs = append(errs, fmt.Errorf("forwardHeaders[%d]: the client's authorization is never a Tool Service's (set upstreamAuth in the toolmesh config instead)", i))
		case slices.Contains(notForwardable, name):
			errs = append(errs, fmt.Errorf("forwardHeaders[%d]: %s belongs to the connection and cannot be forwarded", i, name))
		case strings.HasPrefix(name, wire.HeaderPrefix):
			errs = append(errs, fmt.Errorf("forwardHeaders[%d]: the %s prefix is toolmesh's own", i, wire.HeaderPrefix))
		case strings.HasPrefix(name, "x-envoy-"):
			errs = append(errs, fmt.Errorf("forwardHeaders[%d]: x-envoy-* headers are Envoy's; a client's are removed before routing", i))
		case slices.Contains(s.ForwardHeaders[:i], name):
			errs = append(errs, fmt.Errorf("forwardHeaders[%d]: %q is listed twice", i, name))
		}
		for h := range s.Headers {
			if strings.EqualFold(h, name) {
				errs = append(errs, fmt.Errorf("forwardHeaders[%d]: conflicts with headers.%s (the gateway sets it); choose one", i, h))
			}
		}
	}
	return errs
}

// ForwardHeaders returns the forwardHeaders of the snapshot's Tool Service
// name (nil when it names none or is unknown).
func (s *Snapshot) ForwardHeaders(name string) []string {
	for i := range s.def.ToolServices {
		if s.def.ToolServices[i].Name == name {
			return s.def.ToolServices[i].ForwardHeaders
		}
	}
	return nil
}
