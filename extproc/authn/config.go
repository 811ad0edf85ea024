package authn

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// Mode says what a route does with bearer tokens.
type Mode string

// Modes of a profile.
const (
	// ModeRequired rejects a request without a valid token (401).
	ModeRequired Mode = "required"
	// ModeOptional validates a token when one is sent; a request without
	// one goes on anonymous.
	ModeOptional Mode = "optional"
	// ModeOff ignores tokens: the route is open.
	ModeOff Mode = "off"
)

// Limits and defaults of a profile.
const (
	DefaultClockSkew     = 60 * time.Second
	MaxClockSkew         = 5 * time.Minute
	DefaultMaxTokenBytes = 8192
	minMaxTokenBytes     = 256
	maxMaxTokenBytes     = 64 << 10 // Envoy's default max_request_headers_kb is 60 KiB
)

// supportedAlgorithms are the JWS algorithms a profile may allow: asymmetric
// signatures only. "none" and the HMAC family (HS*) are never accepted: a
// resource server holding a shared secret could mint tokens, and HS* with a
// public key as the secret is the classic key-confusion forgery.
var supportedAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Config is the auth block of the toolmesh configuration: a default profile
// and per-route profiles, each replacing the default as a whole.
type Config struct {
	Default *Profile            `json:"default,omitempty"`
	Routes  map[string]*Profile `json:"routes,omitempty"`
}

// Profile is how one route authenticates its callers.
type Profile struct {
	// Mode is required (the default), optional or off.
	Mode Mode `json:"mode,omitempty"`
	// Issuers are the authorization servers whose tokens are accepted.
	Issuers []Issuer `json:"issuers,omitempty"`
	// Audience, when set, is the aud a token must carry instead of the
	// route's canonical resource URI (RFC 8707).
	Audience string `json:"audience,omitempty"`
	// Scopes are the scopes every request needs (403 insufficient_scope).
	Scopes []string `json:"scopes,omitempty"`
	// ScopesSupported are advertised in the protected-resource metadata;
	// unset: Scopes.
	ScopesSupported []string `json:"scopesSupported,omitempty"`
	// ClockSkew is the leeway on exp, nbf and iat (default 60s when unset,
	// at most 5m); an explicit 0 means none.
	ClockSkew *Duration `json:"clockSkew,omitempty"`
	// MaxTokenBytes rejects longer tokens before parsing (default 8192).
	MaxTokenBytes int `json:"maxTokenBytes,omitempty"`
}

// Issuer is one trusted authorization server.
type Issuer struct {
	// Issuer is the exact iss of its tokens, and where its metadata is
	// discovered (RFC 8414, then OpenID Connect Discovery).
	Issuer string `json:"issuer"`
	// JWKSURL, when set, is fetched instead of the metadata's jwks_uri.
	JWKSURL string `json:"jwksUrl,omitempty"`
	// JWKSFile, when set, is a local JWKS read instead of fetching one.
	JWKSFile string `json:"jwksFile,omitempty"`
	// Algorithms is the allow-list of JWS algorithms (default: every
	// asymmetric one supported).
	Algorithms []string `json:"algorithms,omitempty"`
	// RequireAccessTokenTyp refuses a token of this issuer whose JWS header
	// typ is not "at+jwt" (RFC 9068 section 4), so an ID token or another
	// JWT the issuer signs is never taken for an access token. Off by
	// default: many providers issue access tokens typed "JWT" or untyped.
	RequireAccessTokenTyp bool `json:"requireAccessTokenTyp,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("60s").
type Duration time.Duration

// UnmarshalJSON accepts a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"60s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// mode is the profile's mode with the default applied.
func (p *Profile) mode() Mode {
	if p.Mode == "" {
		return ModeRequired
	}
	return p.Mode
}

// Validate checks the resourceBase and auth keys together and reports every
// problem, each naming the key as spelled in the configuration file.
func Validate(resourceBase string, c *Config) error {
	var errs []error
	if resourceBase != "" {
		if err := checkResourceBase(resourceBase); err != nil {
			errs = append(errs, fmt.Errorf("resourceBase: %w", err))
		}
	}
	if c == nil {
		return errors.Join(errs...)
	}
	needBase := false
	check := func(key string, p *Profile) {
		if p == nil {
			errs = append(errs, fmt.Errorf("%s: must not be empty", key))
			return
		}
		if err := p.validate(key); err != nil {
			errs = append(errs, err)
		}
		if p.mode() != ModeOff {
			needBase = true
		}
	}
	if c.Default != nil {
		check("auth.default", c.Default)
	}
	keys := make([]string, 0, len(c.Routes))
	for k := range c.Routes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" {
			errs = append(errs, errors.New("auth.routes: a route key must not be empty"))
			continue
		}
		check("auth.routes."+k, c.Routes[k])
	}
	if needBase && resourceBase == "" {
		errs = append(errs, errors.New("resourceBase: must be set when auth has a profile that is not mode off (it makes each route's canonical resource URI)"))
	}
	return errors.Join(errs...)
}

func (p *Profile) validate(key string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", key, field, fmt.Sprintf(format, args...)))
	}
	switch p.mode() {
	case ModeRequired, ModeOptional:
		if len(p.Issuers) == 0 {
			bad("issuers", "mode %s needs at least one issuer", p.mode())
		}
	case ModeOff:
	default:
		bad("mode", "%q is not required, optional or off", p.Mode)
	}
	seen := map[string]bool{}
	for i, is := range p.Issuers {
		f := fmt.Sprintf("issuers[%d]", i)
		if err := checkURL(is.Issuer); err != nil {
			bad(f+".issuer", "%v", err)
		}
		if seen[is.Issuer] {
			bad(f+".issuer", "%q is listed twice", is.Issuer)
		}
		seen[is.Issuer] = true
		if is.JWKSURL != "" && is.JWKSFile != "" {
			bad(f, "jwksUrl and jwksFile are exclusive")
		}
		if is.JWKSFile != "" {
			if raw, err := os.ReadFile(is.JWKSFile); err != nil {
				bad(f+".jwksFile", "%v", err)
			} else if _, err := parseJWKS(raw, slog.New(slog.DiscardHandler), is.Issuer); err != nil {
				bad(f+".jwksFile", "%s: %v", is.JWKSFile, err)
			}
		}
		if is.JWKSURL != "" {
			if err := checkURL(is.JWKSURL); err != nil {
				bad(f+".jwksUrl", "%v", err)
			}
		}
		for _, a := range is.Algorithms {
			if !slices.Contains(supportedAlgorithms, a) {
				bad(f+".algorithms", "%q is not one of %s (none and HS* are never accepted)", a, strings.Join(supportedAlgorithms, ", "))
			}
		}
	}
	if p.Audience != "" && strings.TrimSpace(p.Audience) != p.Audience {
		bad("audience", "%q has surrounding spaces", p.Audience)
	}
	for _, list := range []struct {
		field  string
		scopes []string
	}{{"scopes", p.Scopes}, {"scopesSupported", p.ScopesSupported}} {
		for i, s := range list.scopes {
			if !validScope(s) {
				bad(fmt.Sprintf("%s[%d]", list.field, i), "%q is not a scope token (RFC 6749 section 3.3)", s)
			}
		}
	}
	if d := p.ClockSkew; d != nil && (time.Duration(*d) < 0 || time.Duration(*d) > MaxClockSkew) {
		bad("clockSkew", "%s is not between 0 and %s", time.Duration(*d), MaxClockSkew)
	}
	if n := p.MaxTokenBytes; n != 0 && (n < minMaxTokenBytes || n > maxMaxTokenBytes) {
		bad("maxTokenBytes", "%d is not between %d and %d", n, minMaxTokenBytes, maxMaxTokenBytes)
	}
	return errors.Join(errs...)
}

// checkResourceBase accepts scheme://host[:port] with no path, query or
// fragment: the route's public path is appended to it.
func checkResourceBase(s string) error {
	if err := checkURL(s); err != nil {
		return err
	}
	u, _ := url.Parse(s)
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q must be scheme://host[:port] with no path, query or user info", s)
	}
	return nil
}

// checkURL accepts an https URL, or http on a loopback host (development
// and tests): tokens and keys must not travel in clear over a network.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute URL with a host", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return fmt.Errorf("%q: http is allowed for loopback hosts only; use https", s)
		}
	default:
		return fmt.Errorf("%q: the scheme must be https", s)
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validScope: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c == 0x22 || c == 0x5c || c > 0x7e {
			return false
		}
	}
	return true
}
