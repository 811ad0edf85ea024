package oauthclient

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func TestBearerChallenge(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		ok   bool
	}{
		{`Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`,
			map[string]string{"resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"}, true},
		{`Bearer error="invalid_token", error_description="expired", resource_metadata="https://a/x", scope="a b"`,
			map[string]string{"error": "invalid_token", "error_description": "expired", "resource_metadata": "https://a/x", "scope": "a b"}, true},
		{`Basic realm="x", Bearer realm="y", Scope=tools`, map[string]string{"realm": "y", "scope": "tools"}, true},
		{`bearer`, map[string]string{}, true},
		{`Bearer realm="a\"b"`, map[string]string{"realm": `a"b`}, true},
		{`Negotiate abc==, Bearer x=1`, map[string]string{"x": "1"}, true},
		{`Basic realm="x"`, nil, false},
		{`Bearer realm="unterminated`, nil, false},
		{``, nil, false},
		{`"Bearer"`, nil, false},
	} {
		got, ok := BearerChallenge(tc.in)
		if ok != tc.ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("BearerChallenge(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzBearerChallenge(f *testing.F) {
	for _, s := range []string{`Bearer resource_metadata="https://a/b"`, `Basic realm="x", Bearer a=b, c="d\"e"`, `Negotiate ab==`, `Bearer ,,,`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := BearerChallenge(s)
		if !ok && p != nil {
			t.Fatalf("params %v without a challenge", p)
		}
		if ok && !strings.Contains(strings.ToLower(s), "bearer") {
			t.Fatalf("a Bearer challenge in %q", s)
		}
	})
}

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		u  string
		ok bool
	}{
		{"https://as.example.com/token", true},
		{"http://127.0.0.1:8080/token", true},
		{"http://[::1]:1/x", true},
		{"http://localhost/x", true},
		{"http://as.example.com/token", false},
		{"https://user:pw@as.example.com/", false},
		{"https://as.example.com/#frag", false},
		{"/token", false},
		{"ftp://as.example.com/", false},
	} {
		if err := CheckURL(tc.u); (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) = %v, want ok=%v", tc.u, err, tc.ok)
		}
	}
}

func TestMetadataURLs(t *testing.T) {
	got, _ := MetadataURLs("https://idp.example.com/realms/tools/")
	want := []string{
		"https://idp.example.com/.well-known/oauth-authorization-server/realms/tools",
		"https://idp.example.com/.well-known/openid-configuration/realms/tools",
		"https://idp.example.com/realms/tools/.well-known/openid-configuration",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	got, _ = MetadataURLs("https://idp.example.com")
	if len(got) != 2 || got[0] != "https://idp.example.com/.well-known/oauth-authorization-server" {
		t.Errorf("no path: got %v", got)
	}
}

func TestResourceMatches(t *testing.T) {
	for _, tc := range []struct {
		res, target string
		ok          bool
	}{
		{"https://mcp.example.com/mcp", "https://mcp.example.com/mcp", true},
		{"https://mcp.example.com", "https://mcp.example.com/mcp", true},
		{"https://mcp.example.com/", "https://mcp.example.com/mcp", true},
		{"https://MCP.example.com/mcp", "https://mcp.example.com/mcp/", true},
		{"https://mcp.example.com/m", "https://mcp.example.com/mcp", false},
		{"https://other.example.com/mcp", "https://mcp.example.com/mcp", false},
		{"http://mcp.example.com/mcp", "https://mcp.example.com/mcp", false},
		{"", "https://mcp.example.com/mcp", false},
	} {
		if got := resourceMatches(tc.res, tc.target); got != tc.ok {
			t.Errorf("resourceMatches(%q, %q) = %v", tc.res, tc.target, got)
		}
	}
}

func TestCacheBoundedLRU(t *testing.T) {
	c := newCache(10)
	exp := time.Now().Add(time.Hour)
	for i := range 10 {
		c.put(fmt.Sprint(i), Token{AccessToken: fmt.Sprint(i), Expiry: exp}, time.Now())
	}
	// 0 is used again, so 1 is now the least recently used.
	if _, ok := c.get("0", time.Now()); !ok {
		t.Fatal("0 not cached")
	}
	c.put("10", Token{Expiry: exp}, time.Now())
	if n := c.n.Load(); n > 10 {
		t.Fatalf("%d entries, bound is 10", n)
	}
	if _, ok := c.get("0", time.Now()); !ok {
		t.Error("the recently used entry was dropped")
	}
	if _, ok := c.get("1", time.Now()); ok {
		t.Error("the least recently used entry stayed")
	}
	if _, ok := c.get("10", time.Now()); !ok {
		t.Error("the new entry was dropped")
	}
	// Expired entries are not returned and go first.
	c.put("old", Token{Expiry: time.Now().Add(-time.Second)}, time.Now())
	if _, ok := c.get("old", time.Now()); ok {
		t.Error("an expired token was returned")
	}
	c.del("10")
	if _, ok := c.get("10", time.Now()); ok {
		t.Error("a deleted token was returned")
	}
}

func TestRequestKey(t *testing.T) {
	a := Request{Grant: TokenExchange, Subject: "iss|alice", Audience: []string{"x"}, Scopes: []string{"a", "b"}}
	b := a
	b.Scopes = []string{"a b"}
	c := a
	c.Subject = "iss|bob"
	d := a
	d.SubjectToken = "another token of alice"
	if a.key() == b.key() || a.key() == c.key() {
		t.Error("distinct requests share a cache key")
	}
	if a.key() != d.key() {
		t.Error("the subject token is part of the key; the subject is")
	}
	if strings.Contains(d.key(), "another token") {
		t.Error("the key holds the token")
	}
}

func writePEM(t *testing.T, path string, key crypto.Signer) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestClientAssertion(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		key crypto.Signer
		alg jose.SignatureAlgorithm
	}{{rsaKey, jose.RS256}, {ecKey, jose.ES256}, {edKey, jose.EdDSA}} {
		a, err := clientAssertion(tc.key, "k1", "gateway", "https://as.example.com/token", now)
		if err != nil {
			t.Fatal(err)
		}
		jws, err := jose.ParseSigned(a, []jose.SignatureAlgorithm{tc.alg})
		if err != nil {
			t.Fatalf("%s: %v", tc.alg, err)
		}
		if kid := jws.Signatures[0].Header.KeyID; kid != "k1" {
			t.Errorf("kid %q", kid)
		}
		b, err := jws.Verify(tc.key.Public())
		if err != nil {
			t.Fatalf("%s: verify: %v", tc.alg, err)
		}
		var cl map[string]any
		_ = json.Unmarshal(b, &cl)
		if cl["iss"] != "gateway" || cl["sub"] != "gateway" || cl["aud"] != "https://as.example.com/token" ||
			cl["exp"].(float64) != float64(now.Add(time.Minute).Unix()) || cl["jti"] == "" {
			t.Errorf("%s: claims %v", tc.alg, cl)
		}
	}
}

func TestKeySourceRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	writePEM(t, path, k1)
	ks := &keySource{src: Source{File: path}}
	got, err := ks.signer()
	if err != nil || !k1.Equal(got) {
		t.Fatalf("first key: %v", err)
	}
	again, _ := ks.signer()
	if again != got {
		t.Error("an unchanged file was parsed again")
	}
	k2, _ := rsa.GenerateKey(rand.Reader, 2048)
	writePEM(t, path, k2)
	got, err = ks.signer()
	if err != nil || !k2.Equal(got) {
		t.Fatalf("rotated key not used: %v", err)
	}
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.signer(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a broken key file: %v", err)
	}
}

func TestSourceSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	_ = os.WriteFile(path, []byte("s3cret\n"), 0o600)
	t.Setenv("OAUTHCLIENT_TEST_SECRET", "from-env")
	for _, tc := range []struct {
		src  Source
		want string
		err  string
	}{
		{Source{File: path}, "s3cret", ""},
		{Source{Env: "OAUTHCLIENT_TEST_SECRET"}, "from-env", ""},
		{Source{Env: "OAUTHCLIENT_TEST_UNSET"}, "", "not set"},
		{Source{}, "", "one of file and env"},
		{Source{File: path, Env: "X"}, "", "exclusive"},
		{Source{File: filepath.Join(dir, "missing")}, "", "no such file"},
	} {
		got, err := tc.src.Secret()
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: %q, %v", tc.src, got, err)
		}
	}
	_ = os.WriteFile(path, []byte("a\nb"), 0o600)
	if _, err := (Source{File: path}).Secret(); err == nil {
		t.Error("a secret with a line break was accepted")
	}
}

func TestNewChecksConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "issuer or tokenUrl is required"},
		{Config{Issuer: "http://as.example.com", ClientID: "c", Secret: Source{Env: "X"}}, "issuer:"},
		{Config{TokenURL: "https://as/t", Secret: Source{Env: "X"}}, "clientId is required"},
		{Config{TokenURL: "https://as/t", ClientID: "c"}, "clientSecret: one of file and env"},
		{Config{TokenURL: "https://as/t", ClientID: "c", AuthMethod: AuthPrivateKey, Secret: Source{Env: "X"}}, "privateKey: one of"},
		{Config{TokenURL: "https://as/t", ClientID: "c", AuthMethod: "tls_client_auth"}, `authMethod: "tls_client_auth"`},
		{Config{TokenURL: "https://as/t", ClientID: "c", Secret: Source{Env: "X"}, Timeout: -1}, "must not be negative"},
		{Config{TokenURL: "https://as/t", ClientID: "c", AuthMethod: AuthPrivateKey, Key: Source{Env: "K"}, AssertionAudience: AudienceIssuer}, "assertionAudience: issuer needs issuer"},
		{Config{Issuer: "https://as", ClientID: "c", AuthMethod: AuthPrivateKey, Key: Source{Env: "K"}, AssertionAudience: "both"}, `assertionAudience: "both"`},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(Config{TokenURL: "https://as/t", ClientID: "c", Secret: Source{Env: "X"}}); err != nil {
		t.Error(err)
	}
}

func TestTokenNeverPrinted(t *testing.T) {
	const secret = "eyJ.secret-access-token.sig"
	tok := Token{AccessToken: secret, TokenType: "Bearer", Expiry: time.Now()}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("token", "token", tok)
	log.Info("token", slog.Any("t", tok))
	out := buf.String() + fmt.Sprint(tok) + fmt.Sprintf("%v %+v %s", tok, tok, tok)
	if strings.Contains(out, secret) {
		t.Fatalf("the token is printed: %s", out)
	}
	e := &Error{Issuer: "https://as", Grant: TokenExchange, Class: ClassRefused, Code: "invalid_grant"}
	if got := e.Error(); got != "oauth token_exchange at https://as: refused (invalid_grant)" {
		t.Errorf("error text %q", got)
	}
}

func TestRedirectsStayOnOrigin(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a redirect reached another origin: %s", r.URL)
	}))
	defer other.Close()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, srv.URL+"/doc", http.StatusFound)
		case "/away":
			http.Redirect(w, r, other.URL+"/doc", http.StatusFound)
		case "/doc":
			_, _ = w.Write([]byte(`{"resource":"x"}`))
		}
	}))
	defer srv.Close()
	hc := HTTPClient(srv.Client())
	var v map[string]any
	if err := getJSON(context.Background(), hc, srv.URL+"/same", &v); err != nil {
		t.Errorf("same-origin redirect: %v", err)
	}
	err := getJSON(context.Background(), hc, srv.URL+"/away", &v)
	if err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Errorf("cross-origin redirect: %v", err)
	}
}

func TestErrorClass(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := classOf(ctx, errors.New("x")); got != ClassTimeout {
		t.Errorf("ended context: %s", got)
	}
	if got := classOf(context.Background(), errors.New("connection refused")); got != ClassUnavailable {
		t.Errorf("refused connection: %s", got)
	}
	if got := sanitizeCode("bad\ncode" + strings.Repeat("x", 100)); len(got) != 64 || strings.Contains(got, "\n") {
		t.Errorf("sanitizeCode: %q", got)
	}
}
