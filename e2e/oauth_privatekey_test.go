package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/toolmesh/toolmesh/internal/oauthclient"
)

func writeKey(t *testing.T, path string, key any) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOAuthPrivateKeyJWT: the gateway authenticates to the example OP by
// private_key_jwt (RFC 7523) for a token exchange. The op package checks
// the assertion's signature with the client's registered key, iss = sub =
// the client ID, and that aud names its issuer (op.VerifyJWTAssertion), so
// the entry sets assertionAudience: issuer; with the token endpoint as aud
// (the default, OpenID Connect Core section 9) it refuses. A rotated key
// file is used from the next token request on.
//
// The example OP authenticates private_key_jwt clients only on its
// op.Server token endpoint (op.LegacyServer.VerifyClient), and there only
// for grants other than client_credentials: for that grant both of the op
// package's token endpoints call the storage's ClientCredentials(ctx,
// clientID, clientSecret) alone (LegacyServer.VerifyClient returns before
// its private_key_jwt branch; the Provider's through
// op.AuthorizeClientCredentialsClient), so the client_assertion is never
// verified nor seen by any storage. Client credentials by private_key_jwt
// cannot be tested against it (zitadel/oidc issues #813, #890).
func TestOAuthPrivateKeyJWT(t *testing.T) {
	as := startAuthServerWith(t, "unused", true)
	k1, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "gateway.pem")
	writeKey(t, keyFile, k1)
	as.store.gatewayKey.Store(&jose.JSONWebKey{Key: k1.Public(), KeyID: "gw-1", Algorithm: "RS256", Use: "sig"})
	alice := as.userToken(t, "test-user@127.0.0.1") // id1
	client := func(kid, aud string) *oauthclient.Client {
		return newOAuthClient(t, oauthclient.Config{Issuer: as.Issuer, ClientID: oauthGatewayID, AuthMethod: oauthclient.AuthPrivateKey,
			Key: oauthclient.Source{File: keyFile}, KeyID: kid, AssertionAudience: aud})
	}
	req := oauthclient.Request{Grant: oauthclient.TokenExchange, SubjectToken: alice, Subject: as.Issuer + "|id1",
		Audience: []string{"https://tools.example/orders"}}

	c := client("gw-1", oauthclient.AudienceIssuer)
	tok, err := c.Token(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if cl := jwtClaims(t, tok.AccessToken); cl["sub"] != "id1" || !slices.Contains(audiences(cl), "https://tools.example/orders") {
		t.Fatalf("exchanged token claims %v", cl)
	}

	var e *oauthclient.Error
	for name, other := range map[string]*oauthclient.Client{
		"the token endpoint as aud": client("gw-1", ""),
		"an unknown key":            client("gw-2", oauthclient.AudienceIssuer),
	} {
		if _, err := other.Token(t.Context(), req); !errors.As(err, &e) || e.Class != oauthclient.ClassRefused {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}

	// Rotation: a new key in the file and at the OP; the cached token is
	// dropped, and the next request signs with the new key.
	k2, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	writeKey(t, keyFile, k2)
	as.store.gatewayKey.Store(&jose.JSONWebKey{Key: k2.Public(), KeyID: "gw-1", Algorithm: "ES256", Use: "sig"})
	c.Evict(req)
	before := as.requests(oauthclient.TokenExchangeGrantType)
	if _, err := c.Token(t.Context(), req); err != nil {
		t.Fatalf("after rotating the key: %v", err)
	}
	if n := as.requests(oauthclient.TokenExchangeGrantType) - before; n != 1 {
		t.Fatalf("%d exchanges after the rotation, want 1", n)
	}
}
