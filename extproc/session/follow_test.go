package session

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFollowTicket: a ticket opens under any configured key for its route
// within FollowTTL, shows none of its payload, and is not a session token
// (nor a session token a ticket): each has its own derived key.
func TestFollowTicket(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	keys := keysAt(t, &now, k1)
	f := Follow{Route: "r", Upstreams: []FollowUpstream{{Upstream: Upstream{Service: "svc", Version: "2025-11-25", Session: "up-1"},
		Headers: map[string]string{"Authorization": "Bearer secret-token"}}}}
	tok, err := keys.SealFollow(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, FollowPrefix) || strings.Contains(tok, "up-1") || strings.Contains(tok, "secret") {
		t.Fatalf("ticket %q: want %s and an encrypted payload", tok, FollowPrefix)
	}
	got, err := keysAt(t, &now, k2, k1).OpenFollow(tok, "r")
	if err != nil || len(got.Upstreams) != 1 || got.Upstreams[0].Session != "up-1" || got.Upstreams[0].Headers["Authorization"] != "Bearer secret-token" {
		t.Fatalf("opened %+v, %v", got, err)
	}
	sessTok, err := keys.Mint(State{Route: "r", Version: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(FollowTTL)
	for _, tc := range []struct {
		name  string
		keys  *Keys
		tok   string
		route string
		want  error
	}{
		{"another route", keys, tok, "other", ErrOtherRoute},
		{"expired", keysAt(t, &later, k1), tok, "r", ErrExpired},
		{"unknown key", keysAt(t, &now, k2), tok, "r", ErrUnknownKey},
		{"altered", keys, tok[:len(tok)-3] + "AAA", "r", ErrSealed},
		{"a session token", keys, sessTok, "r", ErrMalformed},
		{"a session token with the ticket prefix", keys, FollowPrefix + strings.TrimPrefix(sessTok, Prefix), "r", ErrSealed},
		{"too large", keys, FollowPrefix + strings.Repeat("a", MaxFollowBytes), "r", ErrMalformed},
	} {
		if _, err := tc.keys.OpenFollow(tc.tok, tc.route); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := keys.Open(Prefix+strings.TrimPrefix(tok, FollowPrefix), "r", ""); !errors.Is(err, ErrSealed) {
		t.Errorf("a ticket as a session token: %v, want ErrSealed", err)
	}
}
