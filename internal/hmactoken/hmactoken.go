// Package hmactoken is the signed envelope that approval states and relay
// ids share: "<key id>.<payload>.<mac>", payload the base64url (unpadded)
// of the caller's bytes, mac the base64url HMAC-SHA256 under the key over
// a label (one per use, so a token of one kind never verifies as
// another), the key id, "." and the payload text. Each user adds its own
// prefix and decodes its own payload.
package hmactoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// MinKeyBytes is the shortest key accepted (RFC 2104 section 3: at least
// the hash output, 32 bytes for SHA-256).
const MinKeyBytes = 32

// keyIDPattern keeps key ids short and free of the envelope's separator.
var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

var b64 = base64.RawURLEncoding

// Key is one HMAC-SHA256 key.
type Key struct {
	ID     string
	Secret []byte
}

// Keys seals with the first key and opens with any. It is immutable.
type Keys struct {
	label  string
	signer Key
	byID   map[string][]byte
}

// New validates keys; errors name field (the configuration key, e.g.
// "approval.keys") and the key's index.
func New(field, label string, keys []Key) (*Keys, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: at least one key is required", field)
	}
	k := &Keys{label: label, byID: make(map[string][]byte, len(keys))}
	for i, key := range keys {
		if !keyIDPattern.MatchString(key.ID) {
			return nil, fmt.Errorf("%s[%d].id %q: 1 to 32 of A-Z a-z 0-9 _ -", field, i, key.ID)
		}
		if _, dup := k.byID[key.ID]; dup {
			return nil, fmt.Errorf("%s[%d].id %q: duplicate key id", field, i, key.ID)
		}
		if len(key.Secret) < MinKeyBytes {
			return nil, fmt.Errorf("%s[%d] (id %s): the key has %d bytes, at least %d are required", field, i, key.ID, len(key.Secret), MinKeyBytes)
		}
		k.byID[key.ID] = slices.Clone(key.Secret)
	}
	k.signer = Key{ID: keys[0].ID, Secret: k.byID[keys[0].ID]}
	return k, nil
}

// Seal is the envelope of payload under the first key.
func (k *Keys) Seal(payload []byte) string {
	body := b64.EncodeToString(payload)
	return k.signer.ID + "." + body + "." + b64.EncodeToString(k.mac(k.signer.Secret, k.signer.ID, body))
}

// Errors of Open.
var (
	ErrMalformed  = errors.New("malformed")
	ErrUnknownKey = errors.New("unknown key")
	ErrSignature  = errors.New("bad signature")
)

// Open authenticates an envelope and returns its payload; nothing of the
// payload is read before the mac verifies.
func (k *Keys) Open(s string) ([]byte, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || !keyIDPattern.MatchString(parts[0]) {
		return nil, ErrMalformed
	}
	kid, body, sig := parts[0], parts[1], parts[2]
	secret := k.byID[kid]
	if secret == nil {
		return nil, ErrUnknownKey
	}
	got, err := b64.Strict().DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return nil, ErrMalformed
	}
	if !hmac.Equal(got, k.mac(secret, kid, body)) {
		return nil, ErrSignature
	}
	raw, err := b64.Strict().DecodeString(body)
	if err != nil {
		return nil, ErrMalformed
	}
	return raw, nil
}

func (k *Keys) mac(secret []byte, kid, body string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(k.label))
	m.Write([]byte(kid))
	m.Write([]byte{'.'})
	m.Write([]byte(body))
	return m.Sum(nil)
}

// CallerHash is the base64url SHA-256 of a caller key; "" for "" (an
// anonymous caller).
func CallerHash(key string) string {
	if key == "" {
		return ""
	}
	h := sha256.Sum256([]byte(key))
	return b64.EncodeToString(h[:])
}
