package procmsg

import (
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/mcp"
)

// The head of a list page's ImmediateResponse (status, headers) is one of
// a handful: the page's headers are the protocol's constants
// (content-type, vary, content-encoding). Serialize once: the encoded head
// is kept per distinct head, so a page's answer is a lookup and the
// per-request work is the JSON-RPC envelope around the shared items.

// headKey identifies an ImmediateResponse head. It is comparable, so a
// lookup allocates nothing.
type headKey struct {
	status  int
	hasBody bool
	n       int
	headers [maxCachedHeaders]mcp.Header
}

// maxCachedHeaders bounds the headers of a cached head.
const maxCachedHeaders = 4

// maxCachedHeads bounds the cache; past it heads are encoded per request.
const maxCachedHeads = 32

// cachedHeaderKeys are the headers whose values come from the protocol's
// constants; a reply with any other header (a session id) is not cached.
var cachedHeaderKeys = []string{"content-type", "vary", "content-encoding"}

// constantHeader reports whether key is one of cachedHeaderKeys, in any case.
func constantHeader(key string) bool {
	for _, k := range cachedHeaderKeys {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

// immediateHeads maps a headKey to its encoded ImmediateResponse head.
// Readers load the map; a new head copies it (rare: once per head).
var immediateHeads struct {
	m  atomic.Pointer[map[headKey][]byte]
	mu sync.Mutex // serializes writers
}

// EncodedHead returns ImmediateHead(r, hasBody, "") in protobuf wire
// format: the status and headers, which WireImmediate follows with the body
// and details. The slice is shared: callers only read it.
func EncodedHead(r *mcp.Reply, hasBody bool) ([]byte, error) {
	k, ok := cacheableHead(r, hasBody)
	if !ok {
		return proto.Marshal(ImmediateHead(r, hasBody, ""))
	}
	if m := immediateHeads.m.Load(); m != nil {
		if b, ok := (*m)[k]; ok {
			return b, nil
		}
	}
	b, err := proto.Marshal(ImmediateHead(r, hasBody, ""))
	if err != nil {
		return nil, err
	}
	immediateHeads.mu.Lock()
	defer immediateHeads.mu.Unlock()
	old := immediateHeads.m.Load()
	if old != nil && len(*old) >= maxCachedHeads {
		return b, nil
	}
	next := make(map[headKey][]byte, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[k] = b
	immediateHeads.m.Store(&next)
	return b, nil
}

// cacheableHead is r's headKey, if its head is one worth keeping.
func cacheableHead(r *mcp.Reply, hasBody bool) (headKey, bool) {
	k := headKey{status: r.Status, hasBody: hasBody, n: len(r.Headers)}
	if len(r.Headers) > maxCachedHeaders {
		return k, false
	}
	for i, h := range r.Headers {
		if !constantHeader(h.Key) {
			return k, false
		}
		k.headers[i] = h
	}
	return k, true
}

func lenOf(m *map[headKey][]byte) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
