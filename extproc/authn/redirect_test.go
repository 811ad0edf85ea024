package authn

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/toolmesh/toolmesh/internal/authtest"
)

// TestJWKSRedirects: an https jwksUrl follows a redirect on its own origin
// but never one to http or to another origin, even when that origin serves
// the issuer's real keys: the token is refused and the other server is
// never asked.
func TestJWKSRedirects(t *testing.T) {
	clk := newClock()
	k := authtest.NewRSAKey(t, "k")
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.JWK()}})
	keys := func(hits *atomic.Int64) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(set)
		}
	}
	var plainHits, otherHits, ownHits atomic.Int64
	plain := httptest.NewServer(keys(&plainHits)) // http on 127.0.0.1
	t.Cleanup(plain.Close)
	other := httptest.NewTLSServer(keys(&otherHits)) // https, another port: another origin
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.Handle("/keys", keys(&ownHits))
	redirect := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
	}
	mux.Handle("/same-origin", redirect("/keys"))
	mux.Handle("/to-http", redirect(plain.URL+"/keys"))
	mux.Handle("/to-other-origin", redirect(other.URL+"/keys"))
	own := httptest.NewTLSServer(mux)
	t.Cleanup(own.Close)

	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/same-origin", true},
		{"/to-http", false},
		{"/to-other-origin", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			plainHits.Store(0)
			otherHits.Store(0)
			a := New(Options{Now: clk.now, Client: own.Client()})
			is := Issuer{Issuer: "https://idp.example.com", JWKSURL: own.URL + tc.path}
			if err := a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{is}}}); err != nil {
				t.Fatal(err)
			}
			tok := k.SignAccessToken(t, map[string]any{"iss": is.Issuer, "aud": base + pub, "exp": clk.unix(time.Hour)})
			res := a.Authenticate(t.Context(), &Request{Route: route, PublicPath: pub, Authorization: "Bearer " + tok, AuthorizationCount: 1})
			if ok := res.Status == 0; ok != tc.ok {
				t.Fatalf("accepted = %v, want %v: %+v", ok, tc.ok, res)
			}
			if n := plainHits.Load() + otherHits.Load(); n != 0 {
				t.Errorf("the redirect target was asked %d times", n)
			}
		})
	}
}
