package authn

import (
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/authtest"
)

// BenchmarkAuthenticate is validation with the key cached: no I/O.
// "verify" checks the signature on every request (the token cache emptied
// each time: a client's first request, or one that changes tokens on each);
// "cached" is a client that sends the same token again (verified.go).
func BenchmarkAuthenticate(b *testing.B) {
	for _, bc := range []struct {
		alg    string
		cached bool
	}{{"RS256", false}, {"RS256", true}, {"ES256", false}, {"ES256", true}} {
		alg := bc.alg
		name := alg + "/verify"
		if bc.cached {
			name = alg + "/cached"
		}
		b.Run(name, func(b *testing.B) {
			clk := newClock()
			k := authtest.NewRSAKey(b, "k")
			if alg == "ES256" {
				k = authtest.NewECKey(b, "k")
			}
			p := authtest.NewIssuer(b, "/realms/tools", k)
			a := New(Options{Now: clk.now})
			if err := a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: p.URL}}, Scopes: []string{"mcp:tools"}}}); err != nil {
				b.Fatal(err)
			}
			tok := k.SignAccessToken(b, map[string]any{"iss": p.URL, "sub": "alice", "aud": base + pub,
				"exp": clk.unix(time.Hour), "iat": clk.unix(0), "scope": "mcp:tools mcp:read"})
			r := &Request{Route: route, PublicPath: pub, Authorization: "Bearer " + tok, AuthorizationCount: 1}
			if res := a.Authenticate(b.Context(), r); res.Status != 0 {
				b.Fatalf("%+v", res)
			}
			hits := p.JWKSHits.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if !bc.cached {
					a.verified.m.Clear()
					a.verified.n.Store(0)
				}
				if res := a.Authenticate(b.Context(), r); res.Caller == nil {
					b.Fatalf("%+v", res)
				}
			}
			b.StopTimer()
			if p.JWKSHits.Load() != hits {
				b.Fatal("the JWKS was fetched on the hot path")
			}
		})
	}
}
