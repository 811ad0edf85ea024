// Package session is the Mcp-Session-Id the gateway gives a legacy-era
// client that needs state on a federated server
// (docs/decisions/0022-legacy-client-sessions.md): a sealed token, signed
// and encrypted (AES-256-GCM), that carries the client's negotiated
// version and declared capabilities and, per federated server, the
// upstream session opened for that client alone. The gateway keeps no
// table: any replica holding the key opens the token and honours the
// session (and keeps the tokens it opened in a bounded cache, opened.go,
// so that a session's later requests skip the decryption).
//
// The keys are the relay keys (extproc/relay, config relayKeys): the first
// seals, every one opens, so a key is rotated the same way. Each AEAD key
// is derived from a relay key's secret with HKDF-SHA256 under this
// package's own label, so a relay id never opens as a session or back.
package session

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/internal/hmactoken"
)

// The token is
//
//	tms1.<key id>.<sealed>
//
// sealed the base64url (unpadded) of a 12-byte nonce and the AES-256-GCM
// ciphertext of the JSON payload, with prefix and key id as additional
// data.
const (
	Prefix = "tms1."
	// hkdfInfo labels the derivation of a session key from a relay key.
	hkdfInfo = "toolmesh client session v1"
	// MaxTokenBytes bounds a token the gateway opens (and mints).
	MaxTokenBytes = 4096
	// MaxUpstreams bounds the per-client upstream sessions one token
	// carries, and so its size.
	MaxUpstreams = 16
	// TTL is how long a session is honoured. After it a request with the
	// token is answered 404, which tells a legacy client to initialize
	// again (Streamable HTTP, "Session Management").
	TTL = 24 * time.Hour
)

// Key is one relay key: an id and a secret of at least 32 bytes.
type Key struct {
	ID     string
	Secret []byte
}

// Upstream is an upstream session opened for one client.
type Upstream struct {
	Service string `json:"s"`
	Version string `json:"v"` // the protocol version the session was opened with
	Session string `json:"x"` // the server's Mcp-Session-Id
}

// State is what a session token carries.
type State struct {
	Route string `json:"r"`
	// Caller is the authenticated caller's key when minted and the
	// caller's hash in the token: a session of another caller is refused.
	Caller  string `json:"c,omitempty"`
	Version string `json:"v"`           // the client's negotiated protocol version
	Caps    uint8  `json:"k,omitempty"` // the client capabilities the gateway passes on (extproc clientCaps)
	// Upstreams are the per-client upstream sessions, by service.
	Upstreams []Upstream `json:"u,omitempty"`
	Expires   int64      `json:"e"` // unix seconds
}

// Upstream returns the client's session on service, if the token has one.
func (s *State) Upstream(service string) (Upstream, bool) {
	for _, u := range s.Upstreams {
		if u.Service == service {
			return u, true
		}
	}
	return Upstream{}, false
}

// Keys mints and opens tokens. It is immutable; a new configuration builds
// new Keys, swapped in atomically.
type Keys struct {
	signer string
	aeads  map[string]cipher.AEAD
	follow map[string]cipher.AEAD // follow tickets' (follow.go)
	opened *openedCache           // tokens Open accepted (opened.go)
	now    func() time.Time
	// Generated is true for a key made at start: valid on this replica only.
	Generated bool
}

// New validates keys as relay keys (field names them in errors) and
// derives one AEAD per key; the first seals. now may be nil.
func New(field string, keys []Key, now func() time.Time) (*Keys, error) {
	hk := make([]hmactoken.Key, len(keys))
	for i, k := range keys {
		hk[i] = hmactoken.Key(k)
	}
	if _, err := hmactoken.New(field, hkdfInfo, hk); err != nil { // ids, lengths, duplicates
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	aeads, err := hmactoken.AEADs(hk, hkdfInfo)
	if err != nil {
		return nil, err
	}
	follow, err := hmactoken.AEADs(hk, followInfo)
	if err != nil {
		return nil, err
	}
	out := &Keys{signer: keys[0].ID, aeads: aeads, follow: follow, opened: newOpenedCache(), now: now}
	return out, nil
}

// Generate returns Keys with one random key: sessions open on this process
// only, so it fits a single replica.
func Generate() *Keys {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	k, _ := New("relayKeys", []Key{{ID: "generated", Secret: secret}}, nil)
	k.Generated = true
	return k
}

// Errors of Mint and Open.
var (
	ErrMalformed   = errors.New("session: malformed token")
	ErrUnknownKey  = errors.New("session: unknown key")
	ErrSealed      = errors.New("session: the token does not open under the key") // forged or altered
	ErrExpired     = errors.New("session: expired")
	ErrOtherRoute  = errors.New("session: token of another route")
	ErrOtherCaller = errors.New("session: token of another caller")
	ErrTooLarge    = errors.New("session: the state does not fit a token")
)

// Is reports whether v has the shape of a session token, valid or not.
func Is(v string) bool { return strings.HasPrefix(v, Prefix) }

// Mint seals s (its Caller the caller's key) with an expiry TTL from now.
func (k *Keys) Mint(s State) (string, error) {
	if len(s.Upstreams) > MaxUpstreams {
		return "", ErrTooLarge
	}
	s.Caller = hmactoken.CallerHash(s.Caller)
	s.Expires = k.now().Add(TTL).Unix()
	p, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	tok := k.seal(k.aeads, Prefix, p)
	if len(tok) > MaxTokenBytes {
		return "", ErrTooLarge
	}
	return tok, nil
}

// seal is prefix, the signer's id, "." and the AES-256-GCM sealing of p
// under the signer's key of aeads, with the head as additional data.
func (k *Keys) seal(aeads map[string]cipher.AEAD, prefix string, p []byte) string {
	head := prefix + k.signer + "."
	return head + hmactoken.SealAEAD(aeads[k.signer], p, []byte(head))
}

// unseal opens what seal sealed under one of aeads.
func unseal(aeads map[string]cipher.AEAD, prefix, tok string, maxBytes int) ([]byte, error) {
	if len(tok) > maxBytes || !strings.HasPrefix(tok, prefix) {
		return nil, ErrMalformed
	}
	kid, sealed, ok := strings.Cut(tok[len(prefix):], ".")
	if !ok {
		return nil, ErrMalformed
	}
	a, ok := aeads[kid]
	if !ok {
		return nil, ErrUnknownKey
	}
	p, err := hmactoken.OpenAEAD(a, sealed, []byte(prefix+kid+"."))
	if errors.Is(err, hmactoken.ErrNotAuthentic) {
		return nil, ErrSealed
	} else if err != nil {
		return nil, ErrMalformed
	}
	return p, nil
}

// open unseals tok into v, strictly (an unknown field is malformed).
func (k *Keys) open(aeads map[string]cipher.AEAD, prefix, tok string, maxBytes int, v any) error {
	p, err := unseal(aeads, prefix, tok, maxBytes)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		return ErrMalformed
	}
	return nil
}

// Open authenticates and decrypts tok and checks it against the route and
// caller of the request it came with. A token accepted before is taken
// from the cache (opened.go) and checked again; the returned State's
// Upstreams are shared with it: read only.
func (k *Keys) Open(tok, route, caller string) (*State, error) {
	s, cached := k.opened.get(tok)
	if !cached {
		if err := k.open(k.aeads, Prefix, tok, MaxTokenBytes, &s); err != nil {
			return nil, err
		}
	}
	switch {
	case !k.now().Before(time.Unix(s.Expires, 0)):
		return nil, ErrExpired
	case s.Route != route:
		return nil, ErrOtherRoute
	case s.Caller != hmactoken.CallerHash(caller):
		return nil, ErrOtherCaller
	}
	if !cached {
		k.opened.put(tok, s)
	}
	s.Caller = caller
	return &s, nil
}
