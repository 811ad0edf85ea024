package authn

import (
	"strings"
	"testing"
)

// TestAccessTokenTyp: by default any typ is accepted; with
// requireAccessTokenTyp an issuer's token must be typed at+jwt (RFC 9068
// section 4; "application/" and case aside), so an ID token ("JWT") or an
// untyped JWT is refused, also when an earlier configuration without the
// check had verified and cached the same token.
func TestAccessTokenTyp(t *testing.T) {
	f := newFixture(t, ModeRequired)
	apply := func(require bool) {
		t.Helper()
		cfg := &Config{Default: &Profile{Issuers: []Issuer{{Issuer: f.idp.URL, RequireAccessTokenTyp: require}}}}
		if err := f.a.Apply(base, cfg); err != nil {
			t.Fatal(err)
		}
	}
	typs := []struct {
		typ string
		ok  bool // with the check
	}{
		{"", false}, {"JWT", false}, {"jwt", false}, {"JOSE", false}, {"at+jwt+x", false},
		{"at+jwt", true}, {"application/at+jwt", true}, {"AT+JWT", true},
	}
	tokens := map[string]string{}
	for _, tc := range typs {
		tokens[tc.typ] = f.rsa.SignTyped(t, tc.typ, f.claims(nil))
	}
	apply(false)
	for _, tc := range typs {
		if res := f.auth(t, "Bearer "+tokens[tc.typ], ""); res.Status != 0 {
			t.Errorf("typ %q without the check: %+v", tc.typ, res)
		}
	}
	apply(true) // the same key source: the tokens above are in the verified cache
	for _, tc := range typs {
		res := f.auth(t, "Bearer "+tokens[tc.typ], "")
		switch {
		case tc.ok && res.Status != 0:
			t.Errorf("typ %q with the check: %+v", tc.typ, res)
		case !tc.ok && (res.Status != 401 || !strings.Contains(res.Challenge, "at+jwt")):
			t.Errorf("typ %q with the check: %+v, want 401 naming at+jwt", tc.typ, res)
		}
	}
}
