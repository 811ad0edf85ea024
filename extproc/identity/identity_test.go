package identity

import (
	"strings"
	"testing"
)

func TestCaller(t *testing.T) {
	tests := []struct {
		name      string
		c         *Caller
		anonymous bool
		str       string
		scope     bool // HasScope("tools:write")
	}{
		{"nil", nil, true, "anonymous", false},
		{"zero", &Caller{}, true, "anonymous", false},
		{"token", &Caller{Authenticated: true, Subject: "alice", Scopes: []string{"tools:read", "tools:write"}, Token: "secret-token"}, false, "alice", true},
		{"mesh", &Caller{MeshID: "spiffe://mesh/ns/a/sa/b"}, false, "spiffe://mesh/ns/a/sa/b", false},
		{"both", &Caller{Authenticated: true, Subject: "bob", MeshID: "spiffe://m/x", Scopes: []string{"tools:read"}}, false, "bob via spiffe://m/x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Anonymous(); got != tc.anonymous {
				t.Errorf("Anonymous() = %v, want %v", got, tc.anonymous)
			}
			got := tc.c.String()
			if got != tc.str {
				t.Errorf("String() = %q, want %q", got, tc.str)
			}
			if strings.Contains(got, "secret") {
				t.Errorf("String() leaks the token: %q", got)
			}
			if got := tc.c.HasScope("tools:write"); got != tc.scope {
				t.Errorf("HasScope = %v, want %v", got, tc.scope)
			}
		})
	}
}

// TestCallerKey: the per-client limit's key tells one subject at two
// issuers apart (issue 26) and is a valid header value.
func TestCallerKey(t *testing.T) {
	a := &Caller{Authenticated: true, Issuer: "https://a.example", Subject: "alice"}
	b := &Caller{Authenticated: true, Issuer: "https://b.example", Subject: "alice"}
	m := &Caller{Authenticated: true, Issuer: "https://a.example", Subject: "alice", MeshID: "spiffe://x/ns/a/sa/b"}
	odd := &Caller{Authenticated: true, Issuer: "https://a.example", Subject: "al\"ice\r\n\u00e9"}
	keys := map[string]bool{}
	for _, c := range []*Caller{a, b, m, odd} {
		k := c.Key()
		if k == "" || keys[k] {
			t.Fatalf("key %q of %+v is empty or shared", k, c)
		}
		keys[k] = true
		for _, r := range k {
			if r < 0x20 || r > 0x7e {
				t.Fatalf("key %q has a byte a header value cannot carry", k)
			}
		}
	}
	if (&Caller{}).Key() != "" {
		t.Fatal("anonymous caller has a key")
	}
}
