// Package headers is the local data plane's header map and the request and
// response header rules of Envoy's HTTP connection manager
// (source/common/http/conn_manager_utility.cc, header_map_impl.cc) it
// emulates.
package headers

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// AppendMode is how a HeaderValueOption is applied.
type AppendMode int

const (
	AppendAdd       AppendMode = iota // append a value, or add the header
	AppendIfAbsent                    // add only if absent
	AppendOverwrite                   // replace all values, or add
	AppendOverwriteIfExists
)

// Header is one header entry. Keys are lower case, as in Envoy's header maps.
type Header struct {
	Key, Value string
}

// Map is an ordered multi-valued header map that, like Envoy's, also
// holds the pseudo headers (:method, :path, :authority, :scheme, :status).
type Map struct {
	H []Header
}

func (m *Map) Get(k string) (string, bool) {
	for _, e := range m.H {
		if e.Key == k {
			return e.Value, true
		}
	}
	return "", false
}

func (m *Map) Value(k string) string {
	v, _ := m.Get(k)
	return v
}

func (m *Map) Has(k string) bool {
	_, ok := m.Get(k)
	return ok
}

func (m *Map) Values(k string) []string {
	var out []string
	for _, e := range m.H {
		if e.Key == k {
			out = append(out, e.Value)
		}
	}
	return out
}

// Joined returns all values of k joined with "," (Envoy's
// HeaderUtility::getAllOfHeaderAsString).
func (m *Map) Joined(k string) (string, bool) {
	vs := m.Values(k)
	if len(vs) == 0 {
		return "", false
	}
	return strings.Join(vs, ","), true
}

// Set replaces every value of k with v, keeping the position of the first
// (HeaderMapImpl::setCopy).
func (m *Map) Set(k, v string) {
	out := m.H[:0]
	done := false
	for _, e := range m.H {
		if e.Key != k {
			out = append(out, e)
			continue
		}
		if !done {
			out = append(out, Header{k, v})
			done = true
		}
	}
	m.H = out
	if !done {
		m.H = append(m.H, Header{k, v})
	}
}

func (m *Map) Add(k, v string) { m.H = append(m.H, Header{k, v}) }

func (m *Map) Del(k string) { m.DelFunc(func(key string) bool { return key == k }) }

func (m *Map) DelFunc(match func(string) bool) {
	m.H = slices.DeleteFunc(m.H, func(e Header) bool { return match(e.Key) })
}

// Apply applies one HeaderValueOption with the given append mode.
func (m *Map) Apply(mode AppendMode, k, v string) {
	switch mode {
	case AppendAdd:
		m.Add(k, v)
	case AppendIfAbsent:
		if !m.Has(k) {
			m.Add(k, v)
		}
	case AppendOverwrite:
		m.Set(k, v)
	case AppendOverwriteIfExists:
		if m.Has(k) {
			m.Set(k, v)
		}
	}
}

// ToProto renders the map for ext_proc. Envoy sends every value in
// raw_value (runtime flag send_header_raw_value, mutation_utils.cc
// headersToProto), one entry per value (forward_rules are not emulated).
func (m *Map) ToProto() *corev3.HeaderMap {
	// One array for the messages and one for the values, not two
	// allocations per header.
	size := 0
	for _, e := range m.H {
		size += len(e.Value)
	}
	vals := make([]corev3.HeaderValue, len(m.H))
	raw := make([]byte, 0, size)
	out := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, len(m.H))}
	for _, e := range m.H {
		v := &vals[len(out.Headers)]
		v.Key = e.Key
		raw = append(raw, e.Value...)
		v.RawValue = raw[len(raw)-len(e.Value) : len(raw) : len(raw)]
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

// FromRequest converts a downstream request to Envoy's view of it, in m:
// pseudo headers first, then the regular headers in lower case. Go does not
// keep the order of distinct header names, so they are sorted.
func FromRequest(m *Map, r *http.Request) *Map {
	// Room for the pseudo-headers, the ones the connection manager adds
	// (x-request-id, x-forwarded-*) and a filter's few, so the map is not
	// copied to grow on every request.
	m.H = make([]Header, 0, len(r.Header)+16)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	path := r.RequestURI
	if path == "" || !strings.HasPrefix(path, "/") {
		path = r.URL.RequestURI()
	}
	m.Add(":authority", r.Host)
	m.Add(":path", path)
	m.Add(":method", r.Method)
	m.Add(":scheme", scheme)
	addSorted(m, r.Header)
	return m
}

// AppendXFF is the use_remote_address part of
// ConnectionManagerUtility::mutateRequestHeaders
// (source/common/http/conn_manager_utility.cc): the downstream peer's address
// is appended to x-forwarded-for (Utility::appendXff, with "," after an
// existing value), or Envoy's own local address (LocalInfo) when the peer is
// on loopback — here the address the connection arrived on [inferred].
// x-envoy-external-address is not emulated; the internal/external
// classification is SanitizeExternal's. mutateRequestHeaders appends
// config.localAddress() when Network::Utility::isLoopbackAddress(remote)
// and skip_xff_append is off. [verify:
// source/common/http/conn_manager_utility.cc
// ConnectionManagerUtility::mutateRequestHeaders and
// source/common/http/utility.cc Utility::appendXff: read in stored copies
// (the newest with connectionInfoProvider and append_x_forwarded_port),
// none at v1.40.0]
func AppendXFF(m *Map, r *http.Request) {
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
	if v, ok := m.Joined("x-forwarded-for"); ok && v != "" {
		m.Set("x-forwarded-for", v+","+host)
		return
	}
	m.Set("x-forwarded-for", host)
}

// SanitizeRequest is the proxy-header cleanup of
// ConnectionManagerUtility::mutateRequestHeaders
// (source/common/http/conn_manager_utility.cc): keep-alive,
// proxy-connection, transfer-encoding, x-envoy-internal, and (for
// non-upgrade requests) connection and upgrade are removed before the
// filters see the request; te is kept only as "trailers".
func SanitizeRequest(m *Map) {
	for _, k := range []string{"keep-alive", "proxy-connection", "transfer-encoding", "x-envoy-internal", "connection", "upgrade"} {
		m.Del(k)
	}
	if te, ok := m.Joined("te"); ok {
		m.Del("te")
		for _, v := range strings.Split(te, ",") {
			if strings.EqualFold(strings.TrimSpace(v), "trailers") {
				m.Set("te", "trailers")
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

// SanitizeExternal applies the internal/external part of
// mutateRequestHeaders: with use_remote_address, a request is internal
// when x-forwarded-for held no address before Envoy appended the peer's
// (a single address) and the peer is in internal_address_config's
// cidr_ranges; an internal one gets x-envoy-internal: true, any other
// loses externalOnly (and, at the edge, edgeOnly). Without
// use_remote_address Envoy reads the address from x-forwarded-for
// (xff_num_trusted_hops); the local data plane treats such a request as
// external [partial].
func SanitizeExternal(m *Map, r *http.Request, useRemoteAddress bool, internalCIDRs []netip.Prefix, hadXFF bool) {
	if useRemoteAddress && !hadXFF {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			if a, err := netip.ParseAddr(host); err == nil {
				for _, p := range internalCIDRs {
					if p.Contains(a.Unmap()) {
						m.Set("x-envoy-internal", "true")
						return
					}
				}
			}
		}
	}
	if useRemoteAddress {
		for _, k := range edgeOnly {
			m.Del(k)
		}
	}
	for _, k := range externalOnly {
		m.Del(k)
	}
}

// SanitizeXFCC is ConnectionManagerUtility::mutateXfccRequestHeader for
// the modes compileHCM accepts: ALWAYS_FORWARD_ONLY keeps a client's
// x-forwarded-client-cert; SANITIZE, or a connection without a peer
// certificate, removes it; FORWARD_ONLY keeps it on an mTLS connection.
func SanitizeXFCC(m *Map, r *http.Request, mode hcmv3.HttpConnectionManager_ForwardClientCertDetails) {
	if mode == hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY {
		return
	}
	if mode == hcmv3.HttpConnectionManager_SANITIZE || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		m.Del("x-forwarded-client-cert")
	}
}

// FromResponse converts an upstream response the same way.
func FromResponse(resp *http.Response) *Map {
	m := &Map{H: make([]Header, 0, len(resp.Header)+8)}
	m.Add(":status", strconv.Itoa(resp.StatusCode))
	addSorted(m, resp.Header)
	if len(resp.TransferEncoding) > 0 && !m.Has("transfer-encoding") {
		m.Add("transfer-encoding", strings.Join(resp.TransferEncoding, ","))
	}
	return m
}

func addSorted(m *Map, h http.Header) {
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
			m.Add(lk, v)
		}
	}
}

// HTTPHeader renders the regular headers for Go's HTTP stack, dropping
// pseudo and hop-by-hop headers.
func (m *Map) HTTPHeader() http.Header {
	out := make(http.Header, len(m.H))
	m.FillHTTPHeader(out)
	return out
}

// FillHTTPHeader is httpHeader written into out, which holds none of the
// names yet (a response writer's fresh header map, filled without a map of
// its own in between).
func (m *Map) FillHTTPHeader(out http.Header) {
	// The first value of each name is a one-element window on one shared
	// array (capacity one: a second value copies), not an allocation each.
	vals := make([]string, len(m.H))
	for i, e := range m.H {
		if strings.HasPrefix(e.Key, ":") || hopByHop[e.Key] {
			continue
		}
		k := canonicalKey(e.Key)
		if prev, ok := out[k]; ok {
			out[k] = append(prev, e.Value)
			continue
		}
		vals[i] = e.Value
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

// PathOnly is the :path without its query string, which is what route
// matching uses.
func PathOnly(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return p[:i]
	}
	return p
}

// NormalizePath emulates ConnectionManagerUtility::maybeNormalizePath:
// normalize_path canonicalizes the path like PathUtil::canonicalPath
// (Chromium's URL path canonicalization: backslashes become slashes,
// percent-encoded unreserved characters are decoded, other escapes are
// upper-cased, "." and ".." segments are resolved, never above the root),
// and merge_slashes collapses runs of slashes. The query is left alone.
func NormalizePath(full string, canonical, mergeSlashes bool) string {
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
	for mergeSlashes && strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
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
		case c == '%' && i+2 < len(p) && hexByte(p[i+1:i+3]) >= 0:
			if v := byte(hexByte(p[i+1 : i+3])); isUnreserved(v) {
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

// hexByte is the value of two hex digits, -1 if s is not that.
func hexByte(s string) int {
	v, err := strconv.ParseUint(s, 16, 8)
	if err != nil {
		return -1
	}
	return int(v)
}

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
