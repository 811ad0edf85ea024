package mcp

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// CheckHeaders applies the HTTP rules that need no body (docs/contracts/mcp.md). nil means
// "go on and read the body". The checks run in this order, so a request that
// breaks several rules gets the first answer:
//
//  1. method other than POST → 405, empty body, Allow: POST
//  2. Origin present and not allowed, or Host not allowed → 403
//  3. Content-Length over MaxBodyBytes → 413
//  4. Content-Type not application/json or application/json-rpc → 415
//  5. Accept that admits neither JSON nor SSE → 406
//
// An unsupported MCP-Protocol-Version is answered by Handle (400, -32022), not
// here: the error must carry the request's id, which only the body has.
//
// DNS-rebinding protection comes before content negotiation so a forbidden
// origin learns nothing else about the endpoint.
func (s *Server) CheckHeaders(r *HTTPRequest) *Reply {
	if r.Method != "POST" {
		return &Reply{Status: 405, Headers: []Header{{Key: headerAllow, Value: "POST"}}}
	}
	if bad := s.checkOrigin(r); bad != nil {
		return bad
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return s.tooLarge()
	}
	if !jsonContentType(r.ContentType) {
		return ErrorReply(415, nil, CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json", nil)
	}
	if r.HasAccept && !acceptable(r.Accept) {
		return ErrorReply(406, nil, CodeInvalidRequest, "Not Acceptable: Accept must admit application/json or text/event-stream", nil)
	}
	return nil
}

// CheckSessionEnd applies the HTTP rules to a client's DELETE of the
// session the gateway issued it (Streamable HTTP, "Session Management"):
// the Origin and Host allow-lists and a supported protocol version header.
// nil lets the caller end the session.
func (s *Server) CheckSessionEnd(r *HTTPRequest) *Reply {
	if bad := s.checkOrigin(r); bad != nil {
		return bad
	}
	if r.HasProtocolVersion && !IsSupportedVersion(r.ProtocolVersion) {
		return unsupportedVersion(nil, r.ProtocolVersion)
	}
	return nil
}

// checkOrigin applies the Origin and Host allow-lists, for POSTs, GET
// streams and session ends alike.
func (s *Server) checkOrigin(r *HTTPRequest) *Reply {
	if r.HasOrigin && !s.origins.allowOrigin(r.Origin) {
		return ErrorReply(403, nil, CodeInvalidRequest, "Forbidden: origin "+strconv.Quote(clip(r.Origin))+" is not allowed", nil)
	}
	if len(s.hosts) > 0 && !s.hosts.allowHost(r.Host) {
		return ErrorReply(403, nil, CodeInvalidRequest, "Forbidden: host "+strconv.Quote(clip(r.Host))+" is not allowed", nil)
	}
	return nil
}

func (s *Server) tooLarge() *Reply {
	return ErrorReply(413, nil, CodeInvalidRequest,
		"Request body too large: the limit is "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+" bytes", nil)
}

// unsupportedVersion is the UnsupportedProtocolVersion error of the 2026-07-28
// schema, which clients of both eras can act on.
func unsupportedVersion(id []byte, requested string) *Reply {
	b := append([]byte(nil), `{"supported":[`...)
	for i, v := range supportedVersions {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	b = append(b, `],"requested":`...)
	b = appendString(b, requested)
	b = append(b, '}')
	return &Reply{Status: 400, Headers: jsonHeaders(),
		Body: errorBody(id, CodeUnsupportedProtocolVersion, "Unsupported protocol version", b)}
}

// jsonContentType reports whether a Content-Type names JSON. Parameters
// (charset and the like) are allowed; the media type is case-insensitive.
func jsonContentType(ct string) bool {
	if ct == contentTypeJSON { // what nearly every client sends
		return true
	}
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	return strings.EqualFold(mt, "application/json") || strings.EqualFold(mt, "application/json-rpc")
}

// acceptable reports whether an Accept header admits a JSON reply: empty,
// */*, application/*, application/json or text/event-stream (which clients
// list beside application/json), unless weighted q=0.
func acceptable(accept string) bool {
	if accept == acceptBoth { // what the MCP SDKs send
		return true
	}
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, _ := strings.Cut(part, ";")
		mt = strings.TrimSpace(mt)
		if !strings.EqualFold(mt, "*/*") && !strings.EqualFold(mt, "application/*") &&
			!strings.EqualFold(mt, "application/json") && !strings.EqualFold(mt, "text/event-stream") {
			continue
		}
		if !refused(params) {
			return true
		}
	}
	return false
}

// acceptBoth is the Accept header of a Streamable HTTP client, which must
// list both JSON and an event stream.
const acceptBoth = "application/json, text/event-stream"

// refused reports whether media-range parameters carry q=0.
func refused(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(p, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return err == nil && q == 0
	}
	return false
}

// hostRule is one entry of an origin or host allow-list.
type hostRule struct {
	any     bool   // "*": everything
	scheme  string // "" for any scheme
	host    string // lower case, IPv6 without brackets
	port    string // "" with a scheme: the scheme's default port
	anyPort bool
}

type hostRules []hostRule

// loopbackRules are the origins allowed when none are configured.
var loopbackRules = hostRules{
	{host: "localhost", anyPort: true},
	{host: "127.0.0.1", anyPort: true},
	{host: "::1", anyPort: true},
}

// parseRules reads allow-list entries: "*", "scheme://host[:port]" (port
// defaults from the scheme), "host:port", "host" or "host:*" (any port).
// Blank entries are ignored.
func parseRules(entries []string) hostRules {
	var rules hostRules
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case e == "*":
			rules = append(rules, hostRule{any: true})
			continue
		}
		var r hostRule
		rest := e
		if scheme, after, ok := strings.Cut(e, "://"); ok {
			r.scheme, rest = scheme, after
		}
		rest, _, _ = strings.Cut(rest, "/")
		r.host, r.port = splitHostPort(rest)
		switch {
		case r.port == "*":
			r.port, r.anyPort = "", true
		case r.port == "" && r.scheme == "":
			r.anyPort = true
		case r.port == "":
			r.port = defaultPort(r.scheme)
		}
		rules = append(rules, r)
	}
	return rules
}

// allowOrigin reports whether an Origin header value (scheme://host[:port],
// or "null") matches a rule.
func (rs hostRules) allowOrigin(origin string) bool {
	scheme, rest, ok := strings.Cut(strings.ToLower(strings.TrimSpace(origin)), "://")
	host, port := splitHostPort(rest)
	if port == "" {
		port = defaultPort(scheme)
	}
	for _, r := range rs {
		if r.any {
			return true
		}
		if !ok || host == "" {
			continue
		}
		if r.host == host && (r.scheme == "" || r.scheme == scheme) && (r.anyPort || r.port == port) {
			return true
		}
	}
	return false
}

// allowHost reports whether a Host (or :authority) value matches a rule.
// Schemes are unknown here, so a rule's scheme is ignored.
func (rs hostRules) allowHost(hostport string) bool {
	host, port := splitHostPort(strings.ToLower(strings.TrimSpace(hostport)))
	for _, r := range rs {
		if r.any {
			return true
		}
		if host != "" && r.host == host && (r.anyPort || r.port == port) {
			return true
		}
	}
	return false
}

// splitHostPort splits host[:port] and [v6][:port]; a bare IPv6 address
// (several colons, no brackets) is all host.
func splitHostPort(s string) (host, port string) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return s, ""
		}
		host, rest := s[1:end], s[end+1:]
		if p, ok := strings.CutPrefix(rest, ":"); ok {
			return host, p
		}
		return host, ""
	}
	if strings.Count(s, ":") != 1 {
		return s, ""
	}
	host, port, _ = strings.Cut(s, ":")
	return host, port
}

func defaultPort(scheme string) string {
	switch scheme {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	}
	return ""
}

// Base64 sentinel of header values that are not plain ASCII (streamable-http
// "Value Encoding"); the markers are case-sensitive.
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// DecodeHeaderValue decodes an Mcp-Name (or Mcp-Param-*) header value,
// undoing the =?base64?…?= sentinel encoding. ok is false for a malformed
// encoding or a plain value with characters a header cannot carry.
func DecodeHeaderValue(v string) (string, bool) {
	// RFC 9110 §5.5: optional whitespace around a field value is not part of it.
	v = strings.Trim(v, " \t")
	if len(v) >= len(base64Prefix)+len(base64Suffix) &&
		strings.HasPrefix(v, base64Prefix) && strings.HasSuffix(v, base64Suffix) {
		enc := v[len(base64Prefix) : len(v)-len(base64Suffix)]
		// Strict: SEP-2243 requires rejecting bad padding and foreign characters.
		b, err := base64.StdEncoding.Strict().DecodeString(enc)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", false
		}
	}
	return v, true
}
