package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	_ "crypto/sha256" // SHA-256 for RS256, PS256, ES256
	_ "crypto/sha512" // SHA-384 and SHA-512
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"

	"github.com/toolmesh/toolmesh/mcp"
)

// compactJWS is a JWS in compact serialization (RFC 7515 section 7.1),
// parsed but not verified.
type compactJWS struct {
	alg, kid, typ string
	signingInput  string // header.payload, as sent
	payload       []byte
	sig           []byte
}

// jwsHeader is the part of the protected header validation reads. crit is
// kept to refuse extensions this server does not understand (RFC 7515
// section 4.1.11); jwk, jku, x5u and x5c are ignored: keys come only from
// the issuer's configured JWKS.
// Member names are matched exactly (RFC 7515 section 4: names are
// case-sensitive), which encoding/json's struct decoding does not do
// ("ALG" would fill Alg), and a repeated member is refused.
type jwsHeader struct {
	Alg, Kid, Typ string
}

// decodeHeader reads the protected header JSON h.
func decodeHeader(h []byte) (jwsHeader, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(h, &m); err != nil || m == nil || mcp.ArgumentsProblem(h) != "" {
		return jwsHeader{}, errJWSShape
	}
	if _, ok := m["crit"]; ok {
		return jwsHeader{}, errJWSCrit
	}
	var hdr jwsHeader
	for name, dst := range map[string]*string{"alg": &hdr.Alg, "kid": &hdr.Kid, "typ": &hdr.Typ} {
		if raw, ok := m[name]; ok && json.Unmarshal(raw, dst) != nil {
			return jwsHeader{}, errJWSShape
		}
	}
	return hdr, nil
}

var (
	errJWSShape = errors.New("not a compact JWS")
	errJWSCrit  = errors.New("critical header extension")
)

// parseCompact splits and decodes a compact JWS. Base64url must be
// unpadded (RFC 7515 section 2).
func parseCompact(token string) (*compactJWS, error) {
	h, rest, ok := strings.Cut(token, ".")
	if !ok {
		return nil, errJWSShape
	}
	p, s, ok := strings.Cut(rest, ".")
	// An empty signature parses (alg none has one) and never verifies.
	if !ok || strings.IndexByte(s, '.') >= 0 || h == "" || p == "" {
		return nil, errJWSShape
	}
	enc := base64.RawURLEncoding.Strict()
	// One buffer for the three decoded parts.
	buf := make([]byte, enc.DecodedLen(len(h))+enc.DecodedLen(len(p))+enc.DecodedLen(len(s)))
	hn, err := enc.Decode(buf, []byte(h))
	if err != nil {
		return nil, errJWSShape
	}
	pn, err := enc.Decode(buf[hn:], []byte(p))
	if err != nil {
		return nil, errJWSShape
	}
	sn, err := enc.Decode(buf[hn+pn:], []byte(s))
	if err != nil {
		return nil, errJWSShape
	}
	hdr, err := decodeHeader(buf[:hn])
	if err != nil {
		return nil, err
	}
	return &compactJWS{
		alg: hdr.Alg, kid: hdr.Kid, typ: hdr.Typ,
		signingInput: token[:len(h)+1+len(p)],
		payload:      buf[hn : hn+pn],
		sig:          buf[hn+pn : hn+pn+sn],
	}, nil
}

// hashOf is the digest of an algorithm of the allow-list.
func hashOf(alg string) crypto.Hash {
	switch alg[len(alg)-3:] {
	case "256":
		return crypto.SHA256
	case "384":
		return crypto.SHA384
	case "512":
		return crypto.SHA512
	}
	return 0
}

// verifySig checks the signature with key, whose fitness for alg keyFits
// has established (RFC 7518 section 3, RFC 8037 section 3.1).
func (j *compactJWS) verifySig(alg string, key any) bool {
	if alg == "EdDSA" {
		pk, ok := key.(ed25519.PublicKey)
		return ok && ed25519.Verify(pk, []byte(j.signingInput), j.sig)
	}
	hf := hashOf(alg)
	if hf == 0 {
		return false
	}
	h := hf.New()
	h.Write([]byte(j.signingInput))
	var sum [64]byte
	digest := h.Sum(sum[:0])
	switch pk := key.(type) {
	case *rsa.PublicKey:
		switch alg[:2] {
		case "RS":
			return rsa.VerifyPKCS1v15(pk, hf, digest, j.sig) == nil
		case "PS":
			return rsa.VerifyPSS(pk, hf, digest, j.sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		}
	case *ecdsa.PublicKey:
		// R || S, each the curve's byte size (RFC 7518 section 3.4), not
		// ASN.1.
		n := (pk.Curve.Params().BitSize + 7) / 8
		if alg[:2] != "ES" || len(j.sig) != 2*n {
			return false
		}
		r := new(big.Int).SetBytes(j.sig[:n])
		s := new(big.Int).SetBytes(j.sig[n:])
		return ecdsa.Verify(pk, digest, r, s)
	}
	return false
}

// isAccessTokenTyp reports whether typ is RFC 9068's "at+jwt" (section
// 2.1), with or without the "application/" prefix RFC 7515 section 4.1.9
// lets a producer add, compared as media types are: case-insensitively.
func isAccessTokenTyp(typ string) bool {
	return strings.EqualFold(typ, "at+jwt") || strings.EqualFold(typ, "application/at+jwt")
}
