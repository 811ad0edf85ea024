package oauthclient

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The client_assertion_type of private_key_jwt (RFC 7523 section 2.2).
const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime is how long a client assertion is valid: one request.
const assertionLifetime = time.Minute

// signingAlgorithm is the JWS algorithm for key: RS256 for RSA, ES256/384/512
// by curve, EdDSA.
func signingAlgorithm(key crypto.Signer) (jose.SignatureAlgorithm, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return jose.RS256, nil
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		case elliptic.P521():
			return jose.ES512, nil
		}
	case ed25519.PrivateKey:
		return jose.EdDSA, nil
	}
	return "", fmt.Errorf("no JWS algorithm for key type %T", key)
}

// clientAssertion is a private_key_jwt assertion (RFC 7523 section 3, OpenID
// Connect Core section 9): iss and sub the client ID, aud the token
// endpoint, a fresh jti, valid for one minute.
func clientAssertion(key crypto.Signer, keyID, clientID, audience string, now time.Time) (string, error) {
	alg, err := signingAlgorithm(key)
	if err != nil {
		return "", err
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	jwk := jose.JSONWebKey{Key: key, KeyID: keyID}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jwk}, opts)
	if err != nil {
		return "", fmt.Errorf("client assertion signer: %w", err)
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{
		"iss": clientID, "sub": clientID, "aud": audience,
		"jti": hex.EncodeToString(jti[:]),
		"iat": now.Unix(), "exp": now.Add(assertionLifetime).Unix(),
	})
	if err != nil {
		return "", err
	}
	jws, err := sig.Sign(claims)
	if err != nil {
		return "", fmt.Errorf("sign client assertion: %w", err)
	}
	return jws.CompactSerialize()
}
