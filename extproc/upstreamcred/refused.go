package upstreamcred

import (
	"context"

	"github.com/toolmesh/toolmesh/internal/oauthclient"
)

// A 401 from an upstream whose request carried an OAuth token
// (docs/identity.md, "When the upstream answers 401"). A 401 says the
// server refused the request's credentials before doing anything with it
// (RFC 9110 section 15.5.2: the request "has not been applied"), so the
// request may be sent once more with a new token without running it twice.
// This package evicts the refused token, or discovers the authorization
// server from the challenge; package extproc holds the request and sends it
// again.

// Refused evicts the token: the upstream answered 401 to it, and the next
// request for it gets a new one. Nil-safe.
func (t *Token) Refused() {
	if t != nil {
		t.client.Evict(t.req)
	}
}

// Unauthorized is told that a call to service at url, which carried the
// token used (nil: none of this package's), was answered 401 with
// challenges (the WWW-Authenticate values). It evicts used; a call that
// carried none because its authorization server was not discovered yet
// discovers it from the challenge (RFC 9728, for a federated MCP server).
// It reports whether the call may be sent once more with the credentials
// Headers now gives; false for an entry without oauth, or a call without
// a token whose authorization server is known (the 401 is the server's
// answer). err says why discovery failed.
func (u *Auth) Unauthorized(ctx context.Context, service, url string, challenges []string, used *Token) (bool, error) {
	a, ok := u.Services[service]
	if !ok || a.OAuth == nil {
		return false, nil
	}
	if used != nil {
		used.Refused()
		return true, nil
	}
	so, err := u.serviceOAuth(service)
	if err != nil {
		return false, err
	}
	if c, _ := so.client(); c != nil {
		return false, nil
	}
	if err := so.discover(ctx, service, url, challenges); err != nil {
		return false, err
	}
	return true, nil
}

// Client is the token client of service's oauth entry in force: nil
// without one, or while its authorization server is not discovered yet.
// Configurations built from one another (Build, BuildAfter) share the
// client of an unchanged entry, and with it its cached tokens.
func (u *Auth) Client(service string) *oauthclient.Client {
	so := u.oauth[service]
	if so == nil {
		return nil
	}
	c, _ := so.client()
	return c
}
