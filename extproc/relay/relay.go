// Package relay turns the JSON-RPC id of a request a federated legacy MCP
// server sends to the client (sampling, elicitation, roots) into an opaque,
// encrypted and authenticated token, and back
// (docs/decisions/0006-federated-mcp-servers.md, "Requests of legacy
// servers to the client").
//
// The token holds everything needed to deliver the client's answer: the
// route, the Tool Service, the protocol version and upstream session the
// request came on, and the server's own id. The gateway keeps no state:
// any replica holding the key can open a token and deliver the answer. The
// client holds the token but reads nothing of it: the gateway's upstream
// session id is the gateway's.
package relay

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/internal/hmactoken"
)

// The token is
//
//	tmr2.<key id>.<sealed>
//
// sealed the base64url (unpadded) of a random 12-byte nonce followed by the
// AES-256-GCM encryption of the JSON of payload, with aadLabel and the key
// id as additional data. The AES key is derived from the configured key's
// secret with HKDF-SHA256 (RFC 5869, info aeadInfo), so the relayKeys of
// the configuration and their rotation are unchanged: the first key
// seals, every key opens the tokens of its id. Random nonces bound a key
// to about 2^32 tokens (NIST SP 800-38D section 8.3); relayed requests are
// far fewer, and rotation resets the count.
//
// tmr1 tokens (signed with HMAC-SHA256, the payload readable) are refused.
const (
	prefix    = "tmr2."
	oldPrefix = "tmr1."
	aeadInfo  = "toolmesh relay token v2 AES-256-GCM"
	aadLabel  = "toolmesh relay id v2\x00"
	// MaxTokenBytes bounds a token the gateway parses.
	MaxTokenBytes = 2048
	// MinKeyBytes is the shortest key accepted.
	MinKeyBytes = hmactoken.MinKeyBytes
	// TTL is how long a token is accepted. The request it stands for is
	// bounded by the route timeout; an answer later than that reaches a
	// server that no longer waits for it.
	TTL = time.Hour
	// maxIDBytes bounds the server's id kept in a token.
	maxIDBytes = 256
)

var b64 = base64.RawURLEncoding

// Key is one relay key: its secret derives the token key.
type Key struct {
	ID     string
	Secret []byte
}

// Target is where a client's answer goes.
type Target struct {
	Route   string
	Service string
	Version string // the session's protocol version
	Session string // the upstream Mcp-Session-Id, "" for none
	ID      json.RawMessage
	// Caller names the authenticated caller the request was sent to ("":
	// anonymous); an answer from another caller is refused.
	Caller string
}

type payload struct {
	Route   string          `json:"r"`
	Service string          `json:"s"`
	Version string          `json:"v"`
	Session string          `json:"x,omitempty"`
	ID      json.RawMessage `json:"i"`
	Caller  string          `json:"c,omitempty"` // base64url SHA-256 of the caller key
	Expires int64           `json:"e"`           // unix seconds
}

// Keys mints and opens tokens. It is immutable; a new configuration builds
// new Keys, swapped in atomically.
type Keys struct {
	sealID string
	byID   map[string]cipher.AEAD
	now    func() time.Time
	// Generated is true for a key made at start: valid on this replica only.
	Generated bool
}

// New validates keys (the first seals, every one opens). now may be nil.
func New(keys []Key, now func() time.Time) (*Keys, error) {
	hk := make([]hmactoken.Key, len(keys))
	for i, key := range keys {
		hk[i] = hmactoken.Key(key)
	}
	// The shared checks of key ids and lengths, with errors naming relayKeys.
	if _, err := hmactoken.New("relayKeys", aadLabel, hk); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	byID, err := hmactoken.AEADs(hk, aeadInfo)
	if err != nil {
		return nil, err
	}
	k := &Keys{sealID: keys[0].ID, byID: byID, now: now}
	return k, nil
}

// Generate returns Keys with one random key: tokens verify on this process
// only, so it fits a single replica.
func Generate() *Keys {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	k, _ := New([]Key{{ID: "generated", Secret: secret}}, nil)
	k.Generated = true
	return k
}

// Mint returns the token (a JSON string value, quoted) that stands for t.ID.
func (k *Keys) Mint(t Target) (json.RawMessage, error) {
	if len(t.ID) == 0 || len(t.ID) > maxIDBytes {
		return nil, errors.New("relay: the server's id is empty or too long")
	}
	p, err := json.Marshal(payload{Route: t.Route, Service: t.Service, Version: t.Version, Session: t.Session,
		ID: t.ID, Caller: hmactoken.CallerHash(t.Caller), Expires: k.now().Add(TTL).Unix()})
	if err != nil {
		return nil, err
	}
	sealed := hmactoken.SealAEAD(k.byID[k.sealID], p, additionalData(k.sealID))
	return json.Marshal(prefix + k.sealID + "." + sealed)
}

func additionalData(kid string) []byte { return []byte(aadLabel + kid) }

// Is reports whether id (raw JSON) has the shape of a token, of this
// format or an earlier one, valid or not.
func Is(id json.RawMessage) bool {
	return bytes.HasPrefix(id, []byte(`"`+prefix)) || bytes.HasPrefix(id, []byte(`"`+oldPrefix))
}

// Errors of Open.
var (
	ErrMalformed   = errors.New("relay: malformed token")
	ErrUnknownKey  = errors.New("relay: unknown key")
	ErrSignature   = errors.New("relay: token does not authenticate")
	ErrOldFormat   = errors.New("relay: token of an earlier format (tmr1), no longer accepted")
	ErrExpired     = errors.New("relay: token expired")
	ErrOtherRoute  = errors.New("relay: token of another route")
	ErrOtherCaller = errors.New("relay: token of another caller")
)

// Open authenticates and decrypts id (raw JSON) and returns its target,
// checked against the route and caller the answer came with. Nothing of
// the payload is read before it authenticates.
func (k *Keys) Open(id json.RawMessage, route, caller string) (*Target, error) {
	var tok string
	if len(id) > MaxTokenBytes || json.Unmarshal(id, &tok) != nil {
		return nil, ErrMalformed
	}
	if strings.HasPrefix(tok, oldPrefix) {
		return nil, ErrOldFormat
	}
	kid, body, ok := strings.Cut(strings.TrimPrefix(tok, prefix), ".")
	if !strings.HasPrefix(tok, prefix) || !ok {
		return nil, ErrMalformed
	}
	aead := k.byID[kid]
	if aead == nil {
		return nil, ErrUnknownKey
	}
	raw, err := hmactoken.OpenAEAD(aead, body, additionalData(kid))
	if errors.Is(err, hmactoken.ErrNotAuthentic) {
		return nil, ErrSignature
	} else if err != nil {
		return nil, ErrMalformed
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p payload
	if err := dec.Decode(&p); err != nil || dec.More() || len(p.ID) == 0 {
		return nil, ErrMalformed
	}
	switch {
	case !k.now().Before(time.Unix(p.Expires, 0)):
		return nil, ErrExpired
	case p.Route != route:
		return nil, ErrOtherRoute
	case p.Caller != hmactoken.CallerHash(caller):
		return nil, ErrOtherCaller
	}
	return &Target{Route: p.Route, Service: p.Service, Version: p.Version, Session: p.Session, ID: p.ID, Caller: caller}, nil
}
