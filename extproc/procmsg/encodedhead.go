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

// headKey identifies an ImmediateResponse head.
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

// immediateHeads are the encoded heads kept, in the order first seen.
// Readers load the slice and compare (a handful of heads, each told apart
// by its status and header count before any string is compared: cheaper
// than hashing a key of eight strings); a new head copies it (rare: once
// per head).
var immediateHeads struct {
	heads atomic.Pointer[[]cachedHead]
	mu    sync.Mutex // serializes writers
}

// cachedHead is one kept head and its encoding.
type cachedHead struct {
	key  headKey
	wire []byte
}

// EncodedHead returns ImmediateHead(r, hasBody, "") in protobuf wire
// format: the status and headers, which ImmediateWire.Encode follows with the body
// and details. The slice is shared: callers only read it.
func EncodedHead(r *mcp.Reply, hasBody bool) ([]byte, error) {
	if b := keptHead(immediateHeads.heads.Load(), r, hasBody); b != nil {
		return b, nil
	}
	k, ok := cacheableHead(r, hasBody)
	b, err := proto.Marshal(ImmediateHead(r, hasBody, ""))
	if err != nil || !ok {
		return b, err
	}
	immediateHeads.mu.Lock()
	defer immediateHeads.mu.Unlock()
	old := immediateHeads.heads.Load()
	if kept := keptHead(old, r, hasBody); kept != nil { // kept meanwhile
		return kept, nil
	}
	if old != nil && len(*old) >= maxCachedHeads {
		return b, nil
	}
	var next []cachedHead
	if old != nil {
		next = append(next, *old...)
	}
	next = append(next, cachedHead{key: k, wire: b})
	immediateHeads.heads.Store(&next)
	return b, nil
}

// keptHead is the kept encoding of r's head, nil if none is kept. Only
// cacheable heads are kept, so one equal to r's says that r's is too.
func keptHead(heads *[]cachedHead, r *mcp.Reply, hasBody bool) []byte {
	if heads == nil {
		return nil
	}
next:
	for i := range *heads {
		h := &(*heads)[i]
		if h.key.status != r.Status || h.key.hasBody != hasBody || h.key.n != len(r.Headers) {
			continue
		}
		for j, hd := range r.Headers {
			if hd != h.key.headers[j] {
				continue next
			}
		}
		return h.wire
	}
	return nil
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
