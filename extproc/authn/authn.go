// Package authn makes the gateway an OAuth 2.1 resource server (MCP
// authorization specification, "Authorization"): it validates the bearer
// JWT of a request against its route's profile and produces the request's
// identity.Caller, or the 400/401/403/503 answer with its WWW-Authenticate
// challenge (RFC 6750 section 3). It also writes each route's
// protected-resource metadata (RFC 9728).
//
// Tokens come only from the Authorization header (RFC 6750 section 2.1).
// Signatures are checked against the issuer's JWKS, cached: the request path
// loads the keys atomically and does no I/O unless a token names a kid the
// cache does not have (ADR 0009, docs/decisions/0009-token-validation.md).
package authn

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MetadataPrefix is the well-known path of protected-resource metadata; a
// route's document is at MetadataPrefix + its public path (RFC 9728 section
// 3.1: the suffix is inserted before the resource's path).
const MetadataPrefix = "/.well-known/oauth-protected-resource"

// Options tune the Authenticator; zero values take the defaults.
type Options struct {
	// Client fetches metadata and JWKS (default: a client with FetchTimeout).
	Client *http.Client
	// Log receives key-refresh failures (default: discard).
	Log *slog.Logger
	// FetchTimeout bounds one JWKS refresh, discovery included, and so how
	// long a request with an unknown kid waits for it (default 3s, below
	// the ext_proc message_timeout of 5s).
	FetchTimeout time.Duration
	// RefreshInterval is the age after which keys are refreshed in the
	// background (default 5m).
	RefreshInterval time.Duration
	// MinRefreshInterval is the least time between two fetches of one
	// issuer's keys, whatever asks (default 10s): unknown kids cannot make
	// the gateway hammer the identity provider.
	MinRefreshInterval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Authenticator validates requests against per-route profiles. Compile
// turns a configuration into Profiles, an immutable value a request
// captures once (extproc's Runtime holds it); Apply compiles and puts the
// result in force for the Authenticator's own methods. Both are safe for
// concurrent use.
type Authenticator struct {
	opts Options
	cfg  atomic.Pointer[compiled]

	mu      sync.Mutex // Apply only
	sources map[string]*keySource

	verified verifiedTokens // tokens whose signature checked out (verified.go)
}

// Profiles is one compiled auth configuration: the per-route profiles and
// the key caches they read. It never changes once compiled; a nil
// *Profiles leaves every route open.
type Profiles struct {
	a *Authenticator
	c *compiled
}

type compiled struct {
	base   string
	def    *profile
	routes map[string]*profile
}

type profile struct {
	mode            Mode
	issuers         []*issuer
	algs            []string // union of the issuers' lists
	audience        string
	scopes          []string
	scopesSupported []string
	scopeParam      string // scopes joined by spaces, for challenges
	skew            time.Duration
	maxBytes        int
}

type issuer struct {
	name       string
	algs       []string
	keys       *keySource
	requireTyp bool // RequireAccessTokenTyp
}

// New returns an Authenticator with no configuration: every route is open
// until Apply.
func New(o Options) *Authenticator {
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 3 * time.Second
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 5 * time.Minute
	}
	if o.MinRefreshInterval <= 0 {
		o.MinRefreshInterval = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.FetchTimeout}
	}
	return &Authenticator{opts: o, sources: map[string]*keySource{}}
}

// Apply compiles a configuration and puts it in force for the
// Authenticator's own methods (Enabled, Authenticate, Metadata, View). On
// error the configuration in force stays.
func (a *Authenticator) Apply(resourceBase string, c *Config) error {
	p, err := a.Compile(resourceBase, c)
	if err != nil {
		return err
	}
	a.cfg.Store(p.c)
	return nil
}

// Current is the configuration Apply put in force; nil before the first.
func (a *Authenticator) Current() *Profiles {
	if a == nil {
		return nil
	}
	c := a.cfg.Load()
	if c == nil {
		return nil
	}
	return &Profiles{a: a, c: c}
}

// Compile validates a configuration and compiles it into Profiles. Key
// caches of issuers the new configuration keeps (same issuer, jwksUrl and
// jwksFile) carry over, so a reload does not refetch them; a jwksFile is
// read again, and must parse.
func (a *Authenticator) Compile(resourceBase string, c *Config) (*Profiles, error) {
	if err := Validate(resourceBase, c); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	next := map[string]*keySource{}
	var fresh []*keySource
	build := func(key string, p *Profile) (*profile, error) {
		cp := newProfile(p)
		if cp.mode == ModeOff {
			return cp, nil
		}
		for i, is := range p.Issuers {
			algs := is.Algorithms
			if len(algs) == 0 {
				algs = supportedAlgorithms
			}
			id := is.Issuer + "\x00" + is.JWKSURL + "\x00" + is.JWKSFile
			src := next[id]
			if src == nil {
				if src = a.sources[id]; src == nil || src.file != "" {
					src = a.newSource(is)
					if is.JWKSFile != "" {
						// Read now: a file that does not parse is a configuration error.
						if err := src.fetch(context.Background()); err != nil {
							return nil, fmt.Errorf("%s.issuers[%d].jwksFile: %w", key, i, err)
						}
					} else {
						fresh = append(fresh, src)
					}
				}
				next[id] = src
			}
			cp.issuers = append(cp.issuers, &issuer{name: is.Issuer, algs: slices.Clone(algs), keys: src, requireTyp: is.RequireAccessTokenTyp})
			for _, alg := range algs {
				if !slices.Contains(cp.algs, alg) {
					cp.algs = append(cp.algs, alg)
				}
			}
		}
		return cp, nil
	}
	nc := &compiled{base: resourceBase, routes: map[string]*profile{}}
	if c != nil {
		var err error
		if c.Default != nil {
			if nc.def, err = build("auth.default", c.Default); err != nil {
				return nil, err
			}
		}
		for k, p := range c.Routes {
			if nc.routes[k], err = build("auth.routes."+k, p); err != nil {
				return nil, err
			}
		}
	}
	a.sources = next
	// First fetch in the background: start-up never waits for an
	// identity provider. Until it succeeds the issuer's routes answer 503.
	for _, s := range fresh {
		s.refresh()
	}
	return &Profiles{a: a, c: nc}, nil
}

// newProfile is p compiled, its issuers left out.
func newProfile(p *Profile) *profile {
	cp := &profile{
		mode:            p.mode(),
		audience:        p.Audience,
		scopes:          slices.Clone(p.Scopes),
		scopesSupported: slices.Clone(p.ScopesSupported),
		scopeParam:      strings.Join(p.Scopes, " "),
		skew:            DefaultClockSkew,
		maxBytes:        p.MaxTokenBytes,
	}
	if p.ClockSkew != nil { // an explicit 0 is no leeway
		cp.skew = time.Duration(*p.ClockSkew)
	}
	if cp.maxBytes == 0 {
		cp.maxBytes = DefaultMaxTokenBytes
	}
	if cp.scopesSupported == nil {
		cp.scopesSupported = cp.scopes
	}
	return cp
}

func (a *Authenticator) newSource(is Issuer) *keySource {
	return &keySource{
		issuer: is.Issuer, jwksURL: is.JWKSURL, file: is.JWKSFile,
		client: a.opts.Client, log: a.opts.Log, fetchTimeout: a.opts.FetchTimeout,
		refreshEvery: a.opts.RefreshInterval, minInterval: a.opts.MinRefreshInterval, now: a.opts.Now,
	}
}

// profile returns the route's profile, nil when the route is open.
func (pr *Profiles) profile(route string) (*compiled, *profile) {
	if pr == nil || pr.c == nil {
		return nil, nil
	}
	c := pr.c
	p, ok := c.routes[route]
	if !ok {
		p = c.def
	}
	if p == nil || p.mode == ModeOff {
		return c, nil
	}
	return c, p
}

// Enabled reports whether route authenticates its callers (mode required
// or optional) by the configuration in force.
func (a *Authenticator) Enabled(route string) bool { return a.Current().Enabled(route) }

// Enabled reports whether route authenticates its callers (mode required
// or optional).
func (p *Profiles) Enabled(route string) bool {
	_, rp := p.profile(route)
	return rp != nil
}

// protectedResource is the RFC 9728 section 2 document.
type protectedResource struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// Metadata returns the protected-resource metadata of route, whose public
// path is publicPath; ok is false when the route does not authenticate
// (the well-known URL then answers 404).
func (a *Authenticator) Metadata(route, publicPath string) (doc []byte, ok bool) {
	return a.Current().Metadata(route, publicPath)
}

// Metadata returns the protected-resource metadata of route, whose public
// path is publicPath; ok is false when the route does not authenticate.
func (pr *Profiles) Metadata(route, publicPath string) (doc []byte, ok bool) {
	c, p := pr.profile(route)
	if p == nil {
		return nil, false
	}
	md := protectedResource{
		Resource:               c.base + publicPath,
		ScopesSupported:        p.scopesSupported,
		BearerMethodsSupported: []string{"header"},
	}
	for _, is := range p.issuers {
		md.AuthorizationServers = append(md.AuthorizationServers, is.name)
	}
	b, err := json.Marshal(md)
	if err != nil {
		return nil, false
	}
	return b, true
}
