package hmactoken

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealAEAD(t *testing.T) {
	aeads, err := AEADs([]Key{{ID: "k1", Secret: bytes.Repeat([]byte("s"), 32)}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	a := aeads["k1"]
	sealed := SealAEAD(a, []byte(`{"x":1}`), []byte("aad"))
	if p, err := OpenAEAD(a, sealed, []byte("aad")); err != nil || string(p) != `{"x":1}` {
		t.Fatalf("round trip: %q, %v", p, err)
	}
	if SealAEAD(a, []byte(`{"x":1}`), []byte("aad")) == sealed {
		t.Error("two sealings of one payload are equal: the nonce is not random")
	}
	flip := byte('A')
	if sealed[5] == 'A' {
		flip = 'B'
	}
	altered := sealed[:5] + string(flip) + sealed[6:]
	for _, tt := range []struct {
		name, sealed, aad string
		want              error
	}{
		{"other additional data", sealed, "other", ErrNotAuthentic},
		{"altered", altered, "aad", ErrNotAuthentic},
		{"not base64url", sealed + "!", "aad", ErrSealedMalformed},
		{"shorter than nonce and tag", sealed[:20], "aad", ErrSealedMalformed},
		{"empty", "", "aad", ErrSealedMalformed},
	} {
		if _, err := OpenAEAD(a, tt.sealed, []byte(tt.aad)); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}
