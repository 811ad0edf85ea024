package registry

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// MaxListingFreshness caps how long a federated MCP server's listing counts
// as fresh, whatever ttlMs it announced, so a server's new tools show within
// the hour even if it asked clients to cache for a day.
const MaxListingFreshness = time.Hour

// MCPLister lists a federated MCP server (protocol mcp) into a Manifest.
// The default is [NewMCPLister]; tests may substitute their own.
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

// HTTPLister lists MCP servers over Streamable HTTP with [upstream.Client],
// sending each service's headers with the values of the credentials they
// name.
type HTTPLister struct {
	client *upstream.Client
	creds  map[string]config.CredentialSource
	// resolved are the header values each service was last listed with,
	// for the call path (UpstreamHeaders). They live only in this map:
	// never in a snapshot, the store, xDS, logs or /health.
	resolved sync.Map // service name → resolvedHeaders
	// listingHeaders, when set, gives headers a listing sends on top of
	// the Portal's (the config file's upstreamAuth credential); they win
	// for the same header name. Set by SetListingHeaders.
	listingHeaders atomic.Pointer[func(service string) (map[string]string, error)]
}

// SetListingHeaders makes every later listing of a service also send the
// headers f returns for its name, replacing a Portal header of the same
// name (case-insensitively). They are not part of UpstreamHeaders: the
// call path applies its own.
func (h *HTTPLister) SetListingHeaders(f func(service string) (map[string]string, error)) {
	h.listingHeaders.Store(&f)
}

// resolvedHeaders are one service's header values and the definition they
// were resolved for.
type resolvedHeaders struct {
	spec   map[string]HeaderValue
	values map[string]string
}

// UpstreamHeaders returns the values of svc's headers: the ones its last
// listing used, or, when it was not listed by this process yet (a route
// restored from the store) or its headers changed, read now from the
// credentials. The map must not be modified.
func (h *HTTPLister) UpstreamHeaders(svc ToolService) (map[string]string, error) {
	if v, ok := h.resolved.Load(svc.Name); ok {
		if r := v.(resolvedHeaders); maps.Equal(r.spec, svc.Headers) {
			return r.values, nil
		}
	}
	values, err := upstreamHeaders(svc, h.creds)
	if err != nil {
		return nil, fmt.Errorf("MCP server %q: %w", svc.Name, err)
	}
	h.resolved.Store(svc.Name, resolvedHeaders{spec: maps.Clone(svc.Headers), values: values})
	return values, nil
}

// Client is the MCP client the lister uses, for the call path to share
// (legacy sessions are opened with it).
func (h *HTTPLister) Client() *upstream.Client { return h.client }

// NewMCPLister returns an [MCPLister] that uses client (a client with a 30 s
// timeout when nil), refuses any response over maxBytes
// ([DefaultMaxManifestBytes] when maxBytes <= 0), and reads header values
// from creds (the toolmesh config file's credentials).
func NewMCPLister(client *http.Client, maxBytes int64, creds map[string]config.CredentialSource) MCPLister {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxManifestBytes
	}
	return &HTTPLister{client: upstream.New(upstream.Options{HTTP: client, MaxBytes: maxBytes}), creds: maps.Clone(creds)}
}

// List implements [MCPLister].
func (h *HTTPLister) List(ctx context.Context, svc ToolService) (*Manifest, Freshness, error) {
	headers, err := upstreamHeaders(svc, h.creds)
	if err != nil {
		return nil, Freshness{}, fmt.Errorf("list MCP server %q: %w", svc.Name, err)
	}
	// A rotated secret is used by calls from this listing on.
	h.resolved.Store(svc.Name, resolvedHeaders{spec: maps.Clone(svc.Headers), values: headers})
	if f := h.listingHeaders.Load(); f != nil && *f != nil {
		extra, err := (*f)(svc.Name)
		if err != nil {
			return nil, Freshness{}, fmt.Errorf("list MCP server %q: %w", svc.Name, err)
		}
		if len(extra) > 0 {
			merged := make(map[string]string, len(headers)+len(extra))
			for k, v := range headers {
				merged[k] = v
			}
			for k, v := range extra {
				maps.DeleteFunc(merged, func(m string, _ string) bool { return strings.EqualFold(m, k) })
				merged[k] = v
			}
			headers = merged
		}
	}
	if svc.AllowSameOriginRedirects {
		ctx = upstream.AllowSameOriginRedirects(ctx)
	}
	l, err := h.client.Discover(ctx, svc.URL, headers)
	if err != nil {
		return nil, Freshness{}, fmt.Errorf("list MCP server %q at %s: %w", svc.Name, svc.URL, err)
	}
	return manifestOf(l), Freshness{TTL: l.TTL, HasTTL: l.HasTTL, CacheScope: l.CacheScope, ListChanged: l.ListChanged}, nil
}
