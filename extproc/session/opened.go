package session

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// A legacy client sends its token with every request, and opening it
// (AES-256-GCM and a strict JSON decode) was most of what its session cost
// a federated call. So Keys keeps the tokens that opened, and passed every
// check, in a bounded cache keyed by the exact token string
// (docs/decisions/0028-opened-session-cache.md). It holds only what Open
// accepted: a token that does not open never enters it, and a cached one
// is still checked on every use for its expiry, route and caller, as when
// it is opened. The cache belongs to one Keys: new keys start empty.

// openedSlots bounds the cache: at most this many tokens (each at most
// MaxTokenBytes), about 1 KiB each in practice.
const openedSlots = 1024

// openedToken is a token that opened and its state, the caller hashed as
// sealed. It is never changed once stored: readers share it.
type openedToken struct {
	tok   string
	state State
}

// openedCache maps a token to its slot by a seeded hash; a slot holds the
// last token stored there. Reads and writes are single atomic loads and
// stores: no lock, and a token that lost its slot is only opened again.
type openedCache struct {
	seed  maphash.Seed
	slots [openedSlots]atomic.Pointer[openedToken]
}

func newOpenedCache() *openedCache { return &openedCache{seed: maphash.MakeSeed()} }

func (c *openedCache) slot(tok string) *atomic.Pointer[openedToken] {
	return &c.slots[maphash.String(c.seed, tok)%openedSlots]
}

// get returns a copy of the cached state of tok; its Upstreams are shared.
func (c *openedCache) get(tok string) (State, bool) {
	e := c.slot(tok).Load()
	if e == nil || !sameToken(e.tok, tok) {
		return State{}, false
	}
	return e.state, true
}

// put stores a copy of tok: the request's may share memory with the whole
// message it came in, which the cache would then keep alive.
func (c *openedCache) put(tok string, s State) {
	c.slot(tok).Store(&openedToken{tok: strings.Clone(tok), state: s})
}

// sameToken compares in time that depends on the lengths only, so that
// how long a lookup takes tells nothing of a cached token's bytes.
func sameToken(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}
