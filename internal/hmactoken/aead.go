package hmactoken

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

// AEADs derives one AES-256-GCM AEAD per key, by key id: the key's secret
// through HKDF-SHA256 (RFC 5869) with info, one info per use, so a token
// sealed for one kind never opens as another. The relay tokens and the
// client sessions share it; the keys are checked as New checks them.
func AEADs(keys []Key, info string) (map[string]cipher.AEAD, error) {
	out := make(map[string]cipher.AEAD, len(keys))
	for _, k := range keys {
		dk, err := hkdf.Key(sha256.New, k.Secret, nil, info, 32)
		if err != nil {
			return nil, err
		}
		block, err := aes.NewCipher(dk)
		if err != nil {
			return nil, err
		}
		if out[k.ID], err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Errors of OpenAEAD.
var (
	ErrSealedMalformed = errors.New("sealed part is not base64url or too short")
	ErrNotAuthentic    = errors.New("sealed part does not open under the key")
)

// SealAEAD returns the sealed part of a token: the unpadded base64url of a
// random nonce followed by a's sealing of p, with aad as additional data.
// Random nonces bound a key to about 2^32 sealings (NIST SP 800-38D
// section 8.3).
func SealAEAD(a cipher.AEAD, p, aad []byte) string {
	sealed := make([]byte, a.NonceSize(), a.NonceSize()+len(p)+a.Overhead())
	_, _ = rand.Read(sealed) // never fails (crypto/rand)
	return b64.EncodeToString(a.Seal(sealed, sealed, p, aad))
}

// OpenAEAD opens what SealAEAD sealed with the same aad.
func OpenAEAD(a cipher.AEAD, sealed string, aad []byte) ([]byte, error) {
	raw, err := b64.Strict().DecodeString(sealed)
	n := a.NonceSize()
	if err != nil || len(raw) < n+a.Overhead() {
		return nil, ErrSealedMalformed
	}
	p, err := a.Open(nil, raw[:n], raw[n:], aad)
	if err != nil {
		return nil, ErrNotAuthentic
	}
	return p, nil
}
