// Package oauthclient obtains OAuth 2.0 access tokens for upstreams on the
// gateway's behalf or on a caller's: client credentials (RFC 6749 section
// 4.4) and token exchange (RFC 8693), with the token endpoint configured or
// discovered from authorization server metadata (RFC 8414, OpenID Connect
// discovery as fallback), client authentication by client_secret_basic,
// client_secret_post or private_key_jwt (RFC 7523), and the client side of
// protected resource metadata (RFC 9728) for OAuth-protected MCP servers.
//
// Tokens are cached per Client, keyed on subject, audience, resource and
// scopes, until their expiry minus a skew; concurrent misses for one key
// make one request; the cache is bounded. Lookups do not lock.
//
// Nothing this package returns or logs contains a token or a secret: errors
// carry the authorization server's error code and a reason class only.
//
// It imports neither extproc nor registry; both may import it.
package oauthclient
