package extproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// Upstream credentials (docs/decisions/0010-caller-identity-and-upstream-credentials.md).
// A client's Authorization header never reaches a Tool Service or a
// federated MCP server unless its operator opts in: Envoy forwards the
// client's request headers on a routed call, so the routing mutation
// removes authorization (the MCP authorization specification forbids token
// passthrough). What a service receives instead is configured per Tool
// Service name by the config file's upstreamAuth.

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
	// (upstreamoauth.go). Exclusive with Credential and ForwardToken.
	OAuth *OAuthAuth `json:"oauth,omitempty"`
}

// UpstreamAuth is the upstreamAuth configuration in force.
type UpstreamAuth struct {
	// Services are the entries by Tool Service name.
	Services map[string]ServiceAuth
	// Credentials are the config file's credentials map.
	Credentials map[string]config.CredentialSource
}

// The call outcome and details of a call whose upstreamAuth credential
// cannot be read: it is not sent.
const (
	callNoCredentials    = "no_credentials"
	detailsNoCredentials = "toolmesh_no_credentials"
)

// MaxClaimHeaderBytes bounds a forwarded claim's header value.
const MaxClaimHeaderBytes = 1024

// defaultAuthHeader is ServiceAuth.Header's default.
const defaultAuthHeader = "authorization"

var authHeaderNameRE = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_` + "`" + `|~-]+$`)

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
func (u UpstreamAuth) Validate() error {
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

// upstreamCredentials returns the headers (lower-case names) a call to the
// Tool Service named service carries by its upstreamAuth entry, and
// whether the entry forwards the client's token. An error (an unreadable
// credential) means the call must not be sent.
func (x *request) upstreamCredentials(service string) (map[string]string, error) {
	u := &x.rt.UpstreamAuth
	a, ok := u.Services[service]
	if !ok {
		return nil, nil
	}
	out := map[string]string{}
	switch {
	case a.Credential != "":
		v, err := u.Credentials[a.Credential].Read()
		if err != nil {
			return nil, fmt.Errorf("upstreamAuth.%s.credential %q: %w", service, a.Credential, err)
		}
		out[a.header()] = a.Prefix + v
	case a.ForwardToken:
		if v := firstHeader(x.headers, "authorization"); v != "" && config.ValidHeaderText(v) {
			out[a.header()] = v
		}
	case a.OAuth != nil:
		var iss, sub, tok string
		if x.caller != nil {
			iss, sub, tok = x.caller.Issuer, x.caller.Subject, x.caller.Token
		}
		r, err := oauthRequest(*a.OAuth, iss, sub, tok, false)
		if err == nil {
			out[a.header()], err = oauthHeader(x.ctx, service, *a.OAuth, u.Credentials, r)
		}
		if err != nil {
			return nil, fmt.Errorf("upstreamAuth.%s.oauth: %w", service, err)
		}
	}
	for h, claim := range a.ForwardClaims {
		if v, ok := x.claimHeader(claim); ok {
			out[h] = v
		} else if x.caller != nil {
			x.s.log.LogAttrs(x.ctx, slog.LevelDebug, "claim not forwarded", slog.String("request_id", x.requestID),
				slog.String("service", service), slog.String("header", h), slog.String("claim", claim))
		}
	}
	return out, nil
}

// claimHeader is the header value of one claim of the caller: a string,
// number or bool, free of control characters and at most
// MaxClaimHeaderBytes long. A value that does not qualify is not cut or
// escaped but left out, so a header a Tool Service gets is always the claim.
func (x *request) claimHeader(claim string) (string, bool) {
	if x.caller == nil {
		return "", false
	}
	var v string
	switch c := x.caller.Claims[claim].(type) {
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

// noCredentials answers a call whose upstreamAuth credential cannot be
// read: it is not sent without it.
func (x *request) noCredentials(call *mcp.Call, service string, err error) *extprocv3.ProcessingResponse {
	x.s.log.LogAttrs(x.ctx, slog.LevelWarn, "tool call: no upstream credentials", slog.String("request_id", x.requestID),
		slog.String("route", x.routeKey), slog.String("service", service), slog.String("error", err.Error()))
	x.callOutcome = callNoCredentials
	reason := "its credentials cannot be read"
	if r, ok := oauthReason(err); ok {
		reason = r
	}
	return x.answer(&mcp.Reply{Status: 200, Body: x.s.proto.ToolError(call,
		"the Tool Service "+service+" is not available: "+reason)}, outcomeAnswered, detailsNoCredentials)
}

// claimHeaderNames are the headers of service's forwardClaims.
func (x *request) claimHeaderNames(service string) []string {
	u := &x.rt.UpstreamAuth
	return slices.Sorted(maps.Keys(u.Services[service].ForwardClaims))
}

// unsetAuthHeaders are the headers of service's upstreamAuth entry that
// set does not fill: they are removed from the routed request, so a
// client cannot send its own x-caller-sub where a claim was missing.
func (x *request) unsetAuthHeaders(service string, set map[string]string) []string {
	u := &x.rt.UpstreamAuth
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

// ListingCredentials returns the static credential header, or the
// gateway's own OAuth token, of service's
// upstreamAuth entry in u (nil u or entry: none): what the gateway's own
// listing of a federated MCP server sends, besides the Portal's headers.
// Claims and forwarded tokens belong to a caller and are never part of it.
func ListingCredentials(u UpstreamAuth, service string) (map[string]string, error) {
	a, ok := u.Services[service]
	if ok && a.OAuth != nil {
		// The service identity, whatever the mode: a listing has no caller.
		r, _ := oauthRequest(*a.OAuth, "", "", "", true)
		v, err := oauthHeader(context.Background(), service, *a.OAuth, u.Credentials, r)
		if err != nil {
			return nil, fmt.Errorf("upstreamAuth.%s.oauth: %w", service, err)
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
