package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestVerifyEveryAlgorithm: a token go-jose signs with each algorithm of
// the allow-list verifies with the key it was signed with and fits it,
// and fails with a flipped signature bit or another key of the same type.
func TestVerifyEveryAlgorithm(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	rk2, _ := rsa.GenerateKey(rand.Reader, 2048)
	ec := func(c elliptic.Curve) *ecdsa.PrivateKey { k, _ := ecdsa.GenerateKey(c, rand.Reader); return k }
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	_, ed2, _ := ed25519.GenerateKey(rand.Reader)
	keys := map[string][2]crypto.Signer{
		"RS256": {rk, rk2}, "RS384": {rk, rk2}, "RS512": {rk, rk2},
		"PS256": {rk, rk2}, "PS384": {rk, rk2}, "PS512": {rk, rk2},
		"ES256": {ec(elliptic.P256()), ec(elliptic.P256())},
		"ES384": {ec(elliptic.P384()), ec(elliptic.P384())},
		"ES512": {ec(elliptic.P521()), ec(elliptic.P521())},
		"EdDSA": {ed, ed2},
	}
	for _, alg := range supportedAlgorithms {
		t.Run(alg, func(t *testing.T) {
			pair := keys[alg]
			s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: pair[0]}, nil)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := s.Sign([]byte(`{"iss":"x"}`))
			if err != nil {
				t.Fatal(err)
			}
			tok, _ := obj.CompactSerialize()
			j, err := parseCompact(tok)
			if err != nil || j.alg != alg || string(j.payload) != `{"iss":"x"}` {
				t.Fatalf("parse: %v %+v", err, j)
			}
			good := &jose.JSONWebKey{Key: pair[0].Public()}
			if !keyFits(good, alg) || !j.verifySig(alg, good.Key) {
				t.Fatal("the signing key does not verify")
			}
			if j.verifySig(alg, pair[1].Public()) {
				t.Fatal("another key verifies")
			}
			j.sig[len(j.sig)/2] ^= 1
			if j.verifySig(alg, good.Key) {
				t.Fatal("a flipped signature verifies")
			}
		})
	}
	// Algorithm families do not cross: RSA keys for ES*, curves for other
	// curves, EC keys for RS*.
	p256 := &jose.JSONWebKey{Key: keys["ES256"][0].Public()}
	for _, c := range []struct {
		key *jose.JSONWebKey
		alg string
	}{{p256, "ES384"}, {p256, "RS256"}, {&jose.JSONWebKey{Key: rk.Public()}, "ES256"},
		{&jose.JSONWebKey{Key: rk.Public(), Algorithm: "RS256"}, "PS256"}, {&jose.JSONWebKey{Key: ed.Public()}, "ES256"}} {
		if keyFits(c.key, c.alg) {
			t.Errorf("%T (alg %q) fits %s", c.key.Key, c.key.Algorithm, c.alg)
		}
	}
}

func TestParseCompact(t *testing.T) {
	for _, tok := range []string{
		"", "a", "a.b", "a.b.c.d", ".e30.", "e30..", "e30=.e30.", // padding is not base64url
		"eyJhbGciOiJFUzI1NiIsImNyaXQiOlsiZXhwIl19.e30.", // crit
		"bm90IGpzb24.e30.", // header not JSON
	} {
		if j, err := parseCompact(tok); err == nil {
			t.Errorf("%q parsed: %+v", tok, j)
		}
	}
}

// TestHeaderNamesAreCaseSensitive: RFC 7515 section 4 names are
// case-sensitive; "ALG" is not alg, a repeated alg is refused, and a
// header whose alg is not a string is malformed.
func TestHeaderNamesAreCaseSensitive(t *testing.T) {
	enc := func(h string) string { return base64.RawURLEncoding.EncodeToString([]byte(h)) + ".e30.c2ln" }
	for h, want := range map[string]string{
		`{"alg":"RS256","kid":"k"}`:    "RS256/k",
		`{"ALG":"RS256","kid":"k"}`:    "/k",
		`{"Alg":"RS256","Kid":"k"}`:    "/",
		`{"alg":"RS256","alg":"none"}`: "error",
		`{"alg":1}`:                    "error",
		`{"CRIT":["x"],"alg":"ES256"}`: "ES256/",
		`[]`:                           "error",
	} {
		j, err := parseCompact(enc(h))
		got := "error"
		if err == nil {
			got = j.alg + "/" + j.kid
		}
		if got != want {
			t.Errorf("header %s: got %s, want %s", h, got, want)
		}
	}
}
