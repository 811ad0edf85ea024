package authn

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/toolmesh/toolmesh/internal/authtest"
)

const (
	base  = "https://mcp.example.com"
	route = "core"
	pub   = "/mcp/core"
)

type fixture struct {
	a   *Authenticator
	idp *authtest.Issuer
	clk *clock
	rsa *authtest.Key
	ec  *authtest.Key
}

func newFixture(t *testing.T, mode Mode) *fixture {
	t.Helper()
	f := &fixture{clk: newClock(), rsa: authtest.NewRSAKey(t, "rsa-1"), ec: authtest.NewECKey(t, "ec-1")}
	f.idp = authtest.NewIssuer(t, "/realms/tools", f.rsa, f.ec)
	f.a = New(Options{Now: f.clk.now, MinRefreshInterval: time.Minute})
	cfg := &Config{Default: &Profile{Mode: mode, Issuers: []Issuer{{Issuer: f.idp.URL}}, Scopes: []string{"mcp:tools"}}}
	if err := f.a.Apply(base, cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// claims are valid claims for the route, changed by mod.
func (f *fixture) claims(mod func(map[string]any)) map[string]any {
	c := map[string]any{
		"iss": f.idp.URL, "sub": "alice", "aud": base + pub,
		"exp": f.clk.unix(time.Hour), "iat": f.clk.unix(-time.Minute), "nbf": f.clk.unix(-time.Minute),
		"scope": "mcp:tools mcp:read", "roles": []any{"admin"},
	}
	if mod != nil {
		mod(c)
	}
	return c
}

func (f *fixture) auth(t *testing.T, authz, query string) Result {
	t.Helper()
	r := &Request{Route: route, PublicPath: pub, Authorization: authz, Query: query}
	if authz != "" {
		r.AuthorizationCount = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.a.Authenticate(ctx, r)
}

const metaURL = `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/core"`

func TestAuthenticateValid(t *testing.T) {
	f := newFixture(t, ModeRequired)
	for _, k := range []*authtest.Key{f.rsa, f.ec} {
		t.Run(string(k.Alg), func(t *testing.T) {
			tok := k.SignAccessToken(t, f.claims(nil))
			res := f.auth(t, "Bearer "+tok, "")
			if res.Status != 0 || res.Caller == nil || res.Label != ResultOK {
				t.Fatalf("result = %+v", res)
			}
			c := res.Caller
			if !c.Authenticated || c.Issuer != f.idp.URL || c.Subject != "alice" || c.Token != tok ||
				strings.Join(c.Scopes, ",") != "mcp:tools,mcp:read" || strings.Join(c.Audience, ",") != base+pub ||
				c.Expiry.Unix() != f.clk.unix(time.Hour) || c.Claims["roles"].([]any)[0] != "admin" {
				t.Fatalf("caller = %+v", c)
			}
		})
	}
	// scp as a list, aud as a list, lower-case scheme.
	tok := f.ec.SignAccessToken(t, f.claims(func(c map[string]any) {
		delete(c, "scope")
		c["scp"] = []any{"mcp:tools"}
		c["aud"] = []any{"other", "HTTPS://MCP.example.com" + pub}
	}))
	if res := f.auth(t, "bearer "+tok, ""); res.Status != 0 || strings.Join(res.Caller.Scopes, ",") != "mcp:tools" {
		t.Fatalf("scp list: %+v", res)
	}
}

// TestAuthenticateRejects is the table of bad requests: each gets its
// status, its exact challenge, and no caller.
func TestAuthenticateRejects(t *testing.T) {
	f := newFixture(t, ModeRequired)
	invalid := func(desc string) string {
		return `Bearer error="invalid_token", error_description="` + desc + `", ` + metaURL
	}
	other := authtest.NewRSAKey(t, "rsa-1") // same kid, another key
	big := f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["pad"] = strings.Repeat("x", 9000) }))
	cases := []struct {
		name, authz, query string
		status             int
		challenge, label   string
	}{
		{"missing", "", "", 401, `Bearer scope="mcp:tools", ` + metaURL, ResultMissing},
		{"basic scheme", "Basic YWxpY2U6cHc=", "", 401, `Bearer scope="mcp:tools", ` + metaURL, ResultMissing},
		{"expired", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["exp"] = f.clk.unix(-2 * time.Minute) })), "",
			401, invalid("the token has expired"), ResultInvalid},
		{"no exp", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { delete(c, "exp") })), "",
			401, invalid("the token has no expiry"), ResultInvalid},
		{"not yet valid", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["nbf"] = f.clk.unix(2 * time.Minute) })), "",
			401, invalid("the token is not valid yet"), ResultInvalid},
		{"issued in the future", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["iat"] = f.clk.unix(10 * time.Minute) })), "",
			401, invalid("the token is not valid yet"), ResultInvalid},
		{"wrong aud", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["aud"] = base + "/mcp/other" })), "",
			401, invalid("the token is not for this resource"), ResultInvalid},
		{"aud path case differs", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["aud"] = base + "/MCP/core" })), "",
			401, invalid("the token is not for this resource"), ResultInvalid},
		{"no aud", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { delete(c, "aud") })), "",
			401, invalid("the token is not for this resource"), ResultInvalid},
		{"wrong iss", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["iss"] = f.idp.URL + "/" })), "",
			401, invalid("the token's issuer is not trusted"), ResultInvalid},
		{"alg none", "Bearer " + authtest.RawToken(map[string]any{"alg": "none", "kid": "rsa-1"}, f.claims(nil), nil), "",
			401, invalid("the token's signature algorithm is not accepted"), ResultInvalid},
		{"HS256 keyed with the public key", "Bearer " + hs256WithPublicKey(t, f.rsa, f.claims(nil)), "",
			401, invalid("the token's signature algorithm is not accepted"), ResultInvalid},
		{"RS256 header on the EC key", "Bearer " + authtest.RawToken(map[string]any{"alg": "RS256", "kid": "ec-1"}, f.claims(nil),
			func(string) []byte { return make([]byte, 256) }), "",
			401, invalid("the token's signature algorithm is not accepted"), ResultInvalid},
		{"signed by another key", "Bearer " + other.SignAccessToken(t, f.claims(nil)), "",
			401, invalid("the token's signature is invalid"), ResultInvalid},
		{"unknown kid after refresh", "Bearer " + authtest.NewECKey(t, "nobody").SignAccessToken(t, f.claims(nil)), "",
			401, invalid("the token's signing key is unknown"), ResultInvalid},
		{"malformed", "Bearer not-a-jwt", "", 401, invalid("the token is not a signed JWT"), ResultInvalid},
		{"malformed base64", "Bearer a.b.c", "", 401, invalid("the token is not a signed JWT"), ResultInvalid},
		{"claims not an object", "Bearer " + authtest.RawToken(map[string]any{"alg": "RS256"}, nil, nil), "",
			401, invalid("the token's claims are malformed"), ResultInvalid},
		{"oversized", "Bearer " + big, "", 401, invalid("the token is too large"), ResultInvalid},
		{"token in query", "", "x=1&access_token=abc", 400,
			`Bearer error="invalid_request", error_description="access tokens are accepted in the Authorization header only", ` + metaURL, ResultInvalidRequest},
		{"token in query and header", "Bearer " + f.rsa.SignAccessToken(t, f.claims(nil)), "access%5Ftoken=abc", 400,
			`Bearer error="invalid_request", error_description="access tokens are accepted in the Authorization header only", ` + metaURL, ResultInvalidRequest},
		{"missing scope", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["scope"] = "mcp:read" })), "",
			403, `Bearer error="insufficient_scope", error_description="the token lacks a required scope", scope="mcp:tools", ` + metaURL, ResultInsufficientScope},
		{"scope claim of the wrong type", "Bearer " + f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["scope"] = 7 })), "",
			401, invalid("the token's claims are malformed"), ResultInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := f.auth(t, tc.authz, tc.query)
			if res.Status != tc.status || res.Challenge != tc.challenge || res.Label != tc.label || res.Caller != nil {
				t.Fatalf("got status %d label %q challenge\n  %s\nwant %d %q\n  %s", res.Status, res.Label, res.Challenge,
					tc.status, tc.label, tc.challenge)
			}
			if strings.Contains(res.Message, "eyJ") || strings.Contains(res.Challenge, "eyJ") {
				t.Fatalf("the answer carries token content: %+v", res)
			}
		})
	}
	// Several Authorization headers.
	res := f.a.Authenticate(t.Context(), &Request{Route: route, PublicPath: pub, Authorization: "Bearer x", AuthorizationCount: 2})
	if res.Status != 400 || !strings.Contains(res.Challenge, `error="invalid_request"`) {
		t.Fatalf("two headers: %+v", res)
	}
}

func TestModes(t *testing.T) {
	f := newFixture(t, ModeOptional)
	if res := f.auth(t, "", ""); res.Status != 0 || res.Caller != nil || res.Label != ResultAnonymous {
		t.Fatalf("optional, no token: %+v", res)
	}
	if res := f.auth(t, "Bearer garbage", ""); res.Status != 401 {
		t.Fatalf("optional, bad token: %+v", res)
	}
	if res := f.auth(t, "Bearer "+f.ec.SignAccessToken(t, f.claims(nil)), ""); res.Status != 0 || res.Caller == nil {
		t.Fatalf("optional, good token: %+v", res)
	}
	// Route profiles replace the default; off ignores everything.
	cfg := &Config{
		Default: &Profile{Issuers: []Issuer{{Issuer: f.idp.URL}}},
		Routes:  map[string]*Profile{"public": {Mode: ModeOff}},
	}
	if err := f.a.Apply(base, cfg); err != nil {
		t.Fatal(err)
	}
	if res := f.a.Authenticate(t.Context(), &Request{Route: "public", PublicPath: "/mcp/public", Authorization: "Bearer x", AuthorizationCount: 1, Query: "access_token=x"}); res != (Result{}) {
		t.Fatalf("off: %+v", res)
	}
	if res := f.auth(t, "", ""); res.Status != 401 || res.Challenge != `Bearer `+metaURL {
		t.Fatalf("required without scopes: %+v", res)
	}
	// No auth block at all: open.
	if err := f.a.Apply("", nil); err != nil {
		t.Fatal(err)
	}
	if res := f.auth(t, "", ""); res != (Result{}) {
		t.Fatalf("no config: %+v", res)
	}
}

func TestAudienceOverride(t *testing.T) {
	f := newFixture(t, ModeRequired)
	if err := f.a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: f.idp.URL}}, Audience: "api://tools"}}); err != nil {
		t.Fatal(err)
	}
	if res := f.auth(t, "Bearer "+f.rsa.SignAccessToken(t, f.claims(nil)), ""); res.Status != 401 {
		t.Fatalf("resource URI when audience is set: %+v", res)
	}
	if res := f.auth(t, "Bearer "+f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["aud"] = "api://tools" })), ""); res.Status != 0 {
		t.Fatalf("configured audience: %+v", res)
	}
}

func TestClockSkew(t *testing.T) {
	f := newFixture(t, ModeRequired)
	tok := f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["exp"] = f.clk.unix(0) }))
	f.clk.advance(59 * time.Second)
	if res := f.auth(t, "Bearer "+tok, ""); res.Status != 0 {
		t.Fatalf("within the 60s skew: %+v", res)
	}
	f.clk.advance(2 * time.Second)
	if res := f.auth(t, "Bearer "+tok, ""); res.Status != 401 {
		t.Fatalf("past the skew: %+v", res)
	}

	// clockSkew: 0 is no leeway, not the default (issue 26).
	if err := f.a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: f.idp.URL}}, ClockSkew: new(Duration(0))}}); err != nil {
		t.Fatal(err)
	}
	tok = f.rsa.SignAccessToken(t, f.claims(func(c map[string]any) { c["exp"] = f.clk.unix(2 * time.Second) }))
	if res := f.auth(t, "Bearer "+tok, ""); res.Status != 0 {
		t.Fatalf("before exp without skew: %+v", res)
	}
	f.clk.advance(2 * time.Second)
	if res := f.auth(t, "Bearer "+tok, ""); res.Status != 401 {
		t.Fatalf("at exp with clockSkew 0: %+v, want 401", res)
	}
}

func TestAlgorithmAllowList(t *testing.T) {
	f := newFixture(t, ModeRequired)
	if err := f.a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: f.idp.URL, Algorithms: []string{"ES256"}}}}}); err != nil {
		t.Fatal(err)
	}
	if res := f.auth(t, "Bearer "+f.rsa.SignAccessToken(t, f.claims(nil)), ""); res.Status != 401 || !strings.Contains(res.Challenge, "algorithm") {
		t.Fatalf("RS256 outside the list: %+v", res)
	}
	if res := f.auth(t, "Bearer "+f.ec.SignAccessToken(t, f.claims(nil)), ""); res.Status != 0 {
		t.Fatalf("ES256: %+v", res)
	}
	for _, alg := range []string{"none", "HS256", "HS512", "RSA1_5"} {
		err := Validate(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: f.idp.URL, Algorithms: []string{alg}}}}})
		if err == nil || !strings.Contains(err.Error(), "auth.default.issuers[0].algorithms") {
			t.Fatalf("%s: err = %v", alg, err)
		}
	}
}

// TestRotation: a token signed with a key the JWKS gains later is accepted
// without restart (refresh on unknown kid), tokens of the dropped key are
// not once the set is refetched, and the refetch is rate limited.
func TestRotation(t *testing.T) {
	f := newFixture(t, ModeRequired)
	if res := f.auth(t, "Bearer "+f.rsa.SignAccessToken(t, f.claims(nil)), ""); res.Status != 0 {
		t.Fatalf("before rotation: %+v", res)
	}
	hits := f.idp.JWKSHits.Load()
	next := authtest.NewRSAKey(t, "rsa-2")
	f.idp.SetKeys(next, f.ec)
	// Within the rate limit no refetch happens: the new kid is unknown.
	if res := f.auth(t, "Bearer "+next.SignAccessToken(t, f.claims(nil)), ""); res.Status != 401 {
		t.Fatalf("rate limited: %+v", res)
	}
	if got := f.idp.JWKSHits.Load(); got != hits {
		t.Fatalf("JWKS fetched %d times within the rate limit", got-hits)
	}
	f.clk.advance(time.Minute)
	if res := f.auth(t, "Bearer "+next.SignAccessToken(t, f.claims(nil)), ""); res.Status != 0 {
		t.Fatalf("after rotation: %+v", res)
	}
	if res := f.auth(t, "Bearer "+f.rsa.SignAccessToken(t, f.claims(nil)), ""); res.Status != 401 || !strings.Contains(res.Challenge, "unknown") {
		t.Fatalf("retired key: %+v", res)
	}
}

// TestUnknownKidFlood: many concurrent tokens with unknown kids cause at
// most one fetch per rate-limit interval.
func TestUnknownKidFlood(t *testing.T) {
	f := newFixture(t, ModeRequired)
	f.auth(t, "Bearer "+f.rsa.SignAccessToken(t, f.claims(nil)), "") // keys loaded
	f.clk.advance(time.Minute)
	before := f.idp.JWKSHits.Load()
	bad := authtest.NewECKey(t, "ghost")
	tok := "Bearer " + bad.SignAccessToken(t, f.claims(nil))
	done := make(chan Result)
	for range 50 {
		go func() { done <- f.auth(t, tok, "") }()
	}
	for range 50 {
		if res := <-done; res.Status != 401 {
			t.Errorf("ghost kid: %+v", res)
		}
	}
	if got := f.idp.JWKSHits.Load() - before; got != 1 {
		t.Fatalf("50 unknown-kid requests made %d JWKS fetches, want 1", got)
	}
}

func TestJWKSDown(t *testing.T) {
	t.Run("cached keys keep working", func(t *testing.T) {
		f := newFixture(t, ModeRequired)
		tok := "Bearer " + f.rsa.SignAccessToken(t, f.claims(nil))
		if res := f.auth(t, tok, ""); res.Status != 0 {
			t.Fatalf("%+v", res)
		}
		f.idp.Down.Store(true)
		f.clk.advance(10 * time.Minute) // past the refresh interval: a background refresh fails
		for range 3 {
			if res := f.auth(t, tok, ""); res.Status != 0 {
				t.Fatalf("with the JWKS down: %+v", res)
			}
		}
	})
	t.Run("none ever fetched fails closed", func(t *testing.T) {
		clk := newClock()
		k := authtest.NewRSAKey(t, "k")
		p := authtest.NewIssuer(t, "", k)
		p.Down.Store(true)
		a := New(Options{Now: clk.now})
		if err := a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: p.URL}}}}); err != nil {
			t.Fatal(err)
		}
		tok := k.SignAccessToken(t, map[string]any{"iss": p.URL, "aud": base + pub, "exp": clk.unix(time.Hour)})
		res := a.Authenticate(t.Context(), &Request{Route: route, PublicPath: pub, Authorization: "Bearer " + tok, AuthorizationCount: 1})
		if res.Status != 503 || res.Caller != nil || res.Label != ResultUnavailable || res.Challenge != "" {
			t.Fatalf("%+v", res)
		}
		// The identity provider comes back: the next request past the rate limit works.
		p.Down.Store(false)
		clk.advance(time.Minute)
		res = a.Authenticate(t.Context(), &Request{Route: route, PublicPath: pub, Authorization: "Bearer " + tok, AuthorizationCount: 1})
		if res.Status != 0 {
			t.Fatalf("after recovery: %+v", res)
		}
	})
}

func TestDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		oidcOnly   bool
		want       string
	}{
		{"RFC 8414 path insertion", "/realms/tools", false, "/.well-known/oauth-authorization-server/realms/tools"},
		{"RFC 8414 no path", "", false, "/.well-known/oauth-authorization-server"},
		{"OIDC appended", "/realms/tools", true, "/realms/tools/.well-known/openid-configuration"},
		{"OIDC no path", "", true, "/.well-known/openid-configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			k := authtest.NewECKey(t, "k")
			p := authtest.NewIssuer(t, tc.path, k)
			p.OIDCOnly = tc.oidcOnly
			a := New(Options{Now: clk.now})
			if err := a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: p.URL}}}}); err != nil {
				t.Fatal(err)
			}
			tok := k.SignAccessToken(t, map[string]any{"iss": p.URL, "aud": base + pub, "exp": clk.unix(time.Hour)})
			res := a.Authenticate(t.Context(), &Request{Route: route, PublicPath: pub, Authorization: "Bearer " + tok, AuthorizationCount: 1})
			if res.Status != 0 {
				t.Fatalf("%+v", res)
			}
			if p.Hits(tc.want) == 0 {
				t.Fatalf("metadata not read at %s", tc.want)
			}
		})
	}
}

func TestJWKSURLAndFile(t *testing.T) {
	clk := newClock()
	k := authtest.NewRSAKey(t, "k")
	p := authtest.NewIssuer(t, "/x", k)
	dir := t.TempDir()
	file := filepath.Join(dir, "jwks.json")
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.JWK()}})
	if err := os.WriteFile(file, set, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, is := range []Issuer{
		{Issuer: "https://idp.example.com/file", JWKSFile: file},
		{Issuer: "https://idp.example.com/url", JWKSURL: p.Server.URL + "/keys"},
	} {
		a := New(Options{Now: clk.now})
		if err := a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{is}}}); err != nil {
			t.Fatal(err)
		}
		tok := k.SignAccessToken(t, map[string]any{"iss": is.Issuer, "aud": base + pub, "exp": clk.unix(time.Hour)})
		if res := a.Authenticate(t.Context(), &Request{Route: route, PublicPath: pub, Authorization: "Bearer " + tok, AuthorizationCount: 1}); res.Status != 0 {
			t.Fatalf("%s: %+v", is.Issuer, res)
		}
	}
	if p.MetaHits.Load() != 0 {
		t.Fatal("jwksUrl still discovered the metadata")
	}
	// A jwksFile that does not parse fails Apply; the configuration in force stays.
	a := New(Options{Now: clk.now})
	good := &Config{Default: &Profile{Issuers: []Issuer{{Issuer: "https://idp.example.com/file", JWKSFile: file}}}}
	if err := a.Apply(base, good); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`), 0o600)
	err := a.Apply(base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: "https://idp.example.com/file", JWKSFile: bad}}}})
	if err == nil || !strings.Contains(err.Error(), "auth.default.issuers[0].jwksFile") {
		t.Fatalf("bad file: %v", err)
	}
	tok := k.SignAccessToken(t, map[string]any{"iss": "https://idp.example.com/file", "aud": base + pub, "exp": clk.unix(time.Hour)})
	if res := a.Authenticate(t.Context(), &Request{Route: route, PublicPath: pub, Authorization: "Bearer " + tok, AuthorizationCount: 1}); res.Status != 0 {
		t.Fatalf("last good config not in force: %+v", res)
	}
}

func TestMetadata(t *testing.T) {
	f := newFixture(t, ModeRequired)
	doc, ok := f.a.Metadata(route, pub)
	if !ok {
		t.Fatal("no metadata")
	}
	want := `{"resource":"https://mcp.example.com/mcp/core","authorization_servers":["` + f.idp.URL +
		`"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`
	if string(doc) != want {
		t.Fatalf("metadata\n %s\nwant\n %s", doc, want)
	}
	if err := f.a.Apply(base, &Config{Routes: map[string]*Profile{"open": {Mode: ModeOff}}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"open", route} {
		if _, ok := f.a.Metadata(r, "/mcp/"+r); ok {
			t.Fatalf("%s has metadata without auth", r)
		}
	}
}

func TestValidate(t *testing.T) {
	is := []Issuer{{Issuer: "https://idp.example.com"}}
	for _, tc := range []struct {
		name, base string
		cfg        *Config
		want       string
	}{
		{"no base", "", &Config{Default: &Profile{Issuers: is}}, "resourceBase: must be set"},
		{"base with path", "https://x.example.com/mcp", nil, "resourceBase:"},
		{"http base", "http://x.example.com", nil, "resourceBase:"},
		{"bad mode", base, &Config{Default: &Profile{Mode: "sometimes", Issuers: is}}, "auth.default.mode"},
		{"no issuer", base, &Config{Routes: map[string]*Profile{"core": {}}}, "auth.routes.core.issuers"},
		{"http issuer", base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: "http://idp.example.com"}}}}, "auth.default.issuers[0].issuer"},
		{"both jwks", base, &Config{Default: &Profile{Issuers: []Issuer{{Issuer: "https://i.example.com", JWKSURL: "https://i.example.com/k", JWKSFile: "/k"}}}}, "exclusive"},
		{"skew", base, &Config{Default: &Profile{Issuers: is, ClockSkew: new(Duration(6 * time.Minute))}}, "auth.default.clockSkew"},
		{"token bytes", base, &Config{Default: &Profile{Issuers: is, MaxTokenBytes: 10}}, "auth.default.maxTokenBytes"},
		{"scope", base, &Config{Default: &Profile{Issuers: is, Scopes: []string{"a b"}}}, "auth.default.scopes[0]"},
		{"nil route", base, &Config{Routes: map[string]*Profile{"x": nil}}, "auth.routes.x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.base, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if err := Validate(base, &Config{Default: &Profile{Issuers: is}, Routes: map[string]*Profile{"p": {Mode: ModeOff}}}); err != nil {
		t.Fatal(err)
	}
	if err := Validate("", &Config{Routes: map[string]*Profile{"p": {Mode: ModeOff}}}); err != nil {
		t.Fatal(err)
	}
}

// TestView: what the console shows of a route's profile in force: mode,
// issuers, audience (configured, else the resource URI) and scopes, and
// nothing of where keys come from.
func TestView(t *testing.T) {
	k := authtest.NewRSAKey(t, "k")
	file := filepath.Join(t.TempDir(), "jwks.json")
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.JWK()}})
	if err := os.WriteFile(file, set, 0o600); err != nil {
		t.Fatal(err)
	}
	a := New(Options{})
	if err := a.Apply(base, &Config{
		Default: &Profile{Mode: ModeOptional, Issuers: []Issuer{{Issuer: "https://idp.example.com/file", JWKSFile: file}}, Audience: "api://tools"},
		Routes: map[string]*Profile{
			"strict": {Issuers: []Issuer{{Issuer: "https://idp.example.com/file", JWKSFile: file}}, Scopes: []string{"mcp:tools"}},
			"open":   {Mode: ModeOff},
		},
	}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		route string
		want  RouteView
	}{
		{"strict", RouteView{Mode: ModeRequired, Issuers: []string{"https://idp.example.com/file"},
			Audience: base + "/mcp/strict", Resource: base + "/mcp/strict", Scopes: []string{"mcp:tools"}}},
		{"other", RouteView{Mode: ModeOptional, Issuers: []string{"https://idp.example.com/file"},
			Audience: "api://tools", Resource: base + "/mcp/other"}},
		{"open", RouteView{Mode: ModeOff}},
	}
	for _, tt := range tests {
		got := a.View(tt.route, "/mcp/"+tt.route)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("View(%s) = %+v, want %+v", tt.route, got, tt.want)
		}
		if b, _ := json.Marshal(got); strings.Contains(string(b), file) {
			t.Errorf("View(%s) names the JWKS file: %s", tt.route, b)
		}
	}
	if got := (*Authenticator)(nil).View("r", "/mcp/r"); got.Mode != ModeOff {
		t.Errorf("nil Authenticator: %+v", got)
	}
}
