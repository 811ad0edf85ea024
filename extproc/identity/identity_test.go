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
