// Package upstreamcred is what the gateway's requests to a Tool Service or
// a federated MCP server carry by the config file's upstreamAuth
// (docs/decisions/0010-caller-identity-and-upstream-credentials.md,
// docs/decisions/0019-delegated-identity.md): a static credential, the
// caller's own token (opt-in), claims of the caller as headers, or a token
// obtained from an OAuth authorization server (oauth.go). A client's
// Authorization header never reaches an upstream unless its operator opts
// in: Envoy forwards the client's request headers on a routed call, so the
// routing mutation removes authorization (the MCP authorization
// specification forbids token passthrough).
//
// The package knows nothing of ext_proc: package extproc asks it for a
// call's headers (Auth.Headers), evicts a refused token (Token.Refused,
// Auth.Unauthorized) and sends the request again itself.
package upstreamcred

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// ServiceAuth is the upstreamAuth entry of one Tool Service.
type ServiceAuth struct {
	// Credential names an entry of the config file's credentials map whose
	// value is sent in Header, after Prefix. It is read at every call, so a
	// rotated file is used from the next call on.
	Credential string `json:"credential,omitempty"`
	// Header carries Credential, or the forwarded token (default
	// authorization).
	Header string `json:"header,omitempty"`
	// Prefix goes before the credential's value ("Bearer ").
	Prefix string `json:"prefix,omitempty"`
	// ForwardClaims sends claims of the authenticated caller, header name →
	// claim name. Only string, number and bool claims are sent; a missing
	// claim, another type, or a value with control characters or over
	// MaxClaimHeaderBytes sends no header.
	ForwardClaims map[string]string `json:"forwardClaims,omitempty"`
	// ForwardToken sends the client's own Authorization value, unchanged,
	// in Header. Off by default (token passthrough); exclusive with
	// Credential.
	ForwardToken bool `json:"forwardToken,omitempty"`
	// OAuth obtains the token sent in Header from an authorization server:
	// the caller's exchanged for the service, or the gateway's own
	// (oauth.go). Exclusive with Credential and ForwardToken.
	OAuth *OAuth `json:"oauth,omitempty"`
}

// Auth is the upstreamAuth configuration in force.
type Auth struct {
	// Services are the entries by Tool Service name.
	Services map[string]ServiceAuth
	// Credentials are the config file's credentials map.
	Credentials map[string]config.CredentialSource
	// oauth are the token clients of the oauth entries (oauth.go), built
	// with the configuration (Build, or BuildAfter when it is put in
	// force).
	oauth oauthSet
}

// MaxClaimHeaderBytes bounds a forwarded claim's header value.
const MaxClaimHeaderBytes = 1024

// defaultAuthHeader is ServiceAuth.Header's default.
const defaultAuthHeader = "authorization"

var authHeaderNameRE = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_` + "`" + `|~-]+$`)

// mcpParamPrefix starts the headers of a tool's x-mcp-header parameters
// (SEP-2243), which the gateway sets on a routed call.
const mcpParamPrefix = "mcp-param-"

// reservedUpstreamHeaders are set by the gateway or Envoy on a routed
// request, or belong to the connection: upstreamAuth must not replace them.
var reservedUpstreamHeaders = []string{
	"accept", "accept-encoding", "connection", "content-length", "content-type", "host", "keep-alive",
	"last-event-id", "mcp-method", "mcp-name", "mcp-protocol-version", "mcp-session-id",
	"proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
	"traceparent", "tracestate", "x-request-id", "x-forwarded-for", "x-forwarded-proto",
}

func (a ServiceAuth) header() string {
	if a.Header == "" {
		return defaultAuthHeader
	}
	return strings.ToLower(a.Header)
}

// Validate returns every problem of the configuration, each naming
// upstreamAuth.<service>.<field>.
func (u Auth) Validate() error {
	var errs []error
	bad := func(svc, field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("upstreamAuth.%s.%s: %s", svc, field, fmt.Sprintf(format, args...)))
	}
	checkName := func(svc, field, name string) bool {
		l := strings.ToLower(name)
		switch {
		case !authHeaderNameRE.MatchString(name):
			bad(svc, field, "%q is not a valid HTTP header name", name)
		case slices.Contains(reservedUpstreamHeaders, l):
			bad(svc, field, "%q is set by toolmesh or Envoy itself; not configurable", name)
		case strings.HasPrefix(l, wire.HeaderPrefix) || strings.HasPrefix(l, "x-envoy-") || strings.HasPrefix(l, mcpParamPrefix):
			bad(svc, field, "%q: the prefix is toolmesh's, Envoy's or MCP's own", name)
		default:
			return true
		}
		return false
	}
	for _, svc := range slices.Sorted(maps.Keys(u.Services)) {
		a := u.Services[svc]
		if a.Credential == "" && !a.ForwardToken && len(a.ForwardClaims) == 0 && a.OAuth == nil {
			bad(svc, "credential", "the entry sends nothing: set credential, oauth, forwardClaims or forwardToken")
		}
		if a.OAuth != nil {
			if a.Credential != "" || a.ForwardToken {
				bad(svc, "oauth", "exclusive with credential and forwardToken: all fill %s", a.header())
			}
			errs = append(errs, a.OAuth.validate(svc, u.Credentials)...)
		}
		checkName(svc, "header", a.header())
		if a.Credential != "" {
			if _, ok := u.Credentials[a.Credential]; !ok {
				bad(svc, "credential", "%q is not defined in credentials", a.Credential)
			}
			if a.ForwardToken {
				bad(svc, "forwardToken", "exclusive with credential: both fill %s", a.header())
			}
		}
		if a.Prefix != "" && a.Credential == "" {
			bad(svc, "prefix", "only used with credential")
		}
		if !config.ValidHeaderText(a.Prefix) {
			bad(svc, "prefix", "must not contain control characters")
		}
		seen := map[string]bool{}
		for _, h := range slices.Sorted(maps.Keys(a.ForwardClaims)) {
			field := "forwardClaims." + h
			if !checkName(svc, field, h) {
				continue
			}
			l := strings.ToLower(h)
			if seen[l] {
				bad(svc, field, "names the same header as another entry")
			}
			seen[l] = true
			if (a.Credential != "" || a.ForwardToken || a.OAuth != nil) && l == a.header() {
				bad(svc, field, "%q already carries the credential or token", h)
			}
			if a.ForwardClaims[h] == "" {
				bad(svc, field, "the claim name is empty")
			}
		}
	}
	return errors.Join(errs...)
}

// Normalized validates u and returns the copy a Runtime keeps: maps copied
// (the caller may reuse its own), forwardClaims header names lower case,
// the token clients (when built) shared. Errors name the configuration key
// to change.
func (u Auth) Normalized() (Auth, error) {
	if err := u.Validate(); err != nil {
		return Auth{}, err
	}
	c := Auth{Services: make(map[string]ServiceAuth, len(u.Services)),
		Credentials: make(map[string]config.CredentialSource, len(u.Credentials)), oauth: u.oauth}
	for k, v := range u.Services {
		claims := make(map[string]string, len(v.ForwardClaims))
		for h, cl := range v.ForwardClaims {
			claims[strings.ToLower(h)] = cl
		}
		v.ForwardClaims = claims
		c.Services[k] = v
	}
	maps.Copy(c.Credentials, u.Credentials)
	return c, nil
}

// Credentials are what one call carries by its service's upstreamAuth
// entry.
type Credentials struct {
	// Headers are the headers to set (lower-case names).
	Headers map[string]string
	// Token is the OAuth token among them, nil for none: a 401 of the
	// upstream evicts it (Token.Refused).
	Token *Token
	// Unforwarded are the forwardClaims entries (header → claim) the
	// caller has no sendable claim for: their headers are not set.
	Unforwarded map[string]string
}

// Headers returns the credentials a call to the Tool Service named
// service carries by its upstreamAuth entry. caller is the request's
// authenticated caller (nil: anonymous), clientAuth the client's
// Authorization value. An error (an unreadable credential, a token that
// cannot be obtained) means the call must not be sent: Reason gives its
// client-facing text.
func (u *Auth) Headers(ctx context.Context, service string, caller *identity.Caller, clientAuth string) (Credentials, error) {
	a, ok := u.Services[service]
	if !ok {
		return Credentials{}, nil
	}
	out := Credentials{Headers: map[string]string{}}
	switch {
	case a.Credential != "":
		v, err := u.Credentials[a.Credential].Read()
		if err != nil {
			return Credentials{}, fmt.Errorf("upstreamAuth.%s.credential %q: %w", service, a.Credential, err)
		}
		out.Headers[a.header()] = a.Prefix + v
	case a.ForwardToken:
		if clientAuth != "" && config.ValidHeaderText(clientAuth) {
			out.Headers[a.header()] = clientAuth
		}
	case a.OAuth != nil:
		v, tok, err := u.oauthCredential(ctx, service, *a.OAuth, caller)
		if err != nil {
			return Credentials{}, fmt.Errorf("upstreamAuth.%s.oauth: %w", service, err)
		}
		if v != "" {
			out.Headers[a.header()], out.Token = v, tok
		}
	}
	for h, claim := range a.ForwardClaims {
		if v, ok := claimHeader(caller, claim); ok {
			out.Headers[h] = v
		} else {
			if out.Unforwarded == nil {
				out.Unforwarded = map[string]string{}
			}
			out.Unforwarded[h] = claim
		}
	}
	return out, nil
}

// claimHeader is the header value of one claim of the caller: a string,
// number or bool, free of control characters and at most
// MaxClaimHeaderBytes long. A value that does not qualify is not cut or
// escaped but left out, so a header a Tool Service gets is always the claim.
func claimHeader(caller *identity.Caller, claim string) (string, bool) {
	if caller == nil {
		return "", false
	}
	var v string
	switch c := caller.Claims[claim].(type) {
	case string:
		v = c
	case float64:
		v = strconv.FormatFloat(c, 'f', -1, 64)
	case bool:
		v = strconv.FormatBool(c)
	case interface{ String() string }: // json.Number
		v = c.String()
	default:
		return "", false
	}
	if v == "" || len(v) > MaxClaimHeaderBytes || !config.ValidHeaderText(v) {
		return "", false
	}
	return v, true
}

// ClaimHeaders are the headers of service's forwardClaims.
func (u *Auth) ClaimHeaders(service string) []string {
	return slices.Sorted(maps.Keys(u.Services[service].ForwardClaims))
}

// Unset are the headers of service's upstreamAuth entry that set does not
// fill: they are removed from the routed request, so a client cannot send
// its own x-caller-sub where a claim was missing.
func (u *Auth) Unset(service string, set map[string]string) []string {
	a, ok := u.Services[service]
	if !ok {
		return nil
	}
	var out []string
	names := slices.Sorted(maps.Keys(a.ForwardClaims))
	if a.Credential != "" || a.ForwardToken || a.OAuth != nil {
		names = append(names, a.header())
	}
	for _, h := range names {
		if _, ok := set[h]; !ok && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// Reason is the client-facing reason of err from Headers: the class of a
// failed token request, never the authorization server's text or a token,
// or "its credentials cannot be read".
func Reason(err error) string {
	if r, ok := oauthReason(err); ok {
		return r
	}
	return "its credentials cannot be read"
}

// ListingCredentials returns the static credential header, or the
// gateway's own OAuth token, of service's upstreamAuth entry in u (none
// without an entry): what the gateway's own
// listing of a federated MCP server sends, besides the Portal's headers.
// Claims and forwarded tokens belong to a caller and are never part of it.
func ListingCredentials(u Auth, service string) (map[string]string, error) {
	a, ok := u.Services[service]
	if ok && a.OAuth != nil {
		// The service identity, whatever the mode: a listing has no caller.
		v, err := listingCredential(&u, service, *a.OAuth)
		if err != nil {
			return nil, fmt.Errorf("upstreamAuth.%s.oauth: %w", service, err)
		}
		if v == "" {
			return nil, nil
		}
		return map[string]string{a.header(): v}, nil
	}
	if !ok || a.Credential == "" {
		return nil, nil
	}
	src, ok := u.Credentials[a.Credential]
	if !ok {
		return nil, fmt.Errorf("upstreamAuth.%s.credential %q is not defined in credentials", service, a.Credential)
	}
	v, err := src.Read()
	if err != nil {
		return nil, fmt.Errorf("upstreamAuth.%s.credential %q: %w", service, a.Credential, err)
	}
	return map[string]string{a.header(): a.Prefix + v}, nil
}
