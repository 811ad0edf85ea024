package authn

import (
	"context"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/mcp"
)

// Result labels: the result label of toolmesh_auth_requests_total, a small
// fixed set (docs/metrics.md).
const (
	ResultOK                = "ok"                 // a valid token
	ResultAnonymous         = "anonymous"          // optional mode, no token
	ResultMissing           = "missing_token"      // 401 without an error code
	ResultInvalid           = "invalid_token"      // 401 invalid_token
	ResultInsufficientScope = "insufficient_scope" // 403
	ResultInvalidRequest    = "invalid_request"    // 400: token in the query, several Authorization headers
	ResultUnavailable       = "unavailable"        // 503: no key of the issuer was ever fetched
)

// Request is what authentication reads of an HTTP request.
type Request struct {
	// Route is the route key; PublicPath its public path (/mcp/core).
	Route, PublicPath string
	// Authorization is the first Authorization header value;
	// AuthorizationCount how many there were.
	Authorization      string
	AuthorizationCount int
	// Query is the raw query of :path (after '?'), "" for none.
	Query string
}

// Result is the outcome of Authenticate. Status 0 means go on, with Caller
// set when a token was validated (nil: anonymous on an optional or open
// route). Otherwise the request is answered with Status, Challenge as its
// WWW-Authenticate header (empty for 503), and Message, a fixed text that
// never carries token content.
type Result struct {
	Caller    *identity.Caller
	Status    int
	Challenge string
	Message   string
	// Label is the metric result; "" when the route does not authenticate.
	Label string
}

// Reply is the answer to a refused request (Status not 0): the JSON-RPC
// error with Message, WWW-Authenticate with Challenge, and Retry-After for
// a 503 (the keys could not be fetched).
func (r *Result) Reply() *mcp.Reply {
	reply := mcp.ErrorReply(r.Status, json.RawMessage("null"), mcp.CodeInvalidRequest, r.Message, nil)
	if r.Challenge != "" {
		reply.Headers = append(reply.Headers, mcp.Header{Key: "www-authenticate", Value: r.Challenge})
	}
	if r.Status == 503 {
		reply.Headers = append(reply.Headers, mcp.Header{Key: "retry-after", Value: "5"})
	}
	return reply
}

// failure is why a token was refused: the RFC 6750 error code and a fixed
// description.
type failure struct {
	status int
	code   string // "" (no credentials), invalid_request, invalid_token, insufficient_scope
	desc   string
	label  string
}

var (
	errMissing        = &failure{401, "", "a bearer token is required", ResultMissing}
	errQueryToken     = &failure{400, "invalid_request", "access tokens are accepted in the Authorization header only", ResultInvalidRequest}
	errManyHeaders    = &failure{400, "invalid_request", "more than one Authorization header", ResultInvalidRequest}
	errTooLarge       = &failure{401, "invalid_token", "the token is too large", ResultInvalid}
	errMalformed      = &failure{401, "invalid_token", "the token is not a signed JWT", ResultInvalid}
	errAlgorithm      = &failure{401, "invalid_token", "the token's signature algorithm is not accepted", ResultInvalid}
	errClaims         = &failure{401, "invalid_token", "the token's claims are malformed", ResultInvalid}
	errTyp            = &failure{401, "invalid_token", "the token is not typed as an access token (at+jwt)", ResultInvalid}
	errIssuer         = &failure{401, "invalid_token", "the token's issuer is not trusted", ResultInvalid}
	errUnknownKey     = &failure{401, "invalid_token", "the token's signing key is unknown", ResultInvalid}
	errSignature      = &failure{401, "invalid_token", "the token's signature is invalid", ResultInvalid}
	errExpired        = &failure{401, "invalid_token", "the token has expired", ResultInvalid}
	errNoExpiry       = &failure{401, "invalid_token", "the token has no expiry", ResultInvalid}
	errNotYetValid    = &failure{401, "invalid_token", "the token is not valid yet", ResultInvalid}
	errAudience       = &failure{401, "invalid_token", "the token is not for this resource", ResultInvalid}
	errScope          = &failure{403, "insufficient_scope", "the token lacks a required scope", ResultInsufficientScope}
	errKeysNotFetched = &failure{503, "", "the authorization server's keys are not available yet", ResultUnavailable}
)

// Authenticate validates the request's credentials against its route's
// profile. ctx bounds the only wait there can be: a refetch of the issuer's
// keys for a kid the cache does not hold.
func (a *Authenticator) Authenticate(ctx context.Context, r *Request) Result {
	return a.Current().Authenticate(ctx, r)
}

// Authenticate validates the request's credentials against its route's
// profile in pr.
func (pr *Profiles) Authenticate(ctx context.Context, r *Request) Result {
	c, p := pr.profile(r.Route)
	if p == nil {
		return Result{}
	}
	caller, f := pr.a.check(ctx, c, p, r)
	if f == nil {
		if caller == nil {
			return Result{Label: ResultAnonymous}
		}
		return Result{Caller: caller, Label: ResultOK}
	}
	res := Result{Status: f.status, Message: f.desc, Label: f.label}
	if f.status != 503 {
		res.Challenge = challenge(c.base, r.PublicPath, f, p.scopeParam)
	}
	return res
}

func (a *Authenticator) check(ctx context.Context, c *compiled, p *profile, r *Request) (*identity.Caller, *failure) {
	if r.Query != "" && queryHasToken(r.Query) {
		return nil, errQueryToken
	}
	if r.AuthorizationCount > 1 {
		return nil, errManyHeaders
	}
	token, ok := bearer(r.Authorization)
	if !ok {
		if p.mode == ModeOptional {
			return nil, nil
		}
		return nil, errMissing
	}
	return a.validate(ctx, c, p, token, r.PublicPath)
}

// bearer extracts the token of "Bearer <b64token>" (RFC 6750 section 2.1;
// the scheme is case-insensitive, RFC 9110 section 11.1). Any other scheme,
// or none, is no bearer token.
func bearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	tok := strings.TrimLeft(h[len(scheme):], " ")
	return tok, tok != ""
}

// queryHasToken reports whether the query carries an access_token
// parameter (RFC 6750 section 2.3), which is refused, never used.
func queryHasToken(q string) bool {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, _, _ := strings.Cut(kv, "=")
		if strings.IndexByte(k, '%') >= 0 || strings.IndexByte(k, '+') >= 0 {
			if u, err := url.QueryUnescape(k); err == nil {
				k = u
			}
		}
		if k == "access_token" {
			return true
		}
	}
	return false
}

// validate checks one bearer token. Claims are decoded from the payload
// before the signature is checked only to pick the issuer whose keys verify
// it; nothing of them is trusted or returned unless the signature holds.
func (a *Authenticator) validate(ctx context.Context, c *compiled, p *profile, token, publicPath string) (*identity.Caller, *failure) {
	if len(token) > p.maxBytes {
		return nil, errTooLarge
	}
	claims, iss, f := a.verifiedClaims(ctx, p, token)
	if f != nil {
		return nil, f
	}

	now := a.opts.Now()
	exp, ok, bad := numericDate(claims, "exp")
	switch {
	case bad:
		return nil, errClaims
	case !ok:
		return nil, errNoExpiry
	case !now.Before(exp.Add(p.skew)):
		return nil, errExpired
	}
	if nbf, ok, bad := numericDate(claims, "nbf"); bad {
		return nil, errClaims
	} else if ok && now.Add(p.skew).Before(nbf) {
		return nil, errNotYetValid
	}
	if iat, ok, bad := numericDate(claims, "iat"); bad {
		return nil, errClaims
	} else if ok && now.Add(p.skew).Before(iat) {
		return nil, errNotYetValid // issued in the future
	}
	aud, ok := stringOrList(claims["aud"])
	if !ok {
		return nil, errClaims
	}
	if !audienceMatches(aud, p.audience, c.base, publicPath) {
		return nil, errAudience
	}
	scopes, ok := scopesOf(claims)
	if !ok {
		return nil, errClaims
	}
	sub, _ := claims["sub"].(string)
	caller := &identity.Caller{
		Authenticated: true, Issuer: iss, Subject: sub, Audience: aud,
		Scopes: scopes, Claims: claims, Expiry: exp, Token: token,
	}
	for _, s := range p.scopes {
		if !caller.HasScope(s) {
			return nil, errScope
		}
	}
	return caller, nil
}

// verifiedClaims returns the claims of a token whose signature one of the
// profile's issuers verifies, from the verified-token cache when the same
// key set already verified it for an issuer and algorithm this profile
// accepts, else by parsing and verifying it (and remembering it).
func (a *Authenticator) verifiedClaims(ctx context.Context, p *profile, token string) (map[string]any, string, *failure) {
	if v := a.verified.get(token); v != nil {
		iss, _ := v.claims["iss"].(string)
		for _, is := range p.issuers {
			if is.keys == v.src && is.name == iss && slices.Contains(is.algs, v.alg) && slices.Contains(p.algs, v.alg) &&
				(!is.requireTyp || isAccessTokenTyp(v.typ)) {
				return v.claims, iss, nil
			}
		}
	}
	jws, err := parseCompact(token)
	if err != nil {
		return nil, "", errMalformed
	}
	if !slices.Contains(p.algs, jws.alg) {
		return nil, "", errAlgorithm
	}
	var claims map[string]any
	if err := json.Unmarshal(jws.payload, &claims); err != nil || claims == nil {
		return nil, "", errClaims
	}
	iss, _ := claims["iss"].(string)
	var is *issuer
	for _, cand := range p.issuers {
		if cand.name == iss {
			is = cand
			break
		}
	}
	if is == nil {
		return nil, "", errIssuer
	}
	if !slices.Contains(is.algs, jws.alg) {
		return nil, "", errAlgorithm
	}
	if is.requireTyp && !isAccessTokenTyp(jws.typ) {
		return nil, "", errTyp
	}
	ks, f := a.verify(ctx, is, jws)
	if f != nil {
		return nil, "", f
	}
	if exp, ok, bad := numericDate(claims, "exp"); ok && !bad && ks != nil {
		a.verified.put(token, &verifiedToken{src: is.keys, keys: ks, alg: jws.alg, typ: jws.typ, claims: claims, exp: exp}, a.opts.Now())
	}
	return claims, iss, nil
}

// verify checks the signature with the issuer's cached keys. A kid the
// cache lacks triggers one refetch (single flight, rate limited) before
// the token is refused; so does a cache that was never filled, which is a
// 503 if it stays empty: the gateway, not the token, is at fault.
// It returns the key set whose key verified the token.
func (a *Authenticator) verify(ctx context.Context, is *issuer, jws *compactJWS) (*keySet, *failure) {
	ks := is.keys.current()
	if ks == nil {
		is.keys.wait(ctx)
		if ks = is.keys.keys.Load(); ks == nil {
			return nil, errKeysNotFetched
		}
	}
	cands := ks.all
	if jws.kid != "" {
		cands = ks.byKID[jws.kid]
		if cands == nil {
			is.keys.wait(ctx)
			if ks2 := is.keys.keys.Load(); ks2 != nil {
				ks, cands = ks2, ks2.byKID[jws.kid]
			}
			if cands == nil {
				return nil, errUnknownKey
			}
		}
	}
	fits := false
	for _, k := range cands {
		if !keyFits(k, jws.alg) {
			continue
		}
		fits = true
		if jws.verifySig(jws.alg, k.Key) {
			return ks, nil
		}
	}
	if !fits {
		return nil, errAlgorithm // no key of this kid is for this algorithm
	}
	return nil, errSignature
}

// numericDate reads a NumericDate claim (RFC 7519 section 2): ok when
// present, bad when present but not a finite number.
func numericDate(claims map[string]any, name string) (t time.Time, ok, bad bool) {
	v, present := claims[name]
	if !present {
		return time.Time{}, false, false
	}
	f, isNum := v.(float64)
	if !isNum || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return time.Time{}, false, true
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, false
}

// stringOrList reads aud-style claims: a string or a list of strings.
// Absent is an empty list.
func stringOrList(v any) ([]string, bool) {
	switch t := v.(type) {
	case nil:
		return nil, true
	case string:
		return []string{t}, true
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// audienceMatches: aud contains the configured audience, or else the
// route's canonical resource URI base+publicPath (RFC 8707), compared
// without building the string.
func audienceMatches(aud []string, audience, base, publicPath string) bool {
	for _, a := range aud {
		if audience != "" {
			if a == audience {
				return true
			}
			continue
		}
		// Scheme and host compare case-insensitively (MCP authorization,
		// "Canonical Server URI"), the path exactly.
		if len(a) == len(base)+len(publicPath) && strings.EqualFold(a[:len(base)], base) && a[len(base):] == publicPath {
			return true
		}
	}
	return false
}

// scopesOf reads the space-separated scope claim (RFC 8693 section 4.2,
// RFC 9068) or, without it, scp as a list (or a string).
func scopesOf(claims map[string]any) ([]string, bool) {
	if v, ok := claims["scope"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return nil, false
		}
		return strings.Fields(s), true
	}
	if v, ok := claims["scp"]; ok {
		if s, isStr := v.(string); isStr {
			return strings.Fields(s), true
		}
		return stringOrList(v)
	}
	return nil, true
}

// challenge is the WWW-Authenticate value (RFC 6750 section 3): no error
// code when the request had no credentials (section 3.1), the scope the
// route needs when it is a scope problem or no token came (MCP
// authorization, "Protected Resource Metadata Discovery Requirements"),
// and always resource_metadata (RFC 9728 section 5.1).
func challenge(base, publicPath string, f *failure, scope string) string {
	var b strings.Builder
	b.Grow(128)
	b.WriteString("Bearer ")
	if f.code != "" {
		b.WriteString(`error="`)
		b.WriteString(f.code)
		b.WriteString(`", error_description="`)
		b.WriteString(f.desc)
		b.WriteString(`", `)
	}
	if scope != "" && (f.code == "" || f.code == "insufficient_scope") {
		b.WriteString(`scope="`)
		b.WriteString(scope)
		b.WriteString(`", `)
	}
	b.WriteString(`resource_metadata="`)
	b.WriteString(base)
	b.WriteString(MetadataPrefix)
	b.WriteString(publicPath)
	b.WriteString(`"`)
	return b.String()
}
