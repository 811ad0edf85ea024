package fetch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

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
	// unauthorized, when set, is told of a listing's 401 and says whether
	// to list once more (listing_oauth.go).
	unauthorized atomic.Pointer[Unauthorized]
	// bounds are the listing bounds of a service whose Portal entry sets
	// none (the config file's listingBounds); nil: the built-in ones.
	bounds atomic.Pointer[registry.Limits]
}

// SetListingBounds makes l the listing bounds of every later listing of a
// service, but for the fields its Portal entry's listingBounds sets.
func (h *HTTPLister) SetListingBounds(l registry.Limits) { h.bounds.Store(&l) }

// boundsOf are svc's listing bounds: its Portal entry's over the lister's.
func (h *HTTPLister) boundsOf(svc registry.ToolService) upstream.Bounds {
	base := registry.DefaultLimits()
	if p := h.bounds.Load(); p != nil {
		base = *p
	}
	l := svc.ListingBounds.Over(base)
	return upstream.Bounds{Tools: int(l.Tools), Resources: int(l.Resources), ResourceTemplates: int(l.ResourceTemplates),
		Prompts: int(l.Prompts), Bytes: l.Bytes}
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
	spec   map[string]registry.HeaderValue
	values map[string]string
}

// UpstreamHeaders returns the values of svc's headers: the ones its last
// listing used, or, when it was not listed by this process yet (a route
// restored from the store) or its headers changed, read now from the
// credentials. The map must not be modified.
func (h *HTTPLister) UpstreamHeaders(svc registry.ToolService) (map[string]string, error) {
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

// NewMCPLister returns an [registry.MCPLister] that uses client (a client with a 30 s
// timeout when nil), refuses any response over maxBytes
// ([DefaultMaxManifestBytes] when maxBytes <= 0), and reads header values
// from creds (the toolmesh config file's credentials).
func NewMCPLister(client *http.Client, maxBytes int64, creds map[string]config.CredentialSource) registry.MCPLister {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxManifestBytes
	}
	return &HTTPLister{client: upstream.New(upstream.Options{HTTP: client, MaxBytes: maxBytes}), creds: maps.Clone(creds)}
}

// List implements [registry.MCPLister].
func (h *HTTPLister) List(ctx context.Context, svc registry.ToolService) (*registry.Manifest, registry.Freshness, error) {
	headers, err := upstreamHeaders(svc, h.creds)
	if err != nil {
		return nil, registry.Freshness{}, fmt.Errorf("list MCP server %q: %w", svc.Name, err)
	}
	// A rotated secret is used by calls from this listing on.
	h.resolved.Store(svc.Name, resolvedHeaders{spec: maps.Clone(svc.Headers), values: headers})
	withExtra, err := h.withListingHeaders(svc.Name, headers)
	if err != nil {
		return nil, registry.Freshness{}, fmt.Errorf("list MCP server %q: %w", svc.Name, err)
	}
	if svc.AllowSameOriginRedirects {
		ctx = upstream.AllowSameOriginRedirects(ctx)
	}
	bounds := h.boundsOf(svc)
	l, err := h.client.DiscoverWithin(ctx, svc.URL, withExtra, bounds)
	if retry := h.retryUnauthorized(ctx, svc, err); retry {
		if withExtra, err = h.withListingHeaders(svc.Name, headers); err == nil {
			l, err = h.client.DiscoverWithin(ctx, svc.URL, withExtra, bounds)
		}
	}
	if err != nil {
		return nil, registry.Freshness{}, fmt.Errorf("list MCP server %q at %s: %w", svc.Name, svc.URL, err)
	}
	return manifestOf(l), registry.Freshness{TTL: l.TTL, HasTTL: l.HasTTL, CacheScope: l.CacheScope, ListChanged: l.ListChanged}, nil
}

// upstreamHeaders resolves a federated service's headers from creds. The
// error names the header and the credential, never the value.
func upstreamHeaders(svc registry.ToolService, creds map[string]config.CredentialSource) (map[string]string, error) {
	if len(svc.Headers) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(svc.Headers))
	for _, name := range slices.Sorted(maps.Keys(svc.Headers)) {
		h := svc.Headers[name]
		src, ok := creds[h.Credential]
		if !ok {
			return nil, fmt.Errorf("headers.%s: credential %q is not defined in the toolmesh config file (credentials)", name, h.Credential)
		}
		v, err := src.Read()
		if err != nil {
			return nil, fmt.Errorf("headers.%s: credential %q: %w", name, h.Credential, err)
		}
		out[name] = h.Prefix + v
	}
	return out, nil
}

// mcpTool is the part of an MCP registry.Tool that a snapshot keeps. Fields a
// native manifest entry has beyond it (version, active, path) cannot come
// from an MCP server.
type mcpTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Icons        json.RawMessage `json:"icons,omitempty"`
}

// declared reports whether a capability member is present (not null).
func declared(c json.RawMessage) bool { return len(c) > 0 && string(c) != "null" }

// manifestOf turns an MCP server's listing into its registry.Manifest. A tool entry
// that does not decode is kept as Invalid, as in a native manifest.
func manifestOf(l *upstream.Listing) *registry.Manifest {
	m := &registry.Manifest{Tools: make([]registry.ManifestTool, 0, len(l.Tools)), MCP: &registry.MCPManifest{
		ProtocolVersion:   l.ProtocolVersion,
		ServerName:        l.Server.Name,
		ServerVersion:     l.Server.Version,
		Instructions:      l.Instructions,
		Resources:         l.Resources,
		ResourceTemplates: l.ResourceTemplates,
		Prompts:           l.Prompts,
		Completions:       declared(l.Capabilities.Completions),
		Logging:           declared(l.Capabilities.Logging),
		Subscribe:         l.Capabilities.Resources != nil && l.Capabilities.Resources.Subscribe,
	}}
	for i, raw := range l.Tools {
		var t mcpTool
		if err := json.Unmarshal(raw, &t); err != nil {
			m.Invalid = append(m.Invalid, registry.InvalidToolEntry(i, raw, err))
			continue
		}
		m.Tools = append(m.Tools, registry.ManifestTool{Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Icons: t.Icons})
	}
	return m
}
