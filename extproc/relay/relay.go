// Package relay turns the JSON-RPC id of a request a federated legacy MCP
// server sends to the client (sampling, elicitation, roots) into an opaque,
// HMAC-authenticated token, and back (docs/decisions/0006-federated-mcp-servers.md,
// "Requests of legacy servers to the client").
//
// The token says everything needed to deliver the client's answer: the
// route, the Tool Service, the protocol version and upstream session the
// request came on, and the server's own id. The gateway keeps no state:
// any replica holding the key can verify a token and deliver the answer.
package relay

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/internal/hmactoken"
)

// The token is
//
//	tmr1.<key id>.<payload>.<mac>
//
// payload the base64url (unpadded) JSON of payload, mac the base64url
// HMAC-SHA256 under the key over macLabel, the key id, "." and the payload
// text.
const (
	prefix   = "tmr1."
	macLabel = "toolmesh relay id v1\x00"
	// MaxTokenBytes bounds a token the gateway parses.
	MaxTokenBytes = 2048
	// MinKeyBytes is the shortest key accepted (RFC 2104 section 3: at
	// least the hash output).
	MinKeyBytes = hmactoken.MinKeyBytes
	// TTL is how long a token is accepted. The request it stands for is
	// bounded by the route timeout; an answer later than that reaches a
	// server that no longer waits for it.
	TTL = time.Hour
	// maxIDBytes bounds the server's id kept in a token.
	maxIDBytes = 256
)

// Key is one HMAC-SHA256 key.
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
	keys *hmactoken.Keys
	now  func() time.Time
	// Generated is true for a key made at start: valid on this replica only.
	Generated bool
}

// New validates keys (the first signs, every one verifies). now may be nil.
func New(keys []Key, now func() time.Time) (*Keys, error) {
	hk := make([]hmactoken.Key, len(keys))
	for i, key := range keys {
		hk[i] = hmactoken.Key(key)
	}
	set, err := hmactoken.New("relayKeys", macLabel, hk)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Keys{keys: set, now: now}, nil
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
	tok := prefix + k.keys.Seal(p)
	return json.Marshal(tok)
}

// Is reports whether id (raw JSON) has the shape of a token, verified or
// not.
func Is(id json.RawMessage) bool { return bytes.HasPrefix(id, []byte(`"`+prefix)) }

// Errors of Open.
var (
	ErrMalformed   = errors.New("relay: malformed token")
	ErrUnknownKey  = errors.New("relay: unknown key")
	ErrSignature   = errors.New("relay: bad signature")
	ErrExpired     = errors.New("relay: token expired")
	ErrOtherRoute  = errors.New("relay: token of another route")
	ErrOtherCaller = errors.New("relay: token of another caller")
)

// Open authenticates id (raw JSON) and returns its target, checked against
// the route and caller the answer came with. Authenticity is checked before
// the payload is read.
func (k *Keys) Open(id json.RawMessage, route, caller string) (*Target, error) {
	var tok string
	if len(id) > MaxTokenBytes || json.Unmarshal(id, &tok) != nil || !strings.HasPrefix(tok, prefix) {
		return nil, ErrMalformed
	}
	raw, err := k.keys.Open(tok[len(prefix):])
	switch {
	case errors.Is(err, hmactoken.ErrUnknownKey):
		return nil, ErrUnknownKey
	case errors.Is(err, hmactoken.ErrSignature):
		return nil, ErrSignature
	case err != nil:
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
