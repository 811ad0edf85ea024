package authn

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/authtest"
)

// TestVerifiedTokenCache: a token verified once is not verified again
// while its issuer's key set stays (the same decoded claims come back),
// but every per-request check still runs: expiry, and a key set refreshed
// without its key refuses it.
func TestVerifiedTokenCache(t *testing.T) {
	f := newFixture(t, ModeRequired)
	tok := "Bearer " + f.rsa.SignAccessToken(t, f.claims(nil))
	first := f.auth(t, tok, "")
	if first.Status != 0 {
		t.Fatalf("first: %+v", first)
	}
	second := f.auth(t, tok, "")
	if second.Status != 0 {
		t.Fatalf("second: %+v", second)
	}
	if reflect.ValueOf(first.Caller.Claims).Pointer() != reflect.ValueOf(second.Caller.Claims).Pointer() {
		t.Fatal("the second request decoded and verified the token again")
	}
	if n := f.a.verified.n.Load(); n != 1 {
		t.Fatalf("%d tokens remembered, want 1", n)
	}

	// Expiry is checked on every request, cached or not.
	f.clk.advance(2 * time.Hour)
	if res := f.auth(t, tok, ""); res.Status != 401 || !strings.Contains(res.Challenge, "expired") {
		t.Fatalf("after expiry: %+v", res)
	}

	// A key set refreshed without the token's key: verified again, refused.
	f2 := newFixture(t, ModeRequired)
	tok2 := "Bearer " + f2.rsa.SignAccessToken(t, f2.claims(nil))
	if res := f2.auth(t, tok2, ""); res.Status != 0 {
		t.Fatalf("before rotation: %+v", res)
	}
	f2.idp.SetKeys(authtest.NewRSAKey(t, "rsa-2"), f2.ec)
	f2.clk.advance(time.Minute)
	// A token with an unknown kid makes the gateway refetch the JWKS.
	if res := f2.auth(t, "Bearer "+authtest.NewRSAKey(t, "rsa-3").SignAccessToken(t, f2.claims(nil)), ""); res.Status != 401 {
		t.Fatalf("unknown kid: %+v", res)
	}
	if res := f2.auth(t, tok2, ""); res.Status != 401 || !strings.Contains(res.Challenge, "unknown") {
		t.Fatalf("the cached token of a retired key: %+v", res)
	}
}

// TestVerifiedTokenOtherRoute: a token verified for one route's issuer is
// not accepted on a route that trusts another issuer.
func TestVerifiedTokenOtherRoute(t *testing.T) {
	f := newFixture(t, ModeRequired)
	other := authtest.NewIssuer(t, "/realms/other", authtest.NewRSAKey(t, "o-1"))
	cfg := &Config{
		Default: &Profile{Issuers: []Issuer{{Issuer: f.idp.URL}}, Scopes: []string{"mcp:tools"}},
		Routes:  map[string]*Profile{"strict": {Issuers: []Issuer{{Issuer: other.URL}}}},
	}
	if err := f.a.Apply(base, cfg); err != nil {
		t.Fatal(err)
	}
	tok := "Bearer " + f.rsa.SignAccessToken(t, f.claims(nil))
	if res := f.auth(t, tok, ""); res.Status != 0 {
		t.Fatalf("route core: %+v", res)
	}
	r := &Request{Route: "strict", PublicPath: "/mcp/strict", Authorization: tok, AuthorizationCount: 1}
	if res := f.a.Authenticate(t.Context(), r); res.Status != 401 || !strings.Contains(res.Challenge, "issuer") {
		t.Fatalf("route strict: %+v", res)
	}
}

// TestVerifiedTokensBound: a full cache keeps no more tokens; a sweep, at
// most once per sweepEvery, drops the expired ones and makes room.
func TestVerifiedTokensBound(t *testing.T) {
	var v verifiedTokens
	src := &keySource{}
	ks := &keySet{}
	src.keys.Store(ks)
	now := time.Unix(1_800_000_000, 0)
	for i := range maxVerified {
		v.put(fmt.Sprint("t", i), &verifiedToken{src: src, keys: ks, exp: now.Add(time.Minute)}, now)
	}
	v.put("extra", &verifiedToken{src: src, keys: ks, exp: now.Add(time.Hour)}, now)
	if v.get("extra") != nil || v.n.Load() != maxVerified {
		t.Fatalf("a full cache took another token (%d entries)", v.n.Load())
	}
	later := now.Add(2 * time.Minute) // every entry expired
	v.put("extra", &verifiedToken{src: src, keys: ks, exp: later.Add(time.Hour)}, later)
	if v.get("extra") == nil || v.n.Load() != 1 {
		t.Fatalf("after the sweep: %d entries, extra kept %v", v.n.Load(), v.get("extra") != nil)
	}
	for i := range maxVerified - 1 {
		v.put(fmt.Sprint("u", i), &verifiedToken{src: src, keys: ks, exp: later.Add(time.Minute)}, later)
	}
	// Full again, nothing expired: within sweepEvery no walk happens.
	last := v.lastSweep.Load()
	v.put("more", &verifiedToken{src: src, keys: ks, exp: later.Add(time.Hour)}, later.Add(sweepEvery/2))
	if v.lastSweep.Load() != last || v.get("more") != nil {
		t.Fatal("a second sweep within sweepEvery, or a token past the bound")
	}
}
