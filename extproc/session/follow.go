package session

import (
	"encoding/json"
	"time"
)

// A follow ticket carries, from the replica that took a legacy client's
// GET stream request to the notifications server that serves the stream
// (any replica: Envoy picks it), what following the client's upstream
// sessions takes: each session and the headers its requests carry, the
// caller's credentials included
// (docs/decisions/0025-legacy-get-stream.md). So it is sealed like a
// session token, under its own key derived from the relay keys, and lives
// a minute: it is opened once, as the stream starts.
const (
	FollowPrefix = "tmf1."
	followInfo   = "toolmesh follow ticket v1"
	// FollowTTL is how long a ticket opens after it was sealed.
	FollowTTL = time.Minute
	// MaxFollowBytes bounds a ticket (it travels as a request header).
	MaxFollowBytes = 16 << 10
)

// FollowUpstream is one of the client's upstream sessions, with the
// headers (credentials) a request on it carries.
type FollowUpstream struct {
	Upstream
	Headers map[string]string `json:"h,omitempty"`
}

// Follow is what a follow ticket carries.
type Follow struct {
	Route     string           `json:"r"`
	Upstreams []FollowUpstream `json:"u"`
	Expires   int64            `json:"e"` // unix seconds
}

// SealFollow seals f with an expiry FollowTTL from now.
func (k *Keys) SealFollow(f Follow) (string, error) {
	f.Expires = k.now().Add(FollowTTL).Unix()
	p, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	tok := k.seal(k.follow, FollowPrefix, p)
	if len(tok) > MaxFollowBytes {
		return "", ErrTooLarge
	}
	return tok, nil
}

// OpenFollow authenticates and decrypts a follow ticket of route.
func (k *Keys) OpenFollow(tok, route string) (*Follow, error) {
	var f Follow
	if err := k.open(k.follow, FollowPrefix, tok, MaxFollowBytes, &f); err != nil {
		return nil, err
	}
	switch {
	case !k.now().Before(time.Unix(f.Expires, 0)):
		return nil, ErrExpired
	case f.Route != route:
		return nil, ErrOtherRoute
	}
	return &f, nil
}
