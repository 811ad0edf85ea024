package authn

import (
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/authtest"
)

// FuzzAuthenticate feeds arbitrary Authorization values and queries to the
// parser and validator. Nothing may panic, and nothing but a token signed
// by the issuer's key may produce a caller.
func FuzzAuthenticate(f *testing.F) {
	clk := newClock()
	k := authtest.NewECKey(f, "k")
	p := authtest.NewIssuer(f, "", k)
	a := New(Options{Now: clk.now, MinRefreshInterval: time.Hour})
	if err := a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: p.URL}}}}); err != nil {
		f.Fatal(err)
	}
	good := k.SignAccessToken(f, map[string]any{"iss": p.URL, "aud": base + pub, "exp": clk.unix(time.Hour)})
	if res := a.Authenticate(f.Context(), &Request{Route: route, PublicPath: pub, Authorization: "Bearer " + good, AuthorizationCount: 1}); res.Status != 0 {
		f.Fatalf("seed token: %+v", res)
	}
	f.Add("Bearer "+good, "")
	f.Add("Bearer "+authtest.RawToken(map[string]any{"alg": "none"}, map[string]any{"iss": p.URL}, nil), "")
	f.Add("Bearer e30.e30.", "access_token=x")
	f.Add("Bearer ..", "a=b&c")
	f.Add("bearer    x.y.z", "%zz=1")
	f.Fuzz(func(t *testing.T, authz, query string) {
		res := a.Authenticate(t.Context(), &Request{Route: route, PublicPath: pub, Authorization: authz, AuthorizationCount: 1, Query: query})
		if res.Caller != nil && !strings.Contains(authz, good[:strings.LastIndexByte(good, '.')]) {
			t.Fatalf("caller from a token not signed by the issuer: %q", authz)
		}
		if res.Status == 0 && res.Caller == nil {
			t.Fatalf("required route let %q through anonymous", authz)
		}
	})
}
