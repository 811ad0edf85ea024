package extproc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/oauthclient"
)

// OAuth modes of an upstreamAuth entry (docs/identity.md, "Delegated
// identity"; docs/decisions/0019-delegated-identity.md). This file is the
// hook between upstreamAuth and internal/oauthclient; the rest of
// upstreamauth.go only asks it for a header.

// Modes of ServiceAuth.OAuth.
const (
	ModeTokenExchange     = "tokenExchange"
	ModeClientCredentials = "clientCredentials"
)

// OAuthAuth obtains the upstream's token from an authorization server.
type OAuthAuth struct {
	// Mode is tokenExchange (calls carry the caller's token exchanged for
	// the upstream) or clientCredentials (the gateway's own identity).
	// Listings use client credentials in both.
	Mode string `json:"mode"`
	// Issuer's metadata names the token endpoint, unless TokenURL is set.
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
	// Audience, Resource and Scopes of the upstream's token.
	Audience []string `json:"audience,omitempty"`
	Resource []string `json:"resource,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	// Actor sends the gateway's own token as the exchange's actor_token.
	Actor bool `json:"actor,omitempty"`
	// Timeout bounds one request to the authorization server (default 5s).
	Timeout config.Duration `json:"timeout,omitempty"`
}

func (o OAuthAuth) config(creds map[string]config.CredentialSource) (oauthclient.Config, error) {
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
		Secret: sec, Key: key, KeyID: o.KeyID, Actor: o.Actor, Timeout: o.Timeout.D()}, nil
}

// validate returns the entry's problems, each naming
// upstreamAuth.<service>.oauth.<field>.
func (o OAuthAuth) validate(svc string, creds map[string]config.CredentialSource) []error {
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
// (toolmesh_upstream_oauth_requests_total).
var oauthRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "toolmesh_upstream_oauth_requests_total",
	Help: "Requests of the gateway to authorization servers for upstream tokens, by service, grant (client_credentials, token_exchange, discovery) and result (ok, refused, unavailable, timeout, busy, config). Cached tokens make none.",
}, []string{"service", "grant", "result"})

// oauthPool holds one oauthclient.Client per service and configuration,
// shared by calls and listings and kept across reloads, so a SIGHUP that
// does not change an entry keeps its cached tokens. A changed entry gets a
// new Client; the old one is dropped.
var oauthPool struct {
	mu sync.Mutex // taken to build a client, never on a cache hit
	m  sync.Map   // service -> *pooledClient
}

type pooledClient struct {
	cfg    oauthclient.Config
	client *oauthclient.Client
}

func sameConfig(a, b oauthclient.Config) bool {
	a.Observe, b.Observe, a.Now, b.Now, a.HTTPClient, b.HTTPClient = nil, nil, nil, nil, nil, nil
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// oauthClient returns the Client of service's entry o.
func oauthClient(service string, o OAuthAuth, creds map[string]config.CredentialSource) (*oauthclient.Client, error) {
	cfg, err := o.config(creds)
	if err != nil {
		return nil, err
	}
	if v, ok := oauthPool.m.Load(service); ok && sameConfig(v.(*pooledClient).cfg, cfg) {
		return v.(*pooledClient).client, nil
	}
	oauthPool.mu.Lock()
	defer oauthPool.mu.Unlock()
	if v, ok := oauthPool.m.Load(service); ok && sameConfig(v.(*pooledClient).cfg, cfg) {
		return v.(*pooledClient).client, nil
	}
	full := cfg
	full.Observe = func(out oauthclient.Outcome) {
		oauthRequests.WithLabelValues(service, out.Grant, out.Result).Inc()
	}
	c, err := oauthclient.New(full)
	if err != nil {
		return nil, err
	}
	oauthPool.m.Store(service, &pooledClient{cfg: cfg, client: c})
	return c, nil
}

// errNoCaller: a tokenExchange call without an authenticated caller.
var errNoCaller = errors.New("no authenticated caller whose token could be exchanged")

// oauthRequest is what service's token is asked for: the caller's token
// exchanged (tokenExchange, a call with an authenticated caller), else
// the gateway's own. A call in tokenExchange mode without a caller token
// is an error: it is never sent as the gateway.
func oauthRequest(o OAuthAuth, callerIssuer, callerSub, callerToken string, listing bool) (oauthclient.Request, error) {
	r := oauthclient.Request{Grant: oauthclient.ClientCredentials, Audience: o.Audience, Resource: o.Resource, Scopes: o.Scopes}
	if o.Mode == ModeTokenExchange && !listing {
		if callerToken == "" {
			return r, errNoCaller
		}
		r.Grant, r.SubjectToken, r.Subject = oauthclient.TokenExchange, callerToken, callerIssuer+"\x00"+callerSub
	}
	return r, nil
}

// oauthHeader is the Authorization value of service's entry o.
func oauthHeader(ctx context.Context, service string, o OAuthAuth, creds map[string]config.CredentialSource, r oauthclient.Request) (string, error) {
	c, err := oauthClient(service, o, creds)
	if err != nil {
		return "", err
	}
	tok, err := c.Token(ctx, r)
	if err != nil {
		return "", err
	}
	return "Bearer " + tok.AccessToken, nil
}

// oauthReason is the client-facing reason of a failed token request: the
// class, never the authorization server's text or a token.
func oauthReason(err error) (string, bool) {
	if errors.Is(err, errNoCaller) {
		return "it acts for an authenticated caller, and the request has none", true
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
