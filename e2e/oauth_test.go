package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/toolmesh/toolmesh/internal/oauthclient"
)

// The authorization server of these tests is zitadel/oidc's example OpenID
// Provider (github.com/zitadel/oidc/v3/example/server/exampleop, pinned in
// go.mod): its op package implements the token endpoint, token exchange
// (RFC 8693), client credentials and discovery. Only its storage is
// adjusted: the gateway's client secret can be rotated, clients get JWT
// access tokens, and client credentials tokens are for ccAudience.

const (
	oauthGatewayID = "gateway"
	oauthAppID     = "app"
	oauthAppSecret = "app-secret"
	oauthAppRedir  = "http://127.0.0.1:9/cb" // never contacted: the code is read from the redirect
	oauthPassword  = "verysecure"            // the example users' password
)

type asStorage struct {
	*storage.Storage
	secret     atomic.Pointer[string]
	ccAudience []string
	// gatewayKey, when set, is the public key of the gateway's client,
	// which then authenticates with private_key_jwt (RFC 7523).
	gatewayKey atomic.Pointer[jose.JSONWebKey]
}

// jwtClient makes a client's access tokens JWTs and lets it use client
// credentials; keyAuth makes its authentication method private_key_jwt.
type jwtClient struct {
	op.Client
	keyAuth bool
}

func (c jwtClient) AuthMethod() oidc.AuthMethod {
	if c.keyAuth {
		return oidc.AuthMethodPrivateKeyJWT
	}
	return c.Client.AuthMethod()
}

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c jwtClient) GrantTypes() []oidc.GrantType {
	return append(slices.Clone(c.Client.GrantTypes()), oidc.GrantTypeClientCredentials)
}

func (s *asStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{Client: c, keyAuth: id == oauthGatewayID && s.gatewayKey.Load() != nil}, nil
}

// GetKeyByIDAndClientID gives the op package the gateway's public key to
// verify its client assertions with.
func (s *asStorage) GetKeyByIDAndClientID(ctx context.Context, keyID, clientID string) (*jose.JSONWebKey, error) {
	if k := s.gatewayKey.Load(); k != nil && clientID == oauthGatewayID && keyID == k.KeyID {
		return k, nil
	}
	return s.Storage.GetKeyByIDAndClientID(ctx, keyID, clientID)
}

func (s *asStorage) checkGateway(id, secret string) error {
	if id != oauthGatewayID || secret != *s.secret.Load() {
		return errors.New("invalid client secret")
	}
	return nil
}

func (s *asStorage) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	if id == oauthGatewayID {
		return s.checkGateway(id, secret)
	}
	return s.Storage.AuthorizeClientIDSecret(ctx, id, secret)
}

func (s *asStorage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.checkGateway(id, secret); err != nil {
		return nil, err
	}
	return s.GetClientByClientID(ctx, id)
}

// ValidateTokenExchangeRequest keeps the example's policy (a user who is
// not an admin cannot be exchanged without an actor) but answers a refusal
// as the OAuth error invalid_grant, where the example's storage error
// becomes a 500 server_error.
func (s *asStorage) ValidateTokenExchangeRequest(ctx context.Context, r op.TokenExchangeRequest) error {
	if err := s.Storage.ValidateTokenExchangeRequest(ctx, r); err != nil {
		return oidc.ErrInvalidGrant().WithDescription("%s", err.Error())
	}
	return nil
}

func (s *asStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return &oidc.JWTTokenRequest{Subject: id, Audience: s.ccAudience, Scopes: scopes}, nil
}

// authServer is one running example OP.
type authServer struct {
	Issuer  string
	store   *asStorage
	srv     *http.Server
	mu      sync.Mutex
	grants  map[string]int // token requests by grant_type
	running bool
}

func startAuthServer(t *testing.T, gatewaySecret string, ccAudience ...string) *authServer {
	t.Helper()
	return startAuthServerWith(t, gatewaySecret, false, ccAudience...)
}

// startAuthServerWith starts the example OP; wrap serves it through the op
// package's Server interface (op.NewLegacyServer), the only one of its two
// token endpoints that authenticates a token exchange's client by
// private_key_jwt.
func startAuthServerWith(t *testing.T, gatewaySecret string, wrap bool, ccAudience ...string) *authServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &authServer{Issuer: "http://" + ln.Addr().String(), grants: map[string]int{}, running: true}
	clients := map[string]*storage.Client{
		oauthGatewayID: storage.WebClient(oauthGatewayID, "unused", oauthAppRedir),
		oauthAppID:     storage.WebClient(oauthAppID, oauthAppSecret, oauthAppRedir),
	}
	a.store = &asStorage{Storage: storage.NewStorageWithClients(storage.NewUserStore(a.Issuer), clients), ccAudience: ccAudience}
	a.store.secret.Store(&gatewaySecret)
	router := exampleop.SetupServer(a.Issuer, a.store, nil, wrap)
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/oauth/token" {
			_ = r.ParseForm()
			a.mu.Lock()
			a.grants[r.PostForm.Get("grant_type")]++
			a.mu.Unlock()
		}
		router.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	t.Cleanup(a.stop)
	return a
}

func (a *authServer) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running {
		a.running = false
		_ = a.srv.Close()
	}
}

func (a *authServer) requests(grant string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.grants[grant]
}

func (a *authServer) rotate(secret string) { a.store.secret.Store(&secret) }

// userToken signs username in at the OP with the authorization code flow
// (the example's login form) and returns the app's JWT access token.
func (a *authServer) userToken(t *testing.T, username string) string {
	t.Helper()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	next := func(resp *http.Response, err error) *url.URL {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: status %d at %s", resp.StatusCode, resp.Request.URL)
		}
		loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	q := url.Values{"client_id": {oauthAppID}, "redirect_uri": {oauthAppRedir}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"s"}}
	login := next(hc.Get(a.Issuer + "/auth?" + q.Encode()))
	cb := next(hc.PostForm(a.Issuer+"/login/username", url.Values{"username": {username}, "password": {oauthPassword},
		"id": {login.Query().Get("authRequestID")}}))
	done := next(hc.Get(cb.String()))
	code := done.Query().Get("code")
	if code == "" {
		t.Fatalf("login: no code in %s", done)
	}
	req, _ := http.NewRequest(http.MethodPost, a.Issuer+"/oauth/token", strings.NewReader(url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {oauthAppRedir}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(oauthAppID, oauthAppSecret)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || tr.AccessToken == "" {
		t.Fatalf("login: token response %d: %v", resp.StatusCode, err)
	}
	return tr.AccessToken
}

// jwtClaims decodes a JWT's claims without verifying it: the upstream in
// the end-to-end test verifies; here only what the token says is checked.
func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT (%d parts)", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func audiences(c map[string]any) []string {
	switch a := c["aud"].(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, x := range a {
			s, _ := x.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

func writeSecret(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeClock is the client's clock: expiry is tested by moving it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newOAuthClient(t *testing.T, cfg oauthclient.Config) *oauthclient.Client {
	t.Helper()
	c, err := oauthclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOAuthClientCredentials(t *testing.T) {
	as := startAuthServer(t, "s1", "https://upstream.example/api")
	secret := filepath.Join(t.TempDir(), "secret")
	writeSecret(t, secret, "s1")
	clk := &fakeClock{t: time.Now()}
	for _, method := range []string{oauthclient.AuthSecretBasic, oauthclient.AuthSecretPost} {
		t.Run(method, func(t *testing.T) {
			before := as.requests("client_credentials")
			c := newOAuthClient(t, oauthclient.Config{Issuer: as.Issuer, ClientID: oauthGatewayID, AuthMethod: method,
				Secret: oauthclient.Source{File: secret}, Now: clk.Now})
			tok, err := c.Token(t.Context(), oauthclient.Request{Grant: oauthclient.ClientCredentials, Scopes: []string{"tools"}})
			if err != nil {
				t.Fatal(err)
			}
			cl := jwtClaims(t, tok.AccessToken)
			if cl["sub"] != oauthGatewayID || cl["iss"] != as.Issuer || !slices.Contains(audiences(cl), "https://upstream.example/api") {
				t.Fatalf("claims %v", cl)
			}
			// Cached: the second call makes no request.
			again, err := c.Token(t.Context(), oauthclient.Request{Grant: oauthclient.ClientCredentials, Scopes: []string{"tools"}})
			if err != nil || again.AccessToken != tok.AccessToken {
				t.Fatalf("second call: %v", err)
			}
			if n := as.requests("client_credentials") - before; n != 1 {
				t.Fatalf("%d token requests, want 1", n)
			}
		})
	}
}

func TestOAuthTokenExchange(t *testing.T) {
	as := startAuthServer(t, "s1")
	secret := filepath.Join(t.TempDir(), "secret")
	writeSecret(t, secret, "s1")
	clk := &fakeClock{t: time.Now()}
	c := newOAuthClient(t, oauthclient.Config{Issuer: as.Issuer, ClientID: oauthGatewayID,
		Secret: oauthclient.Source{File: secret}, Now: clk.Now, Skew: 30 * time.Second})
	alice := as.userToken(t, "test-user@127.0.0.1") // id1
	req := oauthclient.Request{Grant: oauthclient.TokenExchange, SubjectToken: alice, Subject: as.Issuer + "|id1",
		Audience: []string{"https://tools.example/orders"}, Scopes: []string{"openid", "orders"}}

	tok, err := c.Token(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	cl := jwtClaims(t, tok.AccessToken)
	if cl["sub"] != "id1" || !slices.Contains(audiences(cl), "https://tools.example/orders") || slices.Contains(audiences(cl), oauthAppID) {
		t.Fatalf("exchanged token claims %v", cl)
	}
	if tok.AccessToken == alice {
		t.Fatal("the subject token came back")
	}

	t.Run("cache and singleflight", func(t *testing.T) {
		before := as.requests(oauthclient.TokenExchangeGrantType)
		var wg sync.WaitGroup
		r2 := req
		r2.Audience = []string{"https://tools.example/billing"}
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				got, err := c.Token(t.Context(), r2)
				if err == nil && jwtClaims(t, got.AccessToken)["sub"] != "id1" {
					err = errors.New("wrong subject")
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Token(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if n := as.requests(oauthclient.TokenExchangeGrantType) - before; n != 1 {
			t.Fatalf("16 concurrent misses and a hit made %d requests, want 1", n)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		// The OP's tokens live 5 minutes; with a 30s skew the cached one is
		// used until 4m30s.
		before := as.requests(oauthclient.TokenExchangeGrantType)
		clk.Add(4 * time.Minute)
		if got, _ := c.Token(t.Context(), req); got.AccessToken != tok.AccessToken {
			t.Fatal("a token within its lifetime was replaced")
		}
		clk.Add(time.Minute)
		got, err := c.Token(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got.AccessToken == tok.AccessToken || as.requests(oauthclient.TokenExchangeGrantType)-before != 1 {
			t.Fatal("an expired token was used")
		}
	})

	t.Run("evict", func(t *testing.T) {
		before := as.requests(oauthclient.TokenExchangeGrantType)
		c.Evict(req)
		if _, err := c.Token(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if as.requests(oauthclient.TokenExchangeGrantType)-before != 1 {
			t.Fatal("an evicted token was used")
		}
	})

	t.Run("refused", func(t *testing.T) {
		// The example OP refuses to let a non-admin user be exchanged
		// without an actor.
		bob := as.userToken(t, "test-user2") // id2
		r := oauthclient.Request{Grant: oauthclient.TokenExchange, SubjectToken: bob, Subject: as.Issuer + "|id2",
			Audience: []string{"https://tools.example/orders"}}
		_, err := c.Token(t.Context(), r)
		var oe *oauthclient.Error
		if !errors.As(err, &oe) || oe.Class != oauthclient.ClassRefused || oe.Code != "invalid_grant" {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(err.Error(), bob) || strings.Contains(err.Error(), "s1") {
			t.Fatalf("the error shows the token or the secret: %v", err)
		}
		if !strings.Contains(err.Error(), as.Issuer) {
			t.Fatalf("the error does not name the issuer: %v", err)
		}
		// Delegation: with the gateway's own token as actor_token, the
		// exchange is allowed and the token is still bob's.
		actor := newOAuthClient(t, oauthclient.Config{Issuer: as.Issuer, ClientID: oauthGatewayID,
			Secret: oauthclient.Source{File: secret}, Actor: true})
		got, err := actor.Token(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		if sub := jwtClaims(t, got.AccessToken)["sub"]; sub != "id2" {
			t.Fatalf("delegated token for %v", sub)
		}
	})
}

func TestOAuthSecretRotation(t *testing.T) {
	as := startAuthServer(t, "old", "https://upstream.example/api")
	secret := filepath.Join(t.TempDir(), "secret")
	writeSecret(t, secret, "old")
	c := newOAuthClient(t, oauthclient.Config{Issuer: as.Issuer, ClientID: oauthGatewayID, Secret: oauthclient.Source{File: secret}})
	get := func(scope string) error {
		_, err := c.Token(t.Context(), oauthclient.Request{Grant: oauthclient.ClientCredentials, Scopes: []string{scope}})
		return err
	}
	if err := get("a"); err != nil {
		t.Fatal(err)
	}
	// The AS rotates first: the old secret is refused, invalid_client.
	as.rotate("new")
	var oe *oauthclient.Error
	if err := get("b"); !errors.As(err, &oe) || oe.Class != oauthclient.ClassRefused || oe.Code != "invalid_client" {
		t.Fatalf("old secret after rotation: %v", err)
	}
	// The file follows; the next request reads it, no restart.
	writeSecret(t, secret, "new")
	if err := get("b"); err != nil {
		t.Fatalf("rotated secret: %v", err)
	}
	// The token cached before the rotation stays in use.
	before := as.requests("client_credentials")
	if err := get("a"); err != nil || as.requests("client_credentials") != before {
		t.Fatalf("cached token: %v", err)
	}
}

func TestOAuthServerDown(t *testing.T) {
	// Nothing listens: a refused connection is "unavailable", counted.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	var mu sync.Mutex
	outcomes := map[string]int{}
	observe := func(o oauthclient.Outcome) { mu.Lock(); outcomes[o.Grant+"/"+o.Result]++; mu.Unlock() }
	t.Setenv("TOOLMESH_TEST_OAUTH_SECRET", "s1")
	src := oauthclient.Source{Env: "TOOLMESH_TEST_OAUTH_SECRET"}
	down := newOAuthClient(t, oauthclient.Config{Issuer: closed, ClientID: oauthGatewayID, Secret: src, Observe: observe})
	_, err = down.Token(t.Context(), oauthclient.Request{Grant: oauthclient.ClientCredentials})
	var oe *oauthclient.Error
	if !errors.As(err, &oe) || oe.Class != oauthclient.ClassUnavailable {
		t.Fatalf("closed port: %v", err)
	}

	// A server that accepts and never answers is bounded by Timeout, and
	// with MaxConcurrent 1 a second request waits only as long as its
	// caller allows, while another authorization server keeps serving.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	slow := newOAuthClient(t, oauthclient.Config{TokenURL: "http://" + hole.Addr().String() + "/token", ClientID: oauthGatewayID,
		Secret: src, Timeout: 2 * time.Second, MaxConcurrent: 1, Observe: observe})
	first := make(chan error, 1)
	go func() {
		_, err := slow.Token(context.Background(), oauthclient.Request{Grant: oauthclient.ClientCredentials, Scopes: []string{"a"}})
		first <- err
	}()
	as := startAuthServer(t, "s1", "https://upstream.example/api")
	healthy := newOAuthClient(t, oauthclient.Config{Issuer: as.Issuer, ClientID: oauthGatewayID, Secret: src})
	if _, err := healthy.Token(t.Context(), oauthclient.Request{Grant: oauthclient.ClientCredentials}); err != nil {
		t.Fatalf("another authorization server: %v", err)
	}
	if err := <-first; !errors.As(err, &oe) || oe.Class != oauthclient.ClassTimeout {
		t.Fatalf("black hole: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if outcomes["discovery/unavailable"] != 1 || outcomes["client_credentials/unavailable"] != 1 || outcomes["client_credentials/timeout"] != 1 {
		t.Fatalf("outcomes %v", outcomes)
	}
}

// TestOAuthNothingLogged runs the flows with a log capture around the
// client's observer and errors, and looks for every token and secret.
func TestOAuthNothingLogged(t *testing.T) {
	as := startAuthServer(t, "the-client-secret", "https://upstream.example/api")
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Setenv("TOOLMESH_TEST_OAUTH_SECRET", "the-client-secret")
	// zitadel's token exchange reads the client's secret from Basic only.
	c := newOAuthClient(t, oauthclient.Config{Issuer: as.Issuer, ClientID: oauthGatewayID,
		Secret: oauthclient.Source{Env: "TOOLMESH_TEST_OAUTH_SECRET"}, Actor: true,
		Observe: func(o oauthclient.Outcome) { log.Info("oauth", "outcome", o) }})
	alice := as.userToken(t, "test-user@127.0.0.1")
	var seen []string
	for _, r := range []oauthclient.Request{
		{Grant: oauthclient.ClientCredentials},
		{Grant: oauthclient.TokenExchange, SubjectToken: alice, Subject: "id1", Audience: []string{"https://a"}},
		{Grant: oauthclient.TokenExchange, SubjectToken: "not-a-token", Subject: "x", Audience: []string{"https://a"}},
	} {
		tok, err := c.Token(t.Context(), r)
		log.Info("token", "token", tok, "err", err, "request", fmt.Sprint(r.Grant))
		if tok.AccessToken != "" {
			seen = append(seen, tok.AccessToken)
		}
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d tokens obtained, want 2; log:\n%s", len(seen), out)
	}
	for _, s := range append(seen, alice, "the-client-secret", "not-a-token") {
		if strings.Contains(out, s) {
			t.Fatalf("the log shows a token or secret:\n%s", out)
		}
	}
	if !strings.Contains(out, "refused") || !strings.Contains(out, "[redacted]") {
		t.Fatalf("the log lacks the outcomes:\n%s", out)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
