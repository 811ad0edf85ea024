package upstreamcred

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/oauthclient"
)

// OAuth modes of an upstreamAuth entry (docs/identity.md, "Delegated
// identity"; docs/decisions/0019-delegated-identity.md). This file is the
// hook between upstreamAuth and internal/oauthclient; the rest of the
// package only asks it for a header.

// Modes of ServiceAuth.OAuth.
const (
	ModeTokenExchange     = "tokenExchange"
	ModeClientCredentials = "clientCredentials"
)

// OAuth obtains the upstream's token from an authorization server.
type OAuth struct {
	// Mode is tokenExchange (calls carry the caller's token exchanged for
	// the upstream) or clientCredentials (the gateway's own identity).
	// Listings use client credentials in both.
	Mode string `json:"mode"`
	// Issuer's metadata names the token endpoint, unless TokenURL is set.
	// Without either, the authorization server is discovered from the
	// upstream's 401 (RFC 9728), for federated MCP servers.
	Issuer   string `json:"issuer,omitempty"`
	TokenURL string `json:"tokenUrl,omitempty"`
	ClientID string `json:"clientId"`
	// AuthMethod: client_secret_basic (default), client_secret_post,
	// private_key_jwt.
	AuthMethod string `json:"authMethod,omitempty"`
	// ClientSecret and PrivateKey name entries of the credentials map; a
	// private key is a PEM file or variable.
	ClientSecret string `json:"clientSecret,omitempty"`
	PrivateKey   string `json:"privateKey,omitempty"`
	KeyID        string `json:"keyId,omitempty"`
	// AssertionAudience is the aud of private_key_jwt assertions:
	// tokenEndpoint (default) or issuer.
	AssertionAudience string `json:"assertionAudience,omitempty"`
	// Audience, Resource and Scopes of the upstream's token.
	Audience []string `json:"audience,omitempty"`
	Resource []string `json:"resource,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	// Actor sends the gateway's own token as the exchange's actor_token.
	Actor bool `json:"actor,omitempty"`
	// Timeout bounds one request to the authorization server (default 5s).
	Timeout config.Duration `json:"timeout,omitempty"`
}

func (o OAuth) config(creds map[string]config.CredentialSource) (oauthclient.Config, error) {
	src := func(field, name string) (oauthclient.Source, error) {
		if name == "" {
			return oauthclient.Source{}, nil
		}
		c, ok := creds[name]
		if !ok {
			return oauthclient.Source{}, fmt.Errorf("%s: %q is not defined in credentials", field, name)
		}
		return oauthclient.Source{File: c.File, Env: c.Env}, nil
	}
	sec, err1 := src("clientSecret", o.ClientSecret)
	key, err2 := src("privateKey", o.PrivateKey)
	if err := errors.Join(err1, err2); err != nil {
		return oauthclient.Config{}, err
	}
	return oauthclient.Config{Issuer: o.Issuer, TokenURL: o.TokenURL, ClientID: o.ClientID, AuthMethod: o.AuthMethod,
		Secret: sec, Key: key, KeyID: o.KeyID, AssertionAudience: o.AssertionAudience, Actor: o.Actor, Timeout: o.Timeout.D()}, nil
}

// validate returns the entry's problems, each naming
// upstreamAuth.<service>.oauth.<field>.
func (o OAuth) validate(svc string, creds map[string]config.CredentialSource) []error {
	var errs []error
	bad := func(err error) { errs = append(errs, fmt.Errorf("upstreamAuth.%s.oauth.%w", svc, err)) }
	if o.Mode != ModeTokenExchange && o.Mode != ModeClientCredentials {
		bad(fmt.Errorf("mode: %q is not %s or %s", o.Mode, ModeTokenExchange, ModeClientCredentials))
	}
	if o.Actor && o.Mode != ModeTokenExchange {
		bad(errors.New("actor: only with mode tokenExchange"))
	}
	cfg, err := o.config(creds)
	if err != nil {
		bad(err)
		return errs
	}
	if discovers(o) {
		cfg.Issuer = placeholderIssuer // the rest of the entry is checked as it will be used
	}
	if _, err := oauthclient.New(cfg); err != nil {
		for _, e := range splitJoined(err) {
			bad(e)
		}
	}
	return errs
}

func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// oauthRequests counts the requests to authorization servers
// (toolmesh_upstream_oauth_requests_total). One process-wide counter:
// every configuration's token clients count into it (Collector).
var oauthRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "toolmesh_upstream_oauth_requests_total",
	Help: "Requests of the gateway to authorization servers for upstream tokens, by service, grant (client_credentials, token_exchange, discovery) and result (ok, refused, unavailable, timeout, busy, config). Cached tokens make none.",
}, []string{"service", "grant", "result"})

// Collector is toolmesh_upstream_oauth_requests_total, for the registry
// that serves the gateway's metrics.
func Collector() *prometheus.CounterVec { return oauthRequests }

// oauthSet is the token clients of one upstreamAuth configuration, one
// per service with an oauth entry. It is built with the configuration
// (Build, BuildAfter), so a SIGHUP replaces it; an entry
// whose client configuration did not change keeps its client, and with it
// its cached tokens and the authorization server it discovered. It is never
// modified after it is built.
type oauthSet map[string]*serviceOAuth

// serviceOAuth is one service's token client: fixed when the entry names
// its authorization server (issuer or tokenUrl), else discovered from the
// server's 401 (RFC 9728), at most one discovery at a time.
type serviceOAuth struct {
	cfg   oauthclient.Config // as configured, without Observe
	fixed *oauthclient.Client
	found atomic.Pointer[discoveredAS]
	mu    sync.Mutex
}

// discoveredAS is what a protected server's metadata named.
type discoveredAS struct {
	issuer   string   // the authorization server (its first authorization_servers entry)
	resource string   // the metadata's resource: the token's resource by default
	scopes   []string // the challenge's scope: the token's scopes by default
	client   *oauthclient.Client
}

func discovers(o OAuth) bool { return o.Issuer == "" && o.TokenURL == "" }

// placeholderIssuer stands in for a discovered authorization server when an
// entry's other fields are checked.
const placeholderIssuer = "https://authorization-server.invalid"

func observer(service string) func(oauthclient.Outcome) {
	return func(out oauthclient.Outcome) { oauthRequests.WithLabelValues(service, out.Grant, out.Result).Inc() }
}

func sameConfig(a, b oauthclient.Config) bool {
	a.Observe, b.Observe, a.Now, b.Now, a.HTTPClient, b.HTTPClient = nil, nil, nil, nil, nil, nil
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// buildOAuth returns the token clients of u's oauth entries, taking over
// prev's for entries whose client configuration is unchanged.
func buildOAuth(u Auth, prev oauthSet) (oauthSet, error) {
	set := oauthSet{}
	for svc, a := range u.Services {
		if a.OAuth == nil {
			continue
		}
		cfg, err := a.OAuth.config(u.Credentials)
		if err != nil {
			return nil, fmt.Errorf("upstreamAuth.%s.oauth: %w", svc, err)
		}
		if p := prev[svc]; p != nil && sameConfig(p.cfg, cfg) {
			set[svc] = p
			continue
		}
		so := &serviceOAuth{cfg: cfg}
		if !discovers(*a.OAuth) {
			full := cfg
			full.Observe = observer(svc)
			if so.fixed, err = oauthclient.New(full); err != nil {
				return nil, fmt.Errorf("upstreamAuth.%s.oauth: %w", svc, err)
			}
		}
		set[svc] = so
	}
	return set, nil
}

// BuildAfter builds u's token clients unless they were built (Build),
// taking over those of prev (the configuration in force, nil at start) for
// unchanged entries.
func (u *Auth) BuildAfter(prev *Auth) error {
	if u.oauth != nil {
		return nil
	}
	var p oauthSet
	if prev != nil {
		p = prev.oauth
	}
	set, err := buildOAuth(*u, p)
	u.oauth = set
	return err
}

// Build validates the upstreamAuth of a configuration and builds its token
// clients, taking over prev's (nil: none) where an entry is unchanged.
// Calls (the extproc Runtime's UpstreamAuth) and listings
// (ListingCredentials) given the result share its clients.
func Build(services map[string]ServiceAuth, creds map[string]config.CredentialSource, prev *Auth) (*Auth, error) {
	u := Auth{Services: services, Credentials: creds}
	if err := u.Validate(); err != nil {
		return nil, err
	}
	var p oauthSet
	if prev != nil {
		p = prev.oauth
	}
	set, err := buildOAuth(u, p)
	if err != nil {
		return nil, err
	}
	u.oauth = set
	return &u, nil
}

// client is the token client in force and what was discovered (nil for a
// fixed one); nil, nil when the authorization server is not discovered yet.
func (so *serviceOAuth) client() (*oauthclient.Client, *discoveredAS) {
	if so.fixed != nil {
		return so.fixed, nil
	}
	if d := so.found.Load(); d != nil {
		return d.client, d
	}
	return nil, nil
}

// discover reads the protected resource metadata of the MCP server at url
// that answered 401 with challenges, and sets up a client for the first
// authorization server it names. The metadata's resource must be url or a
// path prefix of it (RFC 9728 section 3.3), and the metadata and the
// authorization server must be https (http only for loopback hosts):
// oauthclient.DiscoverResource and CheckURL. Its authorization server
// metadata (RFC 8414) is read at the first token request. A discovery that
// already happened is kept.
func (so *serviceOAuth) discover(ctx context.Context, service, url string, challenges []string) error {
	so.mu.Lock()
	defer so.mu.Unlock()
	if so.found.Load() != nil {
		return nil
	}
	timeout := so.cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prm, scopes, err := oauthclient.ResourceFromChallenge(ctx, oauthclient.HTTPClient(so.cfg.HTTPClient), challenges, url)
	if err != nil {
		oauthRequests.WithLabelValues(service, "resource_discovery", "unavailable").Inc()
		return fmt.Errorf("discover the authorization server of %s: %w", url, err)
	}
	oauthRequests.WithLabelValues(service, "resource_discovery", "ok").Inc()
	cfg := so.cfg
	cfg.Issuer, cfg.Observe = prm.AuthorizationServers[0], observer(service)
	c, err := oauthclient.New(cfg)
	if err != nil {
		return fmt.Errorf("the authorization server %s of %s: %w", cfg.Issuer, url, err)
	}
	so.found.Store(&discoveredAS{issuer: cfg.Issuer, resource: prm.Resource, scopes: scopes, client: c})
	return nil
}

// errNoCaller: a tokenExchange call without an authenticated caller.
var errNoCaller = errors.New("no authenticated caller whose token could be exchanged")

// errForeignIssuer: a tokenExchange call whose authorization server was
// discovered from the upstream and is not the caller's token's issuer.
var errForeignIssuer = errors.New("its discovered authorization server did not issue the caller's token")

// oauthRequest is what service's token is asked for: the caller's token
// exchanged (tokenExchange, a call with an authenticated caller), else
// the gateway's own. A call in tokenExchange mode without a caller token
// is an error: it is never sent as the gateway. d, when the authorization
// server was discovered, gives the resource and scopes the entry leaves
// out.
func oauthRequest(o OAuth, d *discoveredAS, callerIssuer, callerSub, callerToken string, listing bool) (oauthclient.Request, error) {
	r := oauthclient.Request{Grant: oauthclient.ClientCredentials, Audience: o.Audience, Resource: o.Resource, Scopes: o.Scopes}
	if d != nil && len(r.Resource) == 0 {
		r.Resource = []string{d.resource}
	}
	if d != nil && len(r.Scopes) == 0 {
		r.Scopes = d.scopes
	}
	if o.Mode == ModeTokenExchange && !listing {
		if callerToken == "" {
			return r, errNoCaller
		}
		// A subject token goes only to the authorization server the
		// operator named, or back to the one that issued it: never to one
		// an upstream's metadata names.
		if d != nil && d.issuer != callerIssuer {
			return r, errForeignIssuer
		}
		r.Grant, r.SubjectToken, r.Subject = oauthclient.TokenExchange, callerToken, callerIssuer+"\x00"+callerSub
	}
	return r, nil
}

// Token is the OAuth token a routed call carries (Credentials.Token).
type Token struct {
	client *oauthclient.Client
	req    oauthclient.Request
}

// serviceOAuth returns u's client of service, building a one-off set when u
// was not built (a configuration given as a literal).
func (u *Auth) serviceOAuth(service string) (*serviceOAuth, error) {
	if u.oauth != nil {
		if so := u.oauth[service]; so != nil {
			return so, nil
		}
	}
	set, err := buildOAuth(Auth{Services: map[string]ServiceAuth{service: u.Services[service]}, Credentials: u.Credentials}, nil)
	if err != nil {
		return nil, err
	}
	return set[service], nil
}

// oauthCredential is the Authorization value of a call to service by o,
// and the token in it; "" while its authorization server is not discovered
// yet (the call goes without, and the server's 401 discovers it:
// Unauthorized).
func (u *Auth) oauthCredential(ctx context.Context, service string, o OAuth, caller *identity.Caller) (string, *Token, error) {
	so, err := u.serviceOAuth(service)
	if err != nil {
		return "", nil, err
	}
	var iss, sub, tok string
	if caller != nil {
		iss, sub, tok = caller.Issuer, caller.Subject, caller.Token
	}
	c, d := so.client()
	if c == nil {
		if o.Mode == ModeTokenExchange && tok == "" {
			return "", nil, errNoCaller
		}
		return "", nil, nil
	}
	r, err := oauthRequest(o, d, iss, sub, tok, false)
	if err != nil {
		return "", nil, err
	}
	t, err := c.Token(ctx, r)
	if err != nil {
		return "", nil, err
	}
	return "Bearer " + t.AccessToken, &Token{client: c, req: r}, nil
}

// listingCredential is the Authorization value of the gateway's own listing
// of service: client credentials, whatever the mode; "" while the
// authorization server is not discovered yet.
func listingCredential(u *Auth, service string, o OAuth) (string, error) {
	so, err := u.serviceOAuth(service)
	if err != nil {
		return "", err
	}
	c, d := so.client()
	if c == nil {
		return "", nil
	}
	r, _ := oauthRequest(o, d, "", "", "", true)
	t, err := c.Token(context.Background(), r)
	if err != nil {
		return "", err
	}
	return "Bearer " + t.AccessToken, nil
}

// ListingUnauthorized is told that the listing of service at url was
// answered 401 with challenges. For an oauth entry it evicts the listing's
// token, or discovers the authorization server from the challenge, and
// returns true: list once more. Anything else returns false.
func ListingUnauthorized(ctx context.Context, u Auth, service, url string, challenges []string) bool {
	a, ok := u.Services[service]
	if !ok || a.OAuth == nil {
		return false
	}
	so, err := u.serviceOAuth(service)
	if err != nil {
		return false
	}
	c, d := so.client()
	if c == nil {
		return so.discover(ctx, service, url, challenges) == nil
	}
	r, _ := oauthRequest(*a.OAuth, d, "", "", "", true)
	c.Evict(r)
	return true
}

// oauthReason is the client-facing reason of a failed token request: the
// class, never the authorization server's text or a token.
func oauthReason(err error) (string, bool) {
	switch {
	case errors.Is(err, errNoCaller):
		return "it acts for an authenticated caller, and the request has none", true
	case errors.Is(err, errForeignIssuer):
		return "its authorization server, discovered from it, is not the issuer of the caller's token", true
	}
	var e *oauthclient.Error
	if !errors.As(err, &e) {
		return "", false
	}
	s := "the authorization server did not issue a token for it (" + e.Class
	if e.Code != "" {
		s += ": " + e.Code
	}
	return strings.TrimSpace(s) + ")", true
}
