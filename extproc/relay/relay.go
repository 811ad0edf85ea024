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
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
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
	MinKeyBytes = 32
	// TTL is how long a token is accepted. The request it stands for is
	// bounded by the route timeout; an answer later than that reaches a
	// server that no longer waits for it.
	TTL = time.Hour
	// maxIDBytes bounds the server's id kept in a token.
	maxIDBytes = 256
)

var (
	b64          = base64.RawURLEncoding
	keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
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
	signer Key
	keys   map[string][]byte
	now    func() time.Time
	// Generated is true for a key made at start: valid on this replica only.
	Generated bool
}

// New validates keys (the first signs, every one verifies). now may be nil.
func New(keys []Key, now func() time.Time) (*Keys, error) {
	if len(keys) == 0 {
		return nil, errors.New("relayKeys: at least one key is required")
	}
	if now == nil {
		now = time.Now
	}
	k := &Keys{keys: make(map[string][]byte, len(keys)), now: now}
	for i, key := range keys {
		if !keyIDPattern.MatchString(key.ID) {
			return nil, fmt.Errorf("relayKeys[%d].id %q: 1 to 32 of A-Z a-z 0-9 _ -", i, key.ID)
		}
		if _, dup := k.keys[key.ID]; dup {
			return nil, fmt.Errorf("relayKeys[%d].id %q: duplicate key id", i, key.ID)
		}
		if len(key.Secret) < MinKeyBytes {
			return nil, fmt.Errorf("relayKeys[%d] (id %s): the key has %d bytes, at least %d are required", i, key.ID, len(key.Secret), MinKeyBytes)
		}
		k.keys[key.ID] = slices.Clone(key.Secret)
	}
	k.signer = Key{ID: keys[0].ID, Secret: k.keys[keys[0].ID]}
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
		ID: t.ID, Caller: callerHash(t.Caller), Expires: k.now().Add(TTL).Unix()})
	if err != nil {
		return nil, err
	}
	body := b64.EncodeToString(p)
	tok := prefix + k.signer.ID + "." + body + "." + b64.EncodeToString(mac(k.signer.Secret, k.signer.ID, body))
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
	parts := strings.Split(tok[len(prefix):], ".")
	if len(parts) != 3 || !keyIDPattern.MatchString(parts[0]) {
		return nil, ErrMalformed
	}
	kid, body, sig := parts[0], parts[1], parts[2]
	secret := k.keys[kid]
	if secret == nil {
		return nil, ErrUnknownKey
	}
	got, err := b64.Strict().DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return nil, ErrMalformed
	}
	if !hmac.Equal(got, mac(secret, kid, body)) {
		return nil, ErrSignature
	}
	raw, err := b64.Strict().DecodeString(body)
	if err != nil {
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
	case p.Caller != callerHash(caller):
		return nil, ErrOtherCaller
	}
	return &Target{Route: p.Route, Service: p.Service, Version: p.Version, Session: p.Session, ID: p.ID, Caller: caller}, nil
}

func mac(secret []byte, kid, body string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(macLabel))
	m.Write([]byte(kid))
	m.Write([]byte{'.'})
	m.Write([]byte(body))
	return m.Sum(nil)
}

func callerHash(key string) string {
	if key == "" {
		return ""
	}
	h := sha256.Sum256([]byte(key))
	return b64.EncodeToString(h[:])
}
