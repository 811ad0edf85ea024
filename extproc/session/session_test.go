package session

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func keysAt(t testing.TB, now *time.Time, keys ...Key) *Keys {
	t.Helper()
	k, err := New("relayKeys", keys, func() time.Time { return *now })
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	k1 = Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}
	k2 = Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)}
)

func TestMintOpen(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	old := keysAt(t, &now, k1)
	rotated := keysAt(t, &now, k2, k1) // k2 seals, k1 still opens
	state := State{Route: "r", Caller: "alice", Version: "2025-11-25", Caps: 3,
		Upstreams: []Upstream{{Service: "svc", Version: "2025-06-18", Session: "up-1"}}}
	tok, err := old.Mint(state)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tok, "up-1") || strings.Contains(tok, "svc") {
		t.Fatalf("token %q shows its payload: it must be encrypted", tok)
	}
	later := now.Add(TTL)
	tests := []struct {
		name          string
		keys          *Keys
		tok           string
		route, caller string
		at            time.Time
		want          error
	}{
		{"same key", old, tok, "r", "alice", now, nil},
		{"rotated: old key still opens", rotated, tok, "r", "alice", now, nil},
		{"key removed", keysAt(t, &now, k2), tok, "r", "alice", now, ErrUnknownKey},
		{"another route", old, tok, "other", "alice", now, ErrOtherRoute},
		{"another caller", old, tok, "r", "bob", now, ErrOtherCaller},
		{"anonymous", old, tok, "r", "", now, ErrOtherCaller},
		{"expired", old, tok, "r", "alice", later, ErrExpired},
		{"altered", old, tok[:len(tok)-2] + flip(tok[len(tok)-2:]), "r", "alice", now, ErrSealed},
		{"key id swapped", keysAt(t, &now, k1, Key{ID: "k3", Secret: k1.Secret}), strings.Replace(tok, ".k1.", ".k3.", 1), "r", "alice", now, ErrSealed},
		{"not a token", old, "abc", "r", "alice", now, ErrMalformed},
		{"no key id", old, Prefix + "k1", "r", "alice", now, ErrMalformed},
		{"short", old, Prefix + "k1.AAAA", "r", "alice", now, ErrMalformed},
		{"too long", old, Prefix + "k1." + strings.Repeat("A", MaxTokenBytes), "r", "alice", now, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := tt.at
			k := *tt.keys
			k.now = func() time.Time { return at }
			s, err := k.Open(tt.tok, tt.route, tt.caller)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open: %v, want %v", err, tt.want)
			}
			if err != nil {
				return
			}
			u, ok := s.Upstream("svc")
			if s.Version != state.Version || s.Caps != state.Caps || !ok || u != state.Upstreams[0] || s.Caller != "alice" {
				t.Fatalf("Open = %+v, want %+v", s, state)
			}
			if _, ok := s.Upstream("other"); ok {
				t.Fatal("Upstream(other) found a session the token does not carry")
			}
		})
	}
}

func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

func TestMintBounds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := keysAt(t, &now, k1)
	many := make([]Upstream, MaxUpstreams+1)
	if _, err := k.Mint(State{Route: "r", Upstreams: many}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Mint with %d upstreams: %v, want ErrTooLarge", len(many), err)
	}
	big := []Upstream{{Service: "s", Session: strings.Repeat("x", MaxTokenBytes)}}
	if _, err := k.Mint(State{Route: "r", Upstreams: big}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Mint of an oversized state: %v, want ErrTooLarge", err)
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	for _, keys := range [][]Key{nil, {{ID: "short", Secret: []byte("x")}}, {k1, k1}, {{ID: "bad.id", Secret: k1.Secret}}} {
		if _, err := New("relayKeys", keys, nil); err == nil {
			t.Errorf("New(%v) accepted", keys)
		}
	}
	if g := Generate(); !g.Generated {
		t.Fatal("Generate: not marked generated")
	}
}

func FuzzOpen(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	k := keysAt(f, &now, k1)
	tok, _ := k.Mint(State{Route: "r", Version: "2025-11-25"})
	f.Add(tok)
	f.Add(Prefix + "k1.")
	f.Add("tms1..")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := k.Open(s, "r", "")
		if err == nil && st.Route != "r" {
			t.Fatalf("opened %q for route %q", s, st.Route)
		}
	})
}
