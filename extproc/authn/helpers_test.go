package authn

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/authtest"
)

// hs256WithPublicKey is the key-confusion forgery: HMAC-SHA256 keyed with
// the bytes of the issuer's public key.
func hs256WithPublicKey(t testing.TB, k *authtest.Key, claims map[string]any) string {
	t.Helper()
	return authtest.HS256WithPublicKey(t, k, map[string]any{"alg": "HS256", "kid": k.KID, "typ": "JWT"}, claims)
}

// clock is a settable test clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Unix(1_800_000_000, 0).UnixNano())
	return c
}
func (c *clock) now() time.Time             { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration)    { c.ns.Add(int64(d)) }
func (c *clock) unix(d time.Duration) int64 { return c.now().Add(d).Unix() }
