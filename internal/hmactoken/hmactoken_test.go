package hmactoken

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var (
	secretA = bytes.Repeat([]byte("a"), MinKeyBytes)
	secretB = bytes.Repeat([]byte("b"), MinKeyBytes)
)

func mustKeys(t *testing.T, label string, keys ...Key) *Keys {
	t.Helper()
	k, err := New("test.keys", label, keys)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestOpen: an envelope opens under the keys and label that sealed it and
// under any key set that holds its key; anything else is refused with the
// error that names why.
func TestOpen(t *testing.T) {
	sealer := mustKeys(t, "one\x00", Key{"k1", secretA}, Key{"k2", secretB})
	tok := sealer.Seal([]byte(`{"x":1}`))
	kid, rest, _ := strings.Cut(tok, ".")
	body, sig, _ := strings.Cut(rest, ".")
	for _, tc := range []struct {
		name string
		keys *Keys
		tok  string
		want error
	}{
		{"same keys", sealer, tok, nil},
		{"verifying key set with the signer second", mustKeys(t, "one\x00", Key{"k2", secretB}, Key{"k1", secretA}), tok, nil},
		{"other label", mustKeys(t, "two\x00", Key{"k1", secretA}), tok, ErrSignature},
		{"same id, other secret", mustKeys(t, "one\x00", Key{"k1", secretB}), tok, ErrSignature},
		{"unknown key", mustKeys(t, "one\x00", Key{"k2", secretB}), tok, ErrUnknownKey},
		{"tampered payload", sealer, kid + "." + body + "A." + sig, ErrSignature},
		{"two parts", sealer, kid + "." + body, ErrMalformed},
		{"bad key id", sealer, "k.1." + body + "." + sig, ErrMalformed},
		{"short mac", sealer, kid + "." + body + "." + sig[:10], ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := tc.keys.Open(tc.tok)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open() = %q, %v; want error %v", raw, err, tc.want)
			}
			if err == nil && string(raw) != `{"x":1}` {
				t.Fatalf("Open() = %q, want the sealed payload", raw)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []Key
		want string
	}{
		{"none", nil, "test.keys: at least one key is required"},
		{"bad id", []Key{{"k.1", secretA}}, `test.keys[0].id "k.1": 1 to 32 of`},
		{"duplicate id", []Key{{"k1", secretA}, {"k1", secretB}}, `test.keys[1].id "k1": duplicate key id`},
		{"short secret", []Key{{"k1", []byte("short")}}, "test.keys[0] (id k1): the key has 5 bytes, at least 32 are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New("test.keys", "l", tc.keys); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCallerHash(t *testing.T) {
	if CallerHash("") != "" {
		t.Error(`CallerHash("") is not "" (anonymous)`)
	}
	if a, b := CallerHash("alice"), CallerHash("bob"); a == "" || a == b {
		t.Errorf("CallerHash: alice %q, bob %q", a, b)
	}
}
