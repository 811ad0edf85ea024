package envoy

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// h1Request is an upstream request that h1Pool writes straight from the
// exchange's header map: the bytes (*http.Request).Write gives for the
// request upstreamRequest builds, without building it (a request, a URL,
// an http.Header with a slice per name, and a sorted copy of it per
// call). Only requests whose every part is well formed take this way
// (exchange.h1Request); any other goes through upstreamRequest and
// net/http as before, so the checks and errors stay net/http's.
// FuzzH1RequestWrite compares the two writers.
type h1Request struct {
	ctx         context.Context
	addr        string // the endpoint, the pool's key
	method      string
	path, query string // the request-target: path, and query when not empty
	host        string // the Host header
	h           *headerMap
	body        []byte
	length      int64 // as http.Request.ContentLength; -1: chunked
	// resp is the request http.ReadResponse is given, for the method.
	resp http.Request
}

// h1RequestExclude are the names (*http.Request).Write writes itself or
// not at all (net/http's reqWriteExcludeHeader).
func h1RequestExclude(canonical string) bool {
	switch canonical {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// h1Request fills x.h1req for an attempt to addr if the request can be
// written directly: a valid method other than CONNECT, an origin-form
// :path without control characters, a plain ASCII host, header names that
// are tokens and values without control characters, and a buffered body
// that agrees with its content-length. Otherwise it returns false and the
// request is built by upstreamRequest.
func (x *exchange) h1Request(ctx context.Context, addr string) (*h1Request, bool) {
	if x.req.rest != nil {
		return nil, false
	}
	method := x.reqH.value(":method")
	if !httpguts.ValidHeaderFieldName(method) || method == http.MethodConnect {
		return nil, false
	}
	p, q, _ := strings.Cut(x.reqH.value(":path"), "?")
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || hasCTL(p) || hasCTL(q) {
		return nil, false
	}
	host := x.reqH.value(":authority")
	if host == "" {
		host = addr
	}
	if !plainHost(host) {
		return nil, false
	}
	for _, e := range x.reqH.h {
		if strings.HasPrefix(e.key, ":") || hopByHop[e.key] {
			continue
		}
		if !httpguts.ValidHeaderFieldName(e.key) || !httpguts.ValidHeaderFieldValue(e.value) {
			return nil, false
		}
	}
	var body []byte
	length := int64(0)
	if len(x.req.buf) > 0 {
		body, length = x.req.buf, -1
	}
	if v, ok := x.reqH.get("content-length"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			length = n
		}
	}
	switch {
	case length == 0:
		body = nil // upstreamRequest sends no body then
	case length > 0:
		if int64(len(body)) != length {
			return nil, false // net/http's length mismatch error
		}
	case length == -1:
		// net/http probes the body of methods that usually lack one.
		if body == nil || requestMethodUsuallyLacksBody(method) {
			return nil, false
		}
	default:
		return nil, false
	}
	r := &x.h1req
	*r = h1Request{ctx: ctx, addr: addr, method: method, path: p, query: q, host: host, h: x.reqH, body: body, length: length}
	r.resp.Method = method
	return r, true
}

// requestMethodUsuallyLacksBody is net/http's list of the same name.
func requestMethodUsuallyLacksBody(method string) bool {
	switch method {
	case "GET", "HEAD", "DELETE", "OPTIONS", "PROPFIND", "SEARCH":
		return true
	}
	return false
}

func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < ' ' || b == 0x7f {
			return true
		}
	}
	return false
}

// plainHost reports whether net/http writes host as it is: ASCII letters,
// digits and the characters of a host:port or [IPv6]:port, no zone. Any
// other host is left to net/http (IDNA, invalid hosts, zones).
func plainHost(host string) bool {
	if host == "" {
		return false
	}
	for i := 0; i < len(host); i++ {
		switch b := host[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case b == '.' || b == '-' || b == ':' || b == '[' || b == ']' || b == '_':
		default:
			return false
		}
	}
	return true
}

// h1Field is one header line of an h1Request.
type h1Field struct{ key, value string }

// write writes the request as (*http.Request).Write does: request line,
// Host, User-Agent (the first value, none when empty), Content-Length or
// Transfer-Encoding, the other headers sorted by canonical name (values of
// one name in order), then the body, chunked when its length is unknown.
func (r *h1Request) write(w *bufio.Writer) error {
	w.WriteString(r.method)
	w.WriteByte(' ')
	w.WriteString(r.path)
	if r.query != "" {
		w.WriteByte('?')
		w.WriteString(r.query)
	}
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(r.host)
	w.WriteString("\r\n")
	var arr [32]h1Field
	fields := arr[:0]
	ua, hasUA := "", false
	for _, e := range r.h.h {
		if strings.HasPrefix(e.key, ":") || hopByHop[e.key] {
			continue
		}
		k := canonicalKey(e.key)
		if k == "User-Agent" && !hasUA {
			ua, hasUA = e.value, true
		}
		if h1RequestExclude(k) {
			continue
		}
		fields = append(fields, h1Field{k, e.value})
	}
	if ua != "" {
		w.WriteString("User-Agent: ")
		w.WriteString(trimHeaderValue(ua))
		w.WriteString("\r\n")
	}
	switch {
	case r.length > 0 || (r.length == 0 && (r.method == "POST" || r.method == "PUT" || r.method == "PATCH")):
		w.WriteString("Content-Length: ")
		var nb [20]byte
		w.Write(strconv.AppendInt(nb[:0], r.length, 10))
		w.WriteString("\r\n")
	case r.length < 0:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	slices.SortStableFunc(fields, func(a, b h1Field) int { return strings.Compare(a.key, b.key) })
	for _, f := range fields {
		w.WriteString(f.key)
		w.WriteString(": ")
		w.WriteString(trimHeaderValue(f.value))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	switch {
	case r.length > 0:
		w.Write(r.body)
	case r.length < 0:
		if len(r.body) > 0 {
			var nb [16]byte
			w.Write(strconv.AppendInt(nb[:0], int64(len(r.body)), 16))
			w.WriteString("\r\n")
			w.Write(r.body)
			w.WriteString("\r\n")
		}
		w.WriteString("0\r\n\r\n")
	}
	// A bufio.Writer keeps its first error and returns it from every
	// later call.
	_, err := w.WriteString("")
	return err
}

// trimHeaderValue is textproto.TrimString, which (*http.Request).Write
// applies to every value.
func trimHeaderValue(s string) string {
	return strings.Trim(s, " \t\r\n")
}
