// Package identity holds who is calling: what the gateway knows of a
// request's caller once its credentials were checked. Authentication
// (extproc/authn, the mesh peer certificate) produces a Caller in the
// request-headers phase; authorization policies, approval binding and
// upstream credential forwarding read it. A Caller is per request, owned by
// the ext_proc stream handler, and never shared or mutated after it is set.
package identity

import (
	"strconv"
	"time"
)

// Caller is one request's authenticated caller. The zero value is an
// anonymous caller on a route that requires no token.
type Caller struct {
	// Authenticated is true when a bearer token was validated.
	Authenticated bool
	// Issuer, Subject and Audience are the token's iss, sub and aud.
	Issuer   string
	Subject  string
	Audience []string
	// Scopes are the token's granted scopes (the space-separated "scope"
	// claim, or "scp" as a list), in token order.
	Scopes []string
	// Claims are all the token's claims as decoded JSON (strings, float64,
	// bool, []any, map[string]any).
	Claims map[string]any
	// Expiry is the token's exp; zero when it has none.
	Expiry time.Time
	// MeshID is the caller's mesh identity, the SPIFFE ID (URI SAN) of the
	// downstream mTLS peer certificate as Envoy hands it to ext_proc; empty
	// when the connection is not mTLS or carries no URI SAN.
	MeshID string
	// Token is the raw bearer token. It is only ever forwarded to a Tool
	// Service whose operator opted in, and never logged: String redacts it.
	Token string
}

// Anonymous reports whether nothing is known of the caller.
func (c *Caller) Anonymous() bool {
	return c == nil || (!c.Authenticated && c.MeshID == "")
}

// HasScope reports whether the token granted scope s.
func (c *Caller) HasScope(s string) bool {
	if c == nil {
		return false
	}
	for _, g := range c.Scopes {
		if g == s {
			return true
		}
	}
	return false
}

// Key names the caller unambiguously for limits and keys: issuer,
// subject and mesh identity, each quoted (ASCII only, so it is a valid
// header value); "" for an anonymous caller. The same subject at two
// issuers is two callers.
func (c *Caller) Key() string {
	if c.Anonymous() {
		return ""
	}
	var iss, sub string
	if c.Authenticated {
		iss, sub = c.Issuer, c.Subject
	}
	return "iss=" + strconv.QuoteToASCII(iss) + " sub=" + strconv.QuoteToASCII(sub) + " mesh=" + strconv.QuoteToASCII(c.MeshID)
}

// String names the caller for logs and audit events, never with the token.
func (c *Caller) String() string {
	switch {
	case c.Anonymous():
		return "anonymous"
	case c.Authenticated && c.MeshID != "":
		return c.Subject + " via " + c.MeshID
	case c.Authenticated:
		return c.Subject
	default:
		return c.MeshID
	}
}
