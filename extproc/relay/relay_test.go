package relay

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMintOpen(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	secretA, secretB := []byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32))
	k, err := New([]Key{{ID: "k1", Secret: secretA}}, clock)
	if err != nil {
		t.Fatal(err)
	}
	target := Target{Route: "core", Service: "asker", Version: "2025-11-25", Session: "s-1", ID: json.RawMessage(`7`), Caller: "iss=x\x00sub=ada"}
	tok, err := k.Mint(target)
	if err != nil {
		t.Fatal(err)
	}
	if !Is(tok) {
		t.Fatalf("Is(%s) = false", tok)
	}
	var s string
	_ = json.Unmarshal(tok, &s)
	flipped := []byte(s)
	flipped[len(flipped)-3] ^= 1
	quote := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	parts := strings.Split(s, ".")
	otherKey, _ := New([]Key{{ID: "k1", Secret: secretB}}, clock)
	rotated, _ := New([]Key{{ID: "k2", Secret: secretB}, {ID: "k1", Secret: secretA}}, clock)
	later, _ := New([]Key{{ID: "k1", Secret: secretA}}, func() time.Time { return now.Add(TTL) })
	for _, tc := range []struct {
		name          string
		keys          *Keys
		id            json.RawMessage
		route, caller string
		want          error
	}{
		{"round trip", k, tok, "core", target.Caller, nil},
		{"verified by a rotated set", rotated, tok, "core", target.Caller, nil},
		{"flipped mac", k, quote(string(flipped)), "core", target.Caller, ErrSignature},
		{"payload of another token", k, quote(parts[0] + "." + parts[1] + ".e30." + parts[3]), "core", target.Caller, ErrSignature},
		{"another key", otherKey, tok, "core", target.Caller, ErrSignature},
		{"unknown key id", k, quote("tmr1.k9." + parts[2] + "." + parts[3]), "core", target.Caller, ErrUnknownKey},
		{"garbled", k, quote("tmr1.k1.garbage"), "core", target.Caller, ErrMalformed},
		{"not a string", k, json.RawMessage(`7`), "core", target.Caller, ErrMalformed},
		{"another route", k, tok, "other", target.Caller, ErrOtherRoute},
		{"another caller", k, tok, "core", "iss=x\x00sub=eve", ErrOtherCaller},
		{"anonymous caller", k, tok, "core", "", ErrOtherCaller},
		{"expired", later, tok, "core", target.Caller, ErrExpired},
		{"too long", k, quote("tmr1." + strings.Repeat("x", MaxTokenBytes)), "core", target.Caller, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.keys.Open(tc.id, tc.route, tc.caller)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if err == nil && (got.Route != target.Route || got.Service != target.Service || got.Version != target.Version ||
				got.Session != target.Session || string(got.ID) != string(target.ID)) {
				t.Errorf("Open = %+v, want %+v", got, target)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	long := []byte(strings.Repeat("k", MinKeyBytes))
	for _, tc := range []struct {
		name string
		keys []Key
		want string
	}{
		{"none", nil, "at least one key"},
		{"short", []Key{{ID: "k1", Secret: []byte("short")}}, "at least 32 are required"},
		{"bad id", []Key{{ID: "k.1", Secret: long}}, "relayKeys[0].id"},
		{"duplicate", []Key{{ID: "k1", Secret: long}, {ID: "k1", Secret: long}}, "duplicate key id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.keys, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestGenerated(t *testing.T) {
	a, b := Generate(), Generate()
	tok, err := a.Mint(Target{Route: "r", Service: "s", ID: json.RawMessage(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Open(tok, "r", ""); err != nil {
		t.Errorf("own token: %v", err)
	}
	// Another process's generated key does not verify it: one replica only.
	if _, err := b.Open(tok, "r", ""); !errors.Is(err, ErrSignature) {
		t.Errorf("another generated key: %v, want ErrSignature", err)
	}
}
