// Package authtest is the OAuth issuer the tests of several packages
// stand up on 127.0.0.1: RSA and P-256 signing keys, RFC 8414 discovery
// and a JWKS the test can rotate or take down, and JWS tokens signed with
// go-jose. It is for tests only.
package authtest

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

	jose "github.com/go-jose/go-jose/v4"
)

// Key is a signing key made in the test.
type Key struct {
	KID    string
	Alg    jose.SignatureAlgorithm
	Signer crypto.Signer
}

// NewRSAKey makes an RS256 key (2048 bits) with key id kid.
func NewRSAKey(t testing.TB, kid string) *Key {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, Alg: jose.RS256, Signer: k}
}

// NewECKey makes an ES256 (P-256) key with key id kid.
func NewECKey(t testing.TB, kid string) *Key {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, Alg: jose.ES256, Signer: k}
}

// JWK is the key's public JWK, as a JWKS serves it.
func (k *Key) JWK() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.Signer.Public(), KeyID: k.KID, Algorithm: string(k.Alg), Use: "sig"}
}

// Sign makes a compact JWS of claims with k, its kid in the header and no
// typ.
func (k *Key) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return k.sign(t, claims, nil)
}

// SignAccessToken is Sign with typ "at+jwt" (RFC 9068 section 2.1).
func (k *Key) SignAccessToken(t testing.TB, claims map[string]any) string {
	t.Helper()
	return k.sign(t, claims, (&jose.SignerOptions{}).WithType("at+jwt"))
}

// SignTyped is Sign with the header typ given ("" for none).
func (k *Key) SignTyped(t testing.TB, typ string, claims map[string]any) string {
	t.Helper()
	if typ == "" {
		return k.sign(t, claims, nil)
	}
	return k.sign(t, claims, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
}

func (k *Key) sign(t testing.TB, claims map[string]any, opts *jose.SignerOptions) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: jose.JSONWebKey{Key: k.Signer, KeyID: k.KID}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
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

// RawToken assembles header.payload.signature from JSON parts; sig may be
// nil (alg none: an empty signature).
func RawToken(header, claims map[string]any, sig func(signingInput string) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	var s []byte
	if sig != nil {
		s = sig(in)
	}
	return in + "." + b64.EncodeToString(s)
}

// HS256WithPublicKey is the key-confusion forgery: a token with header
// (which should name alg HS256) whose HMAC-SHA256 is keyed with the bytes
// of k's public key (DER).
func HS256WithPublicKey(t testing.TB, k *Key, header, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.Signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	return RawToken(header, claims, func(in string) []byte {
		m := hmac.New(sha256.New, der)
		m.Write([]byte(in))
		return m.Sum(nil)
	})
}

// Issuer is an issuer on 127.0.0.1: RFC 8414 metadata at the
// path-inserted well-known URL (and OpenID discovery at the appended
// one), a JWKS at /keys whose keys the test replaces (rotation) or
// takes down, and the test's token endpoint at /token if it has one.
type Issuer struct {
	Server *httptest.Server
	// URL is the issuer identifier: the server's URL and the path.
	URL string
	// Down makes every request fail with 503 while set.
	Down atomic.Bool
	// JWKSHits and MetaHits count requests for the JWKS and for metadata.
	JWKSHits, MetaHits atomic.Int64
	// OIDCOnly serves only /.well-known/openid-configuration (appended);
	// set it before the first request.
	OIDCOnly bool
	// Token, when set before the first request, serves /token, which the
	// metadata then names as its token_endpoint.
	Token http.Handler

	mu        sync.Mutex
	keys      []*Key
	hitsByURL sync.Map // path → *atomic.Int64
}

// NewIssuer starts an Issuer whose identifier is its URL with path (""
// or starting with "/"), serving keys; it stops when the test ends.
func NewIssuer(t testing.TB, path string, keys ...*Key) *Issuer {
	t.Helper()
	p := &Issuer{keys: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := p.hitsByURL.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if p.Down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server" + path, path + "/.well-known/openid-configuration":
			if p.OIDCOnly && r.URL.Path[len(path):] != "/.well-known/openid-configuration" {
				http.NotFound(w, r)
				return
			}
			p.MetaHits.Add(1)
			meta := map[string]any{"issuer": p.URL, "jwks_uri": p.Server.URL + "/keys"}
			if p.Token != nil {
				meta["token_endpoint"] = p.Server.URL + "/token"
			}
			_ = json.NewEncoder(w).Encode(meta)
		case "/token":
			if p.Token == nil {
				http.NotFound(w, r)
				return
			}
			p.Token.ServeHTTP(w, r)
		case "/keys":
			p.JWKSHits.Add(1)
			p.mu.Lock()
			var set jose.JSONWebKeySet
			for _, k := range p.keys {
				set.Keys = append(set.Keys, k.JWK())
			}
			p.mu.Unlock()
			_ = json.NewEncoder(w).Encode(set)
		default:
			http.NotFound(w, r)
		}
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Server.Close)
	p.URL = p.Server.URL + path
	return p
}

// SetKeys replaces the keys the JWKS serves.
func (p *Issuer) SetKeys(keys ...*Key) {
	p.mu.Lock()
	p.keys = keys
	p.mu.Unlock()
}

// Hits is how many requests came for path.
func (p *Issuer) Hits(path string) int64 {
	n, ok := p.hitsByURL.Load(path)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}
