package authn

import (
	"sync"
	"sync/atomic"
	"time"
)

// maxVerified bounds the tokens remembered as verified. Past it, a new
// token is verified on every request until expired entries are swept.
const maxVerified = 10000

// verifiedTokens remembers tokens whose signature checked out, so a client
// that sends the same token on each request pays for one signature check
// per key set instead of one per request (the idea of Envoy jwt_authn's
// jwt_cache_config). Only the signature and the decoded claims are
// remembered: expiry, audience, scopes and the route's issuers and
// algorithms are checked on every request, and an entry is used only while
// its issuer's key set is the one that verified it, so a refreshed JWKS
// (a removed key) verifies again. Reads take no lock.
type verifiedTokens struct {
	m         sync.Map // token → *verifiedToken
	n         atomic.Int64
	sweeping  atomic.Bool
	lastSweep atomic.Int64 // unix nanoseconds of the last sweep
}

// sweepEvery spaces sweeps: with the cache full of tokens still valid, a
// sweep frees nothing, and each new token must not pay for a walk of
// every entry.
const sweepEvery = time.Second

type verifiedToken struct {
	src    *keySource
	keys   *keySet
	alg    string
	typ    string         // the JWS header's
	claims map[string]any // decoded once, never changed
	exp    time.Time
}

// get returns what is remembered of token, nil when nothing still holds.
func (v *verifiedTokens) get(token string) *verifiedToken {
	e, ok := v.m.Load(token)
	if !ok {
		return nil
	}
	t := e.(*verifiedToken)
	if t.keys != t.src.keys.Load() {
		return nil
	}
	return t
}

// put remembers a verified token, sweeping expired and stale entries when
// the bound is reached; a token that still does not fit is not kept.
func (v *verifiedTokens) put(token string, t *verifiedToken, now time.Time) {
	if v.n.Load() >= maxVerified {
		v.sweep(now)
		if v.n.Load() >= maxVerified {
			return
		}
	}
	if _, loaded := v.m.LoadOrStore(token, t); !loaded {
		v.n.Add(1)
	}
}

func (v *verifiedTokens) sweep(now time.Time) {
	if now.UnixNano()-v.lastSweep.Load() < int64(sweepEvery) || !v.sweeping.CompareAndSwap(false, true) {
		return // swept a moment ago, or another request sweeps
	}
	defer v.sweeping.Store(false)
	v.lastSweep.Store(now.UnixNano())
	v.m.Range(func(k, e any) bool {
		t := e.(*verifiedToken)
		if !now.Before(t.exp) || t.keys != t.src.keys.Load() {
			if _, deleted := v.m.LoadAndDelete(k); deleted {
				v.n.Add(-1)
			}
		}
		return true
	})
}
