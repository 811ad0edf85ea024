package registry

import (
	"context"
	"time"
)

// MaxListingFreshness caps how long a federated MCP server's listing counts
// as fresh, whatever ttlMs it announced, so a server's new tools show within
// the hour even if it asked clients to cache for a day.
const MaxListingFreshness = time.Hour

// MCPLister lists a federated MCP server (protocol mcp) into a Manifest.
// The default is fetch.NewMCPLister (registry/fetch); tests may substitute their own.
type MCPLister interface {
	List(ctx context.Context, svc ToolService) (*Manifest, Freshness, error)
}

// Freshness is what a listing said about how long it may be reused.
type Freshness struct {
	TTL         time.Duration // smallest ttlMs of the listing's results
	HasTTL      bool          // some result carried ttlMs (stateless era only)
	CacheScope  string        // "public", "private" or ""
	ListChanged bool          // a listed capability declared listChanged
}

// freshFor is the re-listing rule (docs/decisions/0006-federated-mcp-servers.md):
// a listing is reused while its ttlMs says it is fresh, at most
// MaxListingFreshness. Without ttlMs (every legacy server), with ttlMs 0,
// or when the server declares listChanged (its lists change while it runs,
// and the gateway holds no stream to hear about it) the listing is stale at
// once: the server is listed again at every refresh cycle, as a native
// manifest is fetched. cacheScope does not change the rule: the gateway
// lists with one set of credentials, its own, and serves that one view.
func (f Freshness) FreshFor() time.Duration {
	if !f.HasTTL || f.ListChanged {
		return 0
	}
	return min(f.TTL, MaxListingFreshness)
}
