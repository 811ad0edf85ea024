package registry

import "github.com/toolmesh/toolmesh/internal/config"

// Listing is one successful answer of the Portal: every route it names.
type Listing struct {
	Routes []Route `json:"routes"`
}

// Route is one public MCP endpoint, /mcp/{key}, serving the union of the
// tools of its Tool Services.
type Route struct {
	Key          string        `json:"key"`
	PublicPath   string        `json:"publicPath,omitempty"` // default /mcp/{key}
	Description  string        `json:"description,omitempty"`
	ToolServices []ToolService `json:"toolServices"`
	// Catalog configures large-catalog behaviour (ADR 0004); nil means full, no paging.
	Catalog *Catalog `json:"catalog,omitempty"`
	// Instructions are the route's own instructions for clients, passed on
	// in initialize and server/discover before its MCP servers' (at most
	// MaxRouteInstructions bytes).
	Instructions string `json:"instructions,omitempty"`
	// Surface is the gateway's own change to the route (pin decisions and
	// the config's virtual tools, surface_build.go), set by the refresher
	// before a build and part of the snapshot's version; the Portal never
	// sets it (Listing.Validate refuses it).
	Surface *RouteSurface `json:"surface,omitempty"`
}

// Catalog is the per-route large-catalog setting of ADR 0004. The toolmesh
// config file can replace it per route (Registry.SetCatalogOverrides).
type Catalog struct {
	Mode      string `json:"mode,omitempty"`      // "full" (default) or "search"
	PageSize  int    `json:"pageSize,omitempty"`  // tools/list page size, 0..10000; 0: no paging
	Shortlist int    `json:"shortlist,omitempty"` // search mode shortlist size, 0..50; default 5
	// Synonyms are the route's own synonym groups for search mode, one
	// group of single words per string ("case ticket incident"); see
	// search.Options.Synonyms.
	Synonyms []string `json:"synonyms,omitempty"`
	// Embedding names the embedding service (the toolmesh config's
	// embeddings map) whose similarity re-ranks search mode's shortlist
	// (ADR 0007); "" takes the config's defaultEmbedding, "none" turns it
	// off. The Portal names a service, never its URL or credentials.
	Embedding string `json:"embedding,omitempty"`
}

// ToolService is one upstream that implements the Tool Service wire contract
// (docs/contracts/toolservice.md). The same Tool Service may serve several routes; it is one cluster.
type ToolService struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Protocol is how toolmesh talks to the service: "" (the Tool Service
	// contract of docs/contracts/toolservice.md) or ProtocolMCP (an MCP
	// server federated behind the route; URL is its MCP endpoint). It is
	// not defaulted in place, so a native service's definition, and with it
	// every stored snapshot version, stays what it was.
	Protocol     string           `json:"protocol,omitempty"`
	ManifestPath string           `json:"manifestPath,omitempty"` // default /manifest; native only
	Cluster      *ClusterSettings `json:"cluster,omitempty"`
	// Headers are sent on every request toolmesh makes to an MCP server
	// (protocol mcp only), by header name. Values never appear in the
	// Portal: each names a credential that the toolmesh config file maps to
	// a file or an environment variable.
	Headers map[string]HeaderValue `json:"headers,omitempty"`
	// ToolPrefix renames the service's tools and prompts (protocol mcp
	// only): clients see ToolPrefix+upstream name, and a call is mapped back
	// to the upstream name. It resolves name collisions between services.
	ToolPrefix string `json:"toolPrefix,omitempty"`
	// ForwardAuthorization passes the client's Authorization header on to
	// the MCP server (protocol mcp only). Off by default: a token the
	// client got for the gateway must not reach another server (the MCP
	// authorization spec's confused-deputy rule); the server gets the
	// credentials of Headers instead.
	ForwardAuthorization bool `json:"forwardAuthorization,omitempty"`
	// AllowSameOriginRedirects lets the gateway's own requests to an MCP
	// server (listing, session set-up, a re-issued call) follow redirects
	// that stay on the origin of its url; without it no redirect is
	// followed (protocol mcp only).
	AllowSameOriginRedirects bool `json:"allowSameOriginRedirects,omitempty"`
	// TrustAnnotations lets the gateway act on the tool annotations the MCP
	// server lists (protocol mcp only): the approval step skips a tool
	// that declares readOnlyHint: true only when this is set. Off by
	// default: the MCP specification says annotations from untrusted
	// servers are untrusted. A native Tool Service's manifest is the
	// operator's, and trusted.
	TrustAnnotations bool `json:"trustAnnotations,omitempty"`
	// ListingBounds override the config file's listingBounds for this
	// server's listings (protocol mcp only); nil: the config file's.
	ListingBounds *ListingBounds `json:"listingBounds,omitempty"`
	// ForwardHeaders are client request headers (lower case) the service
	// receives besides DefaultForwardHeaders; every other client header is
	// removed from a routed request (extproc/reqheaders/forward.go).
	ForwardHeaders []string `json:"forwardHeaders,omitempty"`
	// Priority orders the route's services when they claim one name (a
	// tool, a prompt, a resource URI or template): the highest priority
	// wins, then the earlier service in the route's toolServices. The
	// others' entries are left out and listed in /health as shadowed. It
	// is the route's, not the cluster's: routes sharing a service may give
	// it different priorities. Default 0; omitted when 0, so definitions
	// without it hash as before.
	Priority int `json:"priority,omitempty"`
	// AcceptedHashes are tool definition hashes ("sha256:<64 hex>", by the
	// tool's name on the service) an operator accepted in review outside
	// the gateway, for pinning (docs/surface.md). Per route, like Priority.
	AcceptedHashes map[string][]string `json:"acceptedHashes,omitempty"`
}

// SharedDefinition is the part of the definition every route that names the
// service shares: everything but Priority, which is per route.
func (s ToolService) SharedDefinition() ToolService {
	s.Priority, s.AcceptedHashes = 0, nil
	return s
}

// ProtocolMCP is ToolService.Protocol of a federated MCP server.
const ProtocolMCP = "mcp"

// ProtocolToolService is the protocol name reported for a native Tool
// Service (ToolService.Protocol empty).
const ProtocolToolService = "toolservice"

// HeaderValue is one upstream header: Prefix followed by the value of the
// credential named Credential ("Authorization": {credential: "gh", prefix:
// "Bearer "}).
type HeaderValue struct {
	Credential string `json:"credential"`
	Prefix     string `json:"prefix,omitempty"`
	// Value is never valid: it is known to the decoder only so that an
	// inline secret fails validation even when unknown fields are ignored,
	// instead of being dropped with a warning. Its text is never echoed.
	Value string `json:"value,omitempty"`
}

// IsMCP reports whether s is a federated MCP server.
func (s ToolService) IsMCP() bool { return s.Protocol == ProtocolMCP }

// ProtocolName is the service's protocol as reported in the health detail.
func (s ToolService) ProtocolName() string {
	if s.Protocol == "" {
		return ProtocolToolService
	}
	return s.Protocol
}

// ClusterSettings is the Portal's `cluster` object: how Envoy reaches one Tool
// Service. Zero values mean "use the documented default" (see Defaults).
type ClusterSettings struct {
	ConnectTimeout     config.Duration   `json:"connectTimeout,omitempty"`
	RequestTimeout     config.Duration   `json:"requestTimeout,omitempty"`
	MaxConnections     uint32            `json:"maxConnections,omitempty"`
	MaxPendingRequests uint32            `json:"maxPendingRequests,omitempty"`
	MaxRequests        uint32            `json:"maxRequests,omitempty"`
	MaxRetries         uint32            `json:"maxRetries,omitempty"`
	OutlierDetection   *OutlierDetection `json:"outlierDetection,omitempty"`
	HealthCheck        *HealthCheck      `json:"healthCheck,omitempty"`
	LBPolicy           string            `json:"lbPolicy,omitempty"` // ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV
	HTTP2              bool              `json:"http2,omitempty"`
}

// OutlierDetection mirrors the Portal's outlierDetection object.
type OutlierDetection struct {
	Consecutive5xx     uint32          `json:"consecutive5xx,omitempty"`
	Interval           config.Duration `json:"interval,omitempty"`
	BaseEjectionTime   config.Duration `json:"baseEjectionTime,omitempty"`
	MaxEjectionPercent uint32          `json:"maxEjectionPercent,omitempty"`
}

// HealthCheck mirrors the Portal's healthCheck object (active HTTP checks).
type HealthCheck struct {
	Path               string          `json:"path,omitempty"`
	Interval           config.Duration `json:"interval,omitempty"`
	Timeout            config.Duration `json:"timeout,omitempty"`
	HealthyThreshold   uint32          `json:"healthyThreshold,omitempty"`
	UnhealthyThreshold uint32          `json:"unhealthyThreshold,omitempty"`
}
