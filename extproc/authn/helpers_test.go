package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// testKey is a signing key made in the test and its public JWK.
type testKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newRSAKey(t testing.TB, kid string) *testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, alg: jose.RS256, key: k}
}

func newECKey(t testing.TB, kid string) *testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, alg: jose.ES256, key: k}
}

func (k *testKey) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// sign makes a compact JWS of claims with k, kid in the header.
func (k *testKey) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var b64 = base64.RawURLEncoding

// rawToken assembles header.payload.signature from JSON parts; sig may be
// nil (alg none).
func rawToken(header, claims map[string]any, sig func(signingInput string) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	var s []byte
	if sig != nil {
		s = sig(in)
	}
	return in + "." + b64.EncodeToString(s)
}

// hs256WithPublicKey is the key-confusion forgery: HMAC-SHA256 keyed with
// the bytes of the issuer's public key.
func hs256WithPublicKey(t testing.TB, k *testKey, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return rawToken(map[string]any{"alg": "HS256", "kid": k.kid, "typ": "JWT"}, claims, func(in string) []byte {
		m := hmac.New(sha256.New, der)
		m.Write([]byte(in))
		return m.Sum(nil)
	})
}

// idp is an issuer on 127.0.0.1: RFC 8414 metadata at the path-inserted
// well-known URL, and a JWKS whose keys the test replaces (rotation) or
// takes down.
type idp struct {
	srv       *httptest.Server
	issuer    string
	mu        sync.Mutex
	keys      []*testKey
	down      atomic.Bool
	jwksHits  atomic.Int64
	metaHits  atomic.Int64
	oidcOnly  bool // serve only /.well-known/openid-configuration (appended)
	hitsByURL sync.Map
}

func newIDP(t testing.TB, path string, keys ...*testKey) *idp {
	t.Helper()
	p := &idp{keys: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := p.hitsByURL.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if p.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server" + path, path + "/.well-known/openid-configuration":
			if p.oidcOnly && r.URL.Path[len(path):] != "/.well-known/openid-configuration" {
				http.NotFound(w, r)
				return
			}
			p.metaHits.Add(1)
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": p.issuer, "jwks_uri": p.srv.URL + "/keys"})
		case "/keys":
			p.jwksHits.Add(1)
			p.mu.Lock()
			var set jose.JSONWebKeySet
			for _, k := range p.keys {
				set.Keys = append(set.Keys, k.jwk())
			}
			p.mu.Unlock()
			_ = json.NewEncoder(w).Encode(set)
		default:
			http.NotFound(w, r)
		}
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.issuer = p.srv.URL + path
	return p
}

func (p *idp) setKeys(keys ...*testKey) {
	p.mu.Lock()
	p.keys = keys
	p.mu.Unlock()
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
