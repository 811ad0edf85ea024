package dataplane

import (
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// header is one header entry. Keys are lower case, as in Envoy's header maps.
type header struct {
	key, value string
}

// headerMap is an ordered multi-valued header map that, like Envoy's, also
// holds the pseudo headers (:method, :path, :authority, :scheme, :status).
type headerMap struct {
	h []header
}

func (m *headerMap) get(k string) (string, bool) {
	for _, e := range m.h {
		if e.key == k {
			return e.value, true
		}
	}
	return "", false
}

func (m *headerMap) value(k string) string {
	v, _ := m.get(k)
	return v
}

func (m *headerMap) has(k string) bool {
	_, ok := m.get(k)
	return ok
}

func (m *headerMap) values(k string) []string {
	var out []string
	for _, e := range m.h {
		if e.key == k {
			out = append(out, e.value)
		}
	}
	return out
}

// joined returns all values of k joined with "," — how Envoy's
// HeaderUtility::getAllOfHeaderAsString presents a repeated header to
// matchers.
func (m *headerMap) joined(k string) (string, bool) {
	vs := m.values(k)
	if len(vs) == 0 {
		return "", false
	}
	return strings.Join(vs, ","), true
}

// set replaces every value of k with v, keeping the position of the first
// (HeaderMapImpl::setCopy).
func (m *headerMap) set(k, v string) {
	out := m.h[:0]
	done := false
	for _, e := range m.h {
		if e.key != k {
			out = append(out, e)
			continue
		}
		if !done {
			out = append(out, header{k, v})
			done = true
		}
	}
	m.h = out
	if !done {
		m.h = append(m.h, header{k, v})
	}
}

func (m *headerMap) add(k, v string) { m.h = append(m.h, header{k, v}) }

func (m *headerMap) del(k string) {
	m.delFunc(func(key string) bool { return key == k })
}

func (m *headerMap) delFunc(match func(string) bool) {
	out := m.h[:0]
	for _, e := range m.h {
		if !match(e.key) {
			out = append(out, e)
		}
	}
	m.h = out
}

// apply applies one HeaderValueOption with the given append mode.
func (m *headerMap) apply(mode appendMode, k, v string) {
	switch mode {
	case appendAdd:
		m.add(k, v)
	case appendIfAbsent:
		if !m.has(k) {
			m.add(k, v)
		}
	case appendOverwrite:
		m.set(k, v)
	case appendOverwriteIfExists:
		if m.has(k) {
			m.set(k, v)
		}
	}
}

// toProto renders the map for ext_proc. Envoy sends every value in
// raw_value (runtime flag send_header_raw_value, mutation_utils.cc
// headersToProto), one entry per value, filtered by forward_rules.
func (m *headerMap) toProto(forward func(string) bool) *corev3.HeaderMap {
	// One array for the messages and one for the values, not two
	// allocations per header.
	n, size := 0, 0
	for _, e := range m.h {
		if forward == nil || forward(e.key) {
			n++
			size += len(e.value)
		}
	}
	vals := make([]corev3.HeaderValue, n)
	raw := make([]byte, 0, size)
	out := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, n)}
	for _, e := range m.h {
		if forward != nil && !forward(e.key) {
			continue
		}
		v := &vals[len(out.Headers)]
		v.Key = e.key
		raw = append(raw, e.value...)
		v.RawValue = raw[len(raw)-len(e.value) : len(raw) : len(raw)]
		out.Headers = append(out.Headers, v)
	}
	return out
}

// hopByHop are the connection-level headers Go's HTTP stack owns; they are
// never copied into an outgoing message.
var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true,
}

// requestHeaderMap converts a downstream request to Envoy's view of it, in m:
// pseudo headers first, then the regular headers in lower case. Go does not
// keep the order of distinct header names, so they are sorted.
func requestHeaderMap(m *headerMap, r *http.Request) *headerMap {
	// Room for the pseudo-headers, the ones the connection manager adds
	// (x-request-id, x-forwarded-*) and a filter's few, so the map is not
	// copied to grow on every request.
	m.h = make([]header, 0, len(r.Header)+16)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	path := r.RequestURI
	if path == "" || !strings.HasPrefix(path, "/") {
		path = r.URL.RequestURI()
	}
	m.add(":authority", r.Host)
	m.add(":path", path)
	m.add(":method", r.Method)
	m.add(":scheme", scheme)
	addSorted(m, r.Header)
	return m
}

// appendXFF is the use_remote_address part of
// ConnectionManagerUtility::mutateRequestHeaders
// (source/common/http/conn_manager_utility.cc): the downstream peer's address
// is appended to x-forwarded-for (Utility::appendXff, with "," after an
// existing value), or Envoy's own local address (LocalInfo) when the peer is
// on loopback — here the address the connection arrived on [inferred].
// x-envoy-external-address and the internal/external classification
// (internal_address_config) are not emulated. [verify]
func appendXFF(m *headerMap, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if h, _, err := net.SplitHostPort(la.String()); err == nil {
				host = h
			}
		}
	}
	if v, ok := m.joined("x-forwarded-for"); ok && v != "" {
		m.set("x-forwarded-for", v+","+host)
		return
	}
	m.set("x-forwarded-for", host)
}

// sanitizeRequest is the proxy-header cleanup of
// ConnectionManagerUtility::mutateRequestHeaders
// (source/common/http/conn_manager_utility.cc): keep-alive,
// proxy-connection, transfer-encoding, x-envoy-internal, and (for
// non-upgrade requests) connection and upgrade are removed before the
// filters see the request; te is kept only as "trailers".
func sanitizeRequest(m *headerMap) {
	for _, k := range []string{"keep-alive", "proxy-connection", "transfer-encoding", "x-envoy-internal", "connection", "upgrade"} {
		m.del(k)
	}
	if te, ok := m.joined("te"); ok {
		m.del("te")
		for _, v := range strings.Split(te, ",") {
			if strings.EqualFold(strings.TrimSpace(v), "trailers") {
				m.set("te", "trailers")
			}
		}
	}
}

// externalOnly are the request headers ConnectionManagerUtility::
// mutateRequestHeaders (source/common/http/conn_manager_utility.cc) removes
// from a request that is not internal, so a client cannot change the
// router's timeouts, retries or tracing; edgeOnly it removes too when the
// request is also an edge request (use_remote_address).
var (
	externalOnly = []string{"x-envoy-retry-on", "x-envoy-retry-grpc-on", "x-envoy-max-retries",
		"x-envoy-upstream-alt-stat-name", "x-envoy-upstream-rq-timeout-ms", "x-envoy-upstream-rq-per-try-timeout-ms",
		"x-envoy-upstream-rq-timeout-alt-response", "x-envoy-expected-rq-timeout-ms", "x-envoy-force-trace", "x-envoy-ip-tags"}
	edgeOnly = []string{"x-envoy-decorator-operation", "x-envoy-downstream-service-cluster", "x-envoy-downstream-service-node"}
)

// sanitizeExternal applies the internal/external part of
// mutateRequestHeaders: with use_remote_address, a request is internal
// when x-forwarded-for held no address before Envoy appended the peer's
// (a single address) and the peer is in internal_address_config's
// cidr_ranges; an internal one gets x-envoy-internal: true, any other
// loses externalOnly (and, at the edge, edgeOnly). Without
// use_remote_address Envoy reads the address from x-forwarded-for
// (xff_num_trusted_hops); the local data plane treats such a request as
// external [partial].
func sanitizeExternal(m *headerMap, r *http.Request, hcm *hcmConfig, hadXFF bool) {
	if hcm.useRemoteAddress && !hadXFF {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			if a, err := netip.ParseAddr(host); err == nil {
				for _, p := range hcm.internalCIDRs {
					if p.Contains(a.Unmap()) {
						m.set("x-envoy-internal", "true")
						return
					}
				}
			}
		}
	}
	if hcm.useRemoteAddress {
		for _, k := range edgeOnly {
			m.del(k)
		}
	}
	for _, k := range externalOnly {
		m.del(k)
	}
}

// sanitizeXFCC is ConnectionManagerUtility::mutateXfccRequestHeader for
// the modes compileHCM accepts: ALWAYS_FORWARD_ONLY keeps a client's
// x-forwarded-client-cert; SANITIZE, or a connection without a peer
// certificate, removes it; FORWARD_ONLY keeps it on an mTLS connection.
func sanitizeXFCC(m *headerMap, r *http.Request, mode hcmv3.HttpConnectionManager_ForwardClientCertDetails) {
	if mode == hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY {
		return
	}
	if mode == hcmv3.HttpConnectionManager_SANITIZE || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		m.del("x-forwarded-client-cert")
	}
}

// responseHeaderMap converts an upstream response the same way.
func responseHeaderMap(resp *http.Response) *headerMap {
	m := &headerMap{h: make([]header, 0, len(resp.Header)+8)}
	m.add(":status", strconv.Itoa(resp.StatusCode))
	addSorted(m, resp.Header)
	if len(resp.TransferEncoding) > 0 && !m.has("transfer-encoding") {
		m.add("transfer-encoding", strings.Join(resp.TransferEncoding, ","))
	}
	return m
}

func addSorted(m *headerMap, h http.Header) {
	// Room on the stack for the names of a usual message.
	var arr [32]string
	keys := arr[:0]
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := lowerKey(k)
		if lk == "host" {
			continue // carried as :authority
		}
		for _, v := range h[k] {
			m.add(lk, v)
		}
	}
}

// httpHeader renders the regular headers for Go's HTTP stack, dropping
// pseudo and hop-by-hop headers.
func (m *headerMap) httpHeader() http.Header {
	out := make(http.Header, len(m.h))
	m.fillHTTPHeader(out)
	return out
}

// fillHTTPHeader is httpHeader written into out, which holds none of the
// names yet (a response writer's fresh header map, filled without a map of
// its own in between).
func (m *headerMap) fillHTTPHeader(out http.Header) {
	// The first value of each name is a one-element window on one shared
	// array (capacity one: a second value copies), not an allocation each.
	vals := make([]string, len(m.h))
	for i, e := range m.h {
		if strings.HasPrefix(e.key, ":") || hopByHop[e.key] {
			continue
		}
		k := canonicalKey(e.key)
		if prev, ok := out[k]; ok {
			out[k] = append(prev, e.value)
			continue
		}
		vals[i] = e.value
		out[k] = vals[i : i+1 : i+1]
	}
}

// keyCache caches a conversion of header names for the first
// maxCanonicalKeys names seen. Bounded, so that clients sending made-up
// names cannot grow it.
type keyCache struct {
	m sync.Map // name → converted name
	n atomic.Int32
}

const maxCanonicalKeys = 512

func (c *keyCache) get(k string, conv func(string) string) string {
	if v, ok := c.m.Load(k); ok {
		return v.(string)
	}
	v := conv(k)
	if v == k {
		return k // nothing to cache: conv did not allocate
	}
	if c.n.Load() < maxCanonicalKeys {
		if _, loaded := c.m.LoadOrStore(k, v); !loaded {
			c.n.Add(1)
		}
	}
	return v
}

// canonicalKeys caches http.CanonicalHeaderKey: Go's HTTP stack wants
// canonical keys, and all but its few common names cost an allocation each
// time, several per request (x-request-id, x-forwarded-proto, x-envoy-*,
// ...).
var canonicalKeys keyCache // lower-case name → canonical name

func canonicalKey(k string) string { return canonicalKeys.get(k, http.CanonicalHeaderKey) }

// lowerKeys caches strings.ToLower: Go's HTTP stack hands names over
// canonical ("Content-Type"), Envoy's header maps hold them in lower case,
// and each conversion was an allocation per header per message.
var lowerKeys keyCache // name as received → lower-case name

func lowerKey(k string) string { return lowerKeys.get(k, strings.ToLower) }

// pathOnly is the :path without its query string, which is what route
// matching uses.
func pathOnly(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return p[:i]
	}
	return p
}

// normalizePath emulates ConnectionManagerUtility::maybeNormalizePath:
// normalize_path canonicalizes the path like PathUtil::canonicalPath
// (Chromium's URL path canonicalization: backslashes become slashes,
// percent-encoded unreserved characters are decoded, other escapes are
// upper-cased, "." and ".." segments are resolved, never above the root),
// and merge_slashes collapses runs of slashes. The query is left alone.
func normalizePath(full string, canonical, mergeSlashes bool) string {
	p, q, hasQuery := strings.Cut(full, "?")
	if normalPath(p, mergeSlashes) {
		// Nothing to change: the common case, without building the path
		// again (several allocations per request).
		return full
	}
	return rebuildPath(p, q, hasQuery, canonical, mergeSlashes)
}

// rebuildPath is normalizePath without its shortcut.
func rebuildPath(p, q string, hasQuery, canonical, mergeSlashes bool) string {
	if canonical {
		p = canonicalPath(p)
	}
	if mergeSlashes {
		var b strings.Builder
		for i := 0; i < len(p); i++ {
			if p[i] == '/' && i > 0 && p[i-1] == '/' {
				continue
			}
			b.WriteByte(p[i])
		}
		p = b.String()
	}
	if hasQuery {
		return p + "?" + q
	}
	return p
}

// normalPath reports whether p is already what canonicalPath returns and,
// with mergeSlashes, has no run of slashes: it starts with "/" and has no
// backslash, no percent sign and no "." or ".." segment.
func normalPath(p string, mergeSlashes bool) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	seg := 1 // start of the current segment
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			switch c := p[i]; c {
			case '\\', '%':
				return false
			case '/':
			default:
				continue
			}
		}
		switch p[seg:i] {
		case ".", "..":
			return false
		case "":
			if mergeSlashes && i < len(p) {
				return false
			}
		}
		seg = i + 1
	}
	return true
}

func canonicalPath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			b.WriteByte('/')
		case c == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]):
			v := unhex(p[i+1])<<4 | unhex(p[i+2])
			if isUnreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteString(strings.ToUpper(p[i+1 : i+3]))
			}
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	segs := strings.Split(b.String(), "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
