package oauthclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"
)

// Client authentication methods at the token endpoint (RFC 7591 section 2).
const (
	AuthSecretBasic = "client_secret_basic"
	AuthSecretPost  = "client_secret_post"
	AuthPrivateKey  = "private_key_jwt"
)

// Values of Config.AssertionAudience.
const (
	AudienceTokenEndpoint = "tokenEndpoint"
	AudienceIssuer        = "issuer"
)

// Token type identifiers (RFC 8693 section 3).
const (
	TokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"
	TypeAccessToken        = "urn:ietf:params:oauth:token-type:access_token"
)

// Grants a Request asks for.
const (
	ClientCredentials = "client_credentials"
	TokenExchange     = "token_exchange"
)

// Config is one client registration at one authorization server.
type Config struct {
	// Issuer is the authorization server's issuer identifier; its metadata
	// names the token endpoint unless TokenURL is set.
	Issuer string
	// TokenURL skips discovery.
	TokenURL string
	// ClientID is the gateway's client ID at the authorization server.
	ClientID string
	// AuthMethod is client_secret_basic (default), client_secret_post or
	// private_key_jwt.
	AuthMethod string
	// Secret is the client secret (client_secret_*).
	Secret Source
	// Key is the PEM private key (private_key_jwt); KeyID its kid.
	Key   Source
	KeyID string
	// AssertionAudience is the aud of a private_key_jwt assertion:
	// AudienceTokenEndpoint (default; OpenID Connect Core section 9) or
	// AudienceIssuer (the issuer identifier, as RFC 7523's update
	// draft-ietf-oauth-rfc7523bis asks, and as zitadel checks); the
	// latter needs Issuer.
	AssertionAudience string
	// Actor sends the gateway's own client credentials token as the
	// actor_token of token exchanges (RFC 8693 section 4.1, delegation).
	Actor bool
	// HTTPClient makes the requests (nil: http.DefaultClient's transport);
	// it is wrapped by HTTPClient, so redirects stay within one origin.
	HTTPClient *http.Client
	// Timeout bounds one request to the authorization server, discovery
	// included (default 5s).
	Timeout time.Duration
	// MaxConcurrent bounds the requests in flight to this authorization
	// server (default 4): a slow server holds at most that many, and the
	// calls waiting for it wait only as long as their own context allows.
	MaxConcurrent int
	// CacheSize bounds the cached tokens (default 10000).
	CacheSize int
	// Skew is how long before its expiry a token stops being used (default
	// 30s); DefaultLifetime is the lifetime of a token issued without
	// expires_in (default 60s).
	Skew, DefaultLifetime time.Duration
	// Now is the clock (default time.Now), for tests.
	Now func() time.Time
	// Observe, when set, is told the outcome of every request to the
	// authorization server (metrics); it never sees a token.
	Observe func(Outcome)
}

// Outcome describes one request to an authorization server.
type Outcome struct {
	Issuer   string
	Grant    string // client_credentials, token_exchange, discovery
	Result   string // ok, or an error Class
	Duration time.Duration
}

// Error classes.
const (
	ClassRefused     = "refused"     // the authorization server answered with an OAuth error
	ClassUnavailable = "unavailable" // unreachable, a 5xx, or an unusable answer
	ClassTimeout     = "timeout"     // no answer within Timeout
	ClassBusy        = "busy"        // MaxConcurrent requests in flight, and the caller's context ended first
	ClassConfig      = "config"      // a secret or key cannot be read, or the request is incomplete
)

// Error is a failure to obtain a token. Its text names the issuer, the
// class and the authorization server's error code, never a token, a
// secret, or the server's response body.
type Error struct {
	Issuer string
	Grant  string
	Class  string
	// Code is the OAuth error code of a refusal (invalid_grant,
	// invalid_client, ...).
	Code string
	err  error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("oauth %s at %s: %s", e.Grant, e.Issuer, e.Class)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.err }

// Request is what a token is asked for.
type Request struct {
	// Grant is ClientCredentials or TokenExchange.
	Grant string
	// SubjectToken is the caller's validated access token (TokenExchange);
	// Subject identifies its holder for the cache (the caller's issuer and
	// sub), never the token itself.
	SubjectToken string
	Subject      string
	// Audience, Resource (RFC 8707) and Scopes of the token asked for.
	Audience []string
	Resource []string
	Scopes   []string
}

func (r Request) key() string {
	var b strings.Builder
	b.WriteString(r.Grant)
	for _, part := range [][]string{{r.Subject}, r.Audience, r.Resource, r.Scopes} {
		b.WriteByte(0)
		b.WriteString(strings.Join(part, "\x01"))
	}
	return b.String()
}

// Token is an access token and when it stops being used.
type Token struct {
	AccessToken string
	TokenType   string
	Expiry      time.Time
}

// String never shows the token.
func (t Token) String() string {
	return "Token([redacted], expires " + t.Expiry.Format(time.RFC3339) + ")"
}

// LogValue keeps the token out of structured logs.
func (t Token) LogValue() slog.Value { return slog.StringValue(t.String()) }

// Client obtains and caches tokens from one authorization server.
type Client struct {
	cfg      Config
	hc       *http.Client
	sem      chan struct{}
	endpoint atomic.Pointer[string] // the discovered token endpoint
	flight   singleflight.Group
	cache    *cache
	key      *keySource
	now      func() time.Time
}

// New checks cfg and returns a Client; nothing is fetched yet.
func New(cfg Config) (*Client, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.AuthMethod = cmp.Or(cfg.AuthMethod, AuthSecretBasic)
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	cfg.MaxConcurrent = cmp.Or(cfg.MaxConcurrent, 4)
	cfg.CacheSize = cmp.Or(cfg.CacheSize, 10000)
	cfg.Skew = cmp.Or(cfg.Skew, 30*time.Second)
	cfg.DefaultLifetime = cmp.Or(cfg.DefaultLifetime, time.Minute)
	c := &Client{cfg: cfg, hc: HTTPClient(cfg.HTTPClient), sem: make(chan struct{}, cfg.MaxConcurrent),
		cache: newCache(cfg.CacheSize), now: time.Now}
	if cfg.Now != nil {
		c.now = cfg.Now
	}
	if cfg.AuthMethod == AuthPrivateKey {
		c.key = &keySource{src: cfg.Key}
	}
	if cfg.TokenURL != "" {
		u := cfg.TokenURL
		c.endpoint.Store(&u)
	}
	return c, nil
}

// check reports every problem of cfg at once, each naming its key.
func (cfg Config) check() error {
	var errs []error
	if cfg.Issuer == "" && cfg.TokenURL == "" {
		errs = append(errs, errors.New("issuer or tokenUrl is required"))
	}
	for _, u := range []struct{ key, url string }{{"issuer", cfg.Issuer}, {"tokenUrl", cfg.TokenURL}} {
		if u.url == "" {
			continue
		}
		if err := CheckURL(u.url); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.key, err))
		}
	}
	if cfg.ClientID == "" {
		errs = append(errs, errors.New("clientId is required"))
	}
	errs = append(errs, cfg.checkAuth()...)
	if cfg.Timeout < 0 || cfg.MaxConcurrent < 0 || cfg.CacheSize < 0 || cfg.Skew < 0 || cfg.DefaultLifetime < 0 {
		errs = append(errs, errors.New("timeout, maxConcurrent, cacheSize, skew and defaultLifetime must not be negative"))
	}
	return errors.Join(errs...)
}

// checkAuth checks the client authentication method and what it needs.
func (cfg Config) checkAuth() []error {
	var errs []error
	switch cfg.AuthMethod {
	case "", AuthSecretBasic, AuthSecretPost:
		if err := cfg.Secret.Check(); err != nil {
			errs = append(errs, fmt.Errorf("clientSecret: %w", err))
		}
		if cfg.Key != (Source{}) {
			errs = append(errs, errors.New("privateKey: only with authMethod private_key_jwt"))
		}
	case AuthPrivateKey:
		if err := cfg.Key.Check(); err != nil {
			errs = append(errs, fmt.Errorf("privateKey: %w", err))
		}
		if cfg.Secret != (Source{}) {
			errs = append(errs, errors.New("clientSecret: not used with authMethod private_key_jwt"))
		}
		switch cfg.AssertionAudience {
		case "", AudienceTokenEndpoint:
		case AudienceIssuer:
			if cfg.Issuer == "" {
				errs = append(errs, errors.New("assertionAudience: issuer needs issuer"))
			}
		default:
			errs = append(errs, fmt.Errorf("assertionAudience: %q is not %s or %s", cfg.AssertionAudience, AudienceTokenEndpoint, AudienceIssuer))
		}
	default:
		errs = append(errs, fmt.Errorf("authMethod: %q is not one of %s, %s, %s", cfg.AuthMethod, AuthSecretBasic, AuthSecretPost, AuthPrivateKey))
	}
	return errs
}

func (c *Client) issuer() string {
	if c.cfg.Issuer != "" {
		return c.cfg.Issuer
	}
	return c.cfg.TokenURL
}

// Token returns a cached token for r, or obtains one. Concurrent misses for
// one key share one request; a waiter whose ctx ends returns early without
// cancelling it.
func (c *Client) Token(ctx context.Context, r Request) (Token, error) {
	switch r.Grant {
	case ClientCredentials:
		r.SubjectToken, r.Subject = "", ""
	case TokenExchange:
		if r.SubjectToken == "" || r.Subject == "" {
			return Token{}, &Error{Issuer: c.issuer(), Grant: r.Grant, Class: ClassConfig, err: errors.New("no subject token")}
		}
	default:
		return Token{}, &Error{Issuer: c.issuer(), Grant: r.Grant, Class: ClassConfig, err: errors.New("unknown grant")}
	}
	key := r.key()
	if t, ok := c.cache.get(key, c.now()); ok {
		return t, nil
	}
	ch := c.flight.DoChan(key, func() (any, error) {
		// The first caller's cancellation must not fail the others: the
		// request runs on its own context, bounded by Timeout.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
		defer cancel()
		t, err := c.fetch(rctx, ctx, r)
		if err == nil {
			c.cache.put(key, t, c.now())
		}
		return t, err
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return Token{}, res.Err
		}
		return res.Val.(Token), nil
	case <-ctx.Done():
		return Token{}, &Error{Issuer: c.issuer(), Grant: r.Grant, Class: ClassTimeout, err: ctx.Err()}
	}
}

// Evict drops r's cached token: the upstream refused it (401).
func (c *Client) Evict(r Request) {
	if r.Grant == ClientCredentials {
		r.SubjectToken, r.Subject = "", ""
	}
	c.cache.del(r.key())
}

// fetch makes one token request on rctx; waitCtx is the first caller's, for
// the wait on the concurrency bound only.
func (c *Client) fetch(rctx, waitCtx context.Context, r Request) (Token, error) {
	start := c.now()
	t, err := c.fetchBounded(rctx, waitCtx, r)
	res := "ok"
	var e *Error
	if errors.As(err, &e) {
		res = e.Class
	}
	if c.cfg.Observe != nil {
		c.cfg.Observe(Outcome{Issuer: c.issuer(), Grant: r.Grant, Result: res, Duration: c.now().Sub(start)})
	}
	return t, err
}

func (c *Client) fetchBounded(rctx, waitCtx context.Context, r Request) (Token, error) {
	// The actor token is the gateway's own, cached like any other; it is
	// obtained before taking a slot of the concurrency bound, which its own
	// request needs.
	var act string
	if r.Grant == TokenExchange && c.cfg.Actor {
		t, err := c.Token(rctx, Request{Grant: ClientCredentials})
		if err != nil {
			return Token{}, err
		}
		act = t.AccessToken
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-waitCtx.Done():
		return Token{}, c.failure(r, ClassBusy, "", errBusy)
	case <-rctx.Done():
		return Token{}, c.failure(r, ClassBusy, "", errBusy)
	}
	endpoint, err := c.tokenEndpoint(rctx)
	if err != nil {
		return Token{}, c.failure(r, classOf(rctx, err), "", err)
	}
	cc, err := c.tokenRequest(endpoint, r, act)
	if err != nil {
		return Token{}, err
	}
	tok, err := cc.Token(context.WithValue(rctx, oauth2.HTTPClient, c.hc))
	return c.tokenOf(rctx, r, tok, err)
}

var errBusy = errors.New("too many requests in flight to the authorization server")

// failure is the Error of a token request for r.
func (c *Client) failure(r Request, class, code string, err error) *Error {
	return &Error{Issuer: c.issuer(), Grant: r.Grant, Class: class, Code: code, err: err}
}

// tokenRequest is the token request for r at endpoint, with the client's
// authentication; act is the actor token of a delegating exchange.
func (c *Client) tokenRequest(endpoint string, r Request, act string) (*clientcredentials.Config, error) {
	params := url.Values{}
	if len(r.Audience) > 0 {
		params["audience"] = r.Audience
	}
	if len(r.Resource) > 0 {
		params["resource"] = r.Resource
	}
	if r.Grant == TokenExchange {
		params.Set("grant_type", TokenExchangeGrantType)
		params.Set("subject_token", r.SubjectToken)
		params.Set("subject_token_type", TypeAccessToken)
		params.Set("requested_token_type", TypeAccessToken)
		if act != "" {
			params.Set("actor_token", act)
			params.Set("actor_token_type", TypeAccessToken)
		}
	}
	cc := &clientcredentials.Config{ClientID: c.cfg.ClientID, TokenURL: endpoint, Scopes: r.Scopes, EndpointParams: params}
	switch c.cfg.AuthMethod {
	case AuthSecretBasic, AuthSecretPost:
		sec, err := c.cfg.Secret.Secret()
		if err != nil {
			return nil, c.failure(r, ClassConfig, "", fmt.Errorf("client secret: %w", err))
		}
		cc.ClientSecret = sec
		cc.AuthStyle = oauth2.AuthStyleInHeader
		if c.cfg.AuthMethod == AuthSecretPost {
			cc.AuthStyle = oauth2.AuthStyleInParams
		}
	case AuthPrivateKey:
		key, err := c.key.signer()
		if err != nil {
			return nil, c.failure(r, ClassConfig, "", fmt.Errorf("private key: %w", err))
		}
		aud := endpoint
		if c.cfg.AssertionAudience == AudienceIssuer {
			aud = c.cfg.Issuer
		}
		a, err := clientAssertion(key, c.cfg.KeyID, c.cfg.ClientID, aud, c.now())
		if err != nil {
			return nil, c.failure(r, ClassConfig, "", err)
		}
		// With no secret, AuthStyleInParams sends client_id alone, next to
		// the assertion.
		params.Set("client_assertion_type", assertionType)
		params.Set("client_assertion", a)
		cc.AuthStyle = oauth2.AuthStyleInParams
	}
	return cc, nil
}

// tokenOf is the Token of the token endpoint's answer (tok, or err).
func (c *Client) tokenOf(rctx context.Context, r Request, tok *oauth2.Token, err error) (Token, error) {
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			if re.ErrorCode != "" && (re.Response == nil || re.Response.StatusCode < 500) {
				return Token{}, c.failure(r, ClassRefused, sanitizeCode(re.ErrorCode), nil)
			}
			status := 0
			if re.Response != nil {
				status = re.Response.StatusCode
			}
			return Token{}, c.failure(r, ClassUnavailable, "", fmt.Errorf("token endpoint answered status %d", status))
		}
		// Other errors come from the transport or from decoding, never
		// with the request's form.
		return Token{}, c.failure(r, classOf(rctx, err), "", scrub(err))
	}
	if tok.AccessToken == "" {
		return Token{}, c.failure(r, ClassUnavailable, "", errors.New("token endpoint answered without access_token"))
	}
	if tt := tok.Type(); !strings.EqualFold(tt, "bearer") {
		return Token{}, c.failure(r, ClassUnavailable, "", fmt.Errorf("token type %q is not Bearer", sanitizeCode(tt)))
	}
	exp := tok.Expiry
	if exp.IsZero() {
		exp = c.now().Add(c.cfg.DefaultLifetime)
	}
	return Token{AccessToken: tok.AccessToken, TokenType: "Bearer", Expiry: exp.Add(-c.cfg.Skew)}, nil
}

// tokenEndpoint is the configured or discovered token endpoint; a failed
// discovery is tried again at the next request.
func (c *Client) tokenEndpoint(ctx context.Context) (string, error) {
	if p := c.endpoint.Load(); p != nil {
		return *p, nil
	}
	start := c.now()
	m, err := DiscoverServer(ctx, c.hc, c.cfg.Issuer)
	if c.cfg.Observe != nil {
		res := "ok"
		if err != nil {
			res = classOf(ctx, err)
		}
		c.cfg.Observe(Outcome{Issuer: c.issuer(), Grant: "discovery", Result: res, Duration: c.now().Sub(start)})
	}
	if err != nil {
		return "", err
	}
	c.endpoint.Store(&m.TokenEndpoint)
	return m.TokenEndpoint, nil
}

func classOf(ctx context.Context, err error) string {
	var ne net.Error
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return ClassTimeout
	}
	return ClassUnavailable
}

// scrub keeps the operation and URL of a transport error and drops
// anything else.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, ue.URL, ue.Err)
	}
	return err
}

// sanitizeCode keeps an error code printable and short: it is the
// authorization server's text.
func sanitizeCode(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '?'
		}
		return r
	}, s)
}
