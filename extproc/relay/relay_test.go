package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/hmactoken"
)

func TestMintOpen(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	secretA, secretB := []byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32))
	k, err := New([]Key{{ID: "k1", Secret: secretA}}, clock)
	if err != nil {
		t.Fatal(err)
	}
	const session = "upstream-session-7f3a9c"
	target := Target{Route: "core", Service: "asker", Version: "2025-11-25", Session: session, ID: json.RawMessage(`7`), Caller: "iss=x\x00sub=ada"}
	tok, err := k.Mint(target)
	if err != nil {
		t.Fatal(err)
	}
	if !Is(tok) {
		t.Fatalf("Is(%s) = false", tok)
	}
	var s string
	_ = json.Unmarshal(tok, &s)
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] != "tmr2" || parts[1] != "k1" {
		t.Fatalf("token %q is not tmr2.<kid>.<sealed>", s)
	}
	// The client holds the token but can read nothing of it: neither the
	// token nor its decoded bytes hold the session, the service or the id.
	sealed, err := b64.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{session, "asker", `"x":`, `"i":7`} {
		if strings.Contains(s, secret) || bytes.Contains(sealed, []byte(secret)) {
			t.Errorf("the token shows %q", secret)
		}
	}
	other, _ := k.Mint(target)
	if string(other) == string(tok) {
		t.Error("two tokens of one target are equal: the nonce is not fresh")
	}

	quote := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	flip := func(i int) json.RawMessage {
		b := slices.Clone(sealed)
		b[i] ^= 1
		return quote("tmr2.k1." + b64.EncodeToString(b))
	}
	var otherSealed string
	{
		var o string
		_ = json.Unmarshal(other, &o)
		otherSealed = strings.Split(o, ".")[2]
	}
	// A token of the earlier format, signed with the same key: refused.
	hk, _ := hmactoken.New("relayKeys", "toolmesh relay id v1\x00", []hmactoken.Key{{ID: "k1", Secret: secretA}})
	v1 := quote("tmr1." + hk.Seal([]byte(`{"r":"core","s":"asker","v":"2025-11-25","x":"`+session+`","i":7,"e":1700003600}`)))
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
		{"opened by a rotated set", rotated, tok, "core", target.Caller, nil},
		{"flipped nonce", k, flip(0), "core", target.Caller, ErrSignature},
		{"flipped ciphertext", k, flip(14), "core", target.Caller, ErrSignature},
		{"flipped tag", k, flip(len(sealed) - 1), "core", target.Caller, ErrSignature},
		{"truncated", k, quote("tmr2.k1." + b64.EncodeToString(sealed[:len(sealed)-1])), "core", target.Caller, ErrSignature},
		{"sealed under another key id", rotated, quote("tmr2.k2." + parts[2]), "core", target.Caller, ErrSignature},
		{"another key", otherKey, tok, "core", target.Caller, ErrSignature},
		{"unknown key id", k, quote("tmr2.k9." + parts[2]), "core", target.Caller, ErrUnknownKey},
		{"another token's sealed part", k, quote("tmr2.k1." + otherSealed), "core", target.Caller, nil},
		{"garbled", k, quote("tmr2.k1.garbage"), "core", target.Caller, ErrMalformed},
		{"no key id", k, quote("tmr2." + parts[2]), "core", target.Caller, ErrMalformed},
		{"earlier format", k, v1, "core", target.Caller, ErrOldFormat},
		{"not a string", k, json.RawMessage(`7`), "core", target.Caller, ErrMalformed},
		{"another route", k, tok, "other", target.Caller, ErrOtherRoute},
		{"another caller", k, tok, "core", "iss=x\x00sub=eve", ErrOtherCaller},
		{"anonymous caller", k, tok, "core", "", ErrOtherCaller},
		{"expired", later, tok, "core", target.Caller, ErrExpired},
		{"too long", k, quote("tmr2." + strings.Repeat("x", MaxTokenBytes)), "core", target.Caller, ErrMalformed},
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
	if !Is(v1) {
		t.Error("Is(tmr1 token) = false: an old token would not be refused as one")
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

// FuzzOpen: no input makes Open panic, and only a token the key sealed
// opens.
func FuzzOpen(f *testing.F) {
	k, _ := New([]Key{{ID: "k1", Secret: []byte(strings.Repeat("a", 32))}}, nil)
	tok, _ := k.Mint(Target{Route: "r", Service: "s", Session: "sess", ID: json.RawMessage(`1`)})
	f.Add(string(tok))
	f.Add(`"tmr1.k1.e30.AAAA"`)
	f.Add(`"tmr2.k1."`)
	f.Fuzz(func(t *testing.T, id string) {
		got, err := k.Open(json.RawMessage(id), "r", "")
		if err == nil && id != string(tok) && got.Session != "sess" {
			t.Fatalf("%q opened as %+v", id, got)
		}
	})
}
