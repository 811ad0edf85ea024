package upstreamcred

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/oauthclient"
)

func TestOAuthRequest(t *testing.T) {
	d := &discoveredAS{issuer: "https://as.example.com", resource: "https://mcp.example.com/mcp", scopes: []string{"tools"}}
	ex := OAuth{Mode: ModeTokenExchange, Audience: []string{"aud"}}
	for _, tc := range []struct {
		name             string
		o                OAuth
		d                *discoveredAS
		iss, tok         string
		listing          bool
		grant, err       string
		resource, scopes []string
	}{
		{"exchange, configured", ex, nil, "https://idp", "t", false, oauthclient.TokenExchange, "", nil, nil},
		{"exchange without a caller", ex, nil, "", "", false, "", "no authenticated caller", nil, nil},
		{"listing uses client credentials", ex, nil, "", "", true, oauthclient.ClientCredentials, "", nil, nil},
		{"exchange at the caller's own issuer, discovered", ex, d, "https://as.example.com", "t", false, oauthclient.TokenExchange, "",
			[]string{"https://mcp.example.com/mcp"}, []string{"tools"}},
		{"exchange at another issuer, discovered", ex, d, "https://idp", "t", false, "", "did not issue the caller's token", nil, nil},
		{"the entry's resource and scopes win", OAuth{Mode: ModeClientCredentials, Resource: []string{"r"}, Scopes: []string{"s"}}, d, "", "", false,
			oauthclient.ClientCredentials, "", []string{"r"}, []string{"s"}},
	} {
		r, err := oauthRequest(tc.o, tc.d, tc.iss, "alice", tc.tok, tc.listing)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || r.Grant != tc.grant || !slices.Equal(r.Resource, tc.resource) || !slices.Equal(r.Scopes, tc.scopes) {
			t.Errorf("%s: %+v, %v", tc.name, r, err)
		}
		if r.Grant == oauthclient.TokenExchange && (r.SubjectToken != tc.tok || r.Subject != tc.iss+"\x00alice") {
			t.Errorf("%s: subject %q", tc.name, r.Subject)
		}
	}
	if reason, ok := oauthReason(errForeignIssuer); !ok || !strings.Contains(reason, "not the issuer of the caller's token") {
		t.Errorf("reason %q", reason)
	}
}

// TestBuildUpstreamAuthKeepsUnchangedClients: a reload keeps the client of
// an entry whose client configuration did not change (its cache and what
// it discovered), and builds a new one for a changed entry.
func TestBuildUpstreamAuthKeepsUnchangedClients(t *testing.T) {
	creds := map[string]config.CredentialSource{"s": {Env: "TOOLMESH_TEST_OAUTH_SECRET"}}
	entry := func(client string, aud ...string) ServiceAuth {
		return ServiceAuth{OAuth: &OAuth{Mode: ModeClientCredentials, Issuer: "https://as.example.com", ClientID: client, ClientSecret: "s", Audience: aud}}
	}
	one, err := Build(map[string]ServiceAuth{"a": entry("gw"), "b": entry("gw"), "c": {OAuth: &OAuth{
		Mode: ModeClientCredentials, ClientID: "gw", ClientSecret: "s"}}}, creds, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := one.oauth["c"].client(); c != nil || one.oauth["c"].fixed != nil {
		t.Fatal("an entry without issuer or tokenUrl has a client before discovery")
	}
	// a: only the audience (of the requests) changes; b: the client ID.
	two, err := Build(map[string]ServiceAuth{"a": entry("gw", "x"), "b": entry("other")}, creds, one)
	if err != nil {
		t.Fatal(err)
	}
	if two.oauth["a"] != one.oauth["a"] {
		t.Error("an unchanged client was built again")
	}
	if two.oauth["b"] == one.oauth["b"] || two.oauth["b"].fixed == nil {
		t.Error("a changed client was kept")
	}
	if _, ok := two.oauth["c"]; ok {
		t.Error("a removed entry's client stayed")
	}
	if _, err := Build(map[string]ServiceAuth{"a": entry("")}, creds, one); err == nil ||
		!strings.Contains(err.Error(), "upstreamAuth.a.oauth.clientId") {
		t.Errorf("an invalid entry: %v", err)
	}
}

// TestListingUnauthorizedDiscovers: a 401 to the listing of a server whose
// entry names no authorization server discovers it from the challenge's
// resource metadata, which must be for that server; a configured entry's
// 401 evicts and lists again; an entry without oauth does not retry.
func TestListingUnauthorizedDiscovers(t *testing.T) {
	var srv *httptest.Server
	resource := ""
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": resource, "authorization_servers": []string{"https://as.example.com"}})
	}))
	defer srv.Close()
	mcpURL := srv.URL + "/mcp"
	challenge := []string{`Bearer resource_metadata="` + srv.URL + `/.well-known/oauth-protected-resource/mcp"`}
	creds := map[string]config.CredentialSource{"s": {Env: "TOOLMESH_TEST_OAUTH_SECRET"}}
	u, err := Build(map[string]ServiceAuth{
		"disc":  {OAuth: &OAuth{Mode: ModeTokenExchange, ClientID: "gw", ClientSecret: "s"}},
		"fixed": {OAuth: &OAuth{Mode: ModeClientCredentials, TokenURL: "https://as.example.com/token", ClientID: "gw", ClientSecret: "s"}},
		"plain": {Credential: "s"},
	}, creds, nil)
	if err != nil {
		t.Fatal(err)
	}
	resource = "https://elsewhere.example.com/mcp"
	if ListingUnauthorized(t.Context(), *u, "disc", mcpURL, challenge) {
		t.Fatal("metadata for another resource was taken")
	}
	resource = mcpURL
	if !ListingUnauthorized(t.Context(), *u, "disc", mcpURL, challenge) {
		t.Fatal("no discovery")
	}
	c, d := u.oauth["disc"].client()
	if c == nil || d.issuer != "https://as.example.com" || d.resource != mcpURL {
		t.Fatalf("discovered %+v", d)
	}
	if !ListingUnauthorized(t.Context(), *u, "fixed", mcpURL, nil) {
		t.Error("a configured entry's 401 does not list again")
	}
	if ListingUnauthorized(t.Context(), *u, "plain", mcpURL, challenge) || ListingUnauthorized(t.Context(), *u, "none", mcpURL, challenge) {
		t.Error("an entry without oauth lists again")
	}
}
