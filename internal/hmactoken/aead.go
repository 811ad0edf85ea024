package hmactoken

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
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
