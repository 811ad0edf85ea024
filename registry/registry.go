package registry

import (
	"context"
	"time"
)

// Source lists the Portal's routes (docs/contracts/portal.md): a local JSON/YAML file or an
// HTTP Portal's GET /v1/routes.
type Source interface {
	List(ctx context.Context) (*Listing, error)
}

// ManifestFetcher fetches one Tool Service's manifest (docs/contracts/toolservice.md).
type ManifestFetcher interface {
	Fetch(ctx context.Context, svc ToolService) (*Manifest, error)
}

// Store keeps each route's last good snapshot for warm start (ADR 0005). The
// memory store is the embedded default; the Redis store (registry/redisstore)
// shares snapshots across restarts and replicas. A Store may also implement BatchStore,
// ListingStore and StatusReporter.
type Store interface {
	Load(ctx context.Context, route string) (*Snapshot, error) // nil, nil when absent
	Save(ctx context.Context, s *Snapshot) error
	Delete(ctx context.Context, route string) error
}

// RouteStatus is one route's line of the health detail.
type RouteStatus struct {
	Key             string `json:"key"`
	PublicPath      string `json:"publicPath"`
	SnapshotVersion string `json:"snapshotVersion,omitempty"`
	// SnapshotAge is the age of the snapshot's content: the time since it
	// was built (FetchedAt), from manifests that differed from the ones
	// before. A refresh that finds the same content does not reset it.
	SnapshotAge string `json:"snapshotAge,omitempty"`
	// FetchedAt is when the manifests of the snapshot were fetched and it
	// was built.
	FetchedAt *time.Time `json:"fetchedAt,omitempty"`
	// LastSuccessAge is the time since LastRefresh, the last refresh that
	// fetched every manifest of the route; absent while none has succeeded
	// in this process (a snapshot restored from the Store). It grows while
	// a Tool Service is down.
	LastSuccessAge string         `json:"lastSuccessAge,omitempty"`
	Tools          int            `json:"tools"`
	LastError      string         `json:"lastError,omitempty"`
	LastErrorAt    *time.Time     `json:"lastErrorAt,omitempty"`
	Ambiguous      []string       `json:"ambiguous,omitempty"`
	Rejected       []RejectedTool `json:"rejected,omitempty"`

	// LastRefresh is the last time a refresh fetched every manifest of the
	// route and kept (same content) or replaced the snapshot.
	LastRefresh *time.Time `json:"lastRefresh,omitempty"`
	// StoreError is the latest failure to load or save the route's snapshot
	// in the Store; serving goes on without the Store.
	StoreError string `json:"storeError,omitempty"`
	// Restored is true while the route serves a snapshot loaded from the
	// Store at start that no refresh has confirmed or replaced yet.
	Restored bool `json:"restored,omitempty"`
	// NextRetryAt is when a failed route is tried again, before the next
	// regular refresh (refresher.Options.RetryBackoff).
	NextRetryAt *time.Time `json:"nextRetryAt,omitempty"`
	// Services is one line per Tool Service of the route, in the route's
	// order (federation_health.go, and the fetch fields from registry/refresher).
	Services []ServiceStatus `json:"services,omitempty"`
	// AmbiguousItems are the resources, resource templates and prompts of
	// federated MCP servers left out because two services offer them.
	AmbiguousItems []string `json:"ambiguousItems,omitempty"`
	// Shadowed are the tools, prompts, resources and resource templates
	// left out because a service ranked before theirs (priority, then the
	// route's order) claims them: each with the winner.
	Shadowed []Shadowed `json:"shadowed,omitempty"`
	// Quarantined are the tools pinning holds back until an operator
	// accepts their definition (docs/surface.md); SurfaceErrors the
	// route's virtual-tool overrides that name no tool of the route.
	Quarantined   []QuarantinedTool `json:"quarantined,omitempty"`
	SurfaceErrors []string          `json:"surfaceErrors,omitempty"`
}

// Health is the /health detail of the registry (docs/operators.md).
type Health struct {
	Ready                 bool          `json:"ready"`
	Routes                []RouteStatus `json:"routes"`
	RoutesWithoutSnapshot []string      `json:"routesWithoutSnapshot"`
	PortalError           string        `json:"portalError,omitempty"`
	PortalErrorAt         *time.Time    `json:"portalErrorAt,omitempty"`
	// PortalNextRetryAt is when a failed listing is tried again.
	PortalNextRetryAt *time.Time `json:"portalNextRetryAt,omitempty"`
	LastListing       *time.Time `json:"lastListing,omitempty"`
	// ListingRestored is true while the routes come from the listing saved
	// in the Store, because the Portal has not answered since start.
	ListingRestored bool `json:"listingRestored,omitempty"`
	// Store is the Store's own status, when it reports one (Redis does).
	Store *StoreStatus `json:"store,omitempty"`
}

// BatchStore is a Store that loads and writes many routes in a few round
// trips. The refresher uses it, when the Store implements it, for the warm
// start and after every refresh.
type BatchStore interface {
	Store
	// LoadMany loads the stored snapshots of routes: snaps[i] is routes[i]'s
	// (nil when absent) and errs[i] its error.
	LoadMany(ctx context.Context, routes []string) (snaps []*Snapshot, errs []error)
	// Sync makes the store hold snaps, writing each one whose stored
	// version differs or is missing; errs[i] is snaps[i]'s error.
	Sync(ctx context.Context, snaps []*Snapshot) (errs []error)
}

// ListingStore is a Store that also keeps the Portal's last good listing, so
// that a cold start with the Portal down still knows its routes.
type ListingStore interface {
	LoadListing(ctx context.Context) (*Listing, error) // nil, nil when absent
	SaveListing(ctx context.Context, l *Listing) error
}

// StatusReporter is a Store that reports its own health; the refresher adds
// it to the health detail as Health.Store.
type StatusReporter interface {
	Status() StoreStatus
}

// StoreStatus is the Store's line of the health detail.
type StoreStatus struct {
	Backend string `json:"backend"`          // "redis"
	Target  string `json:"target,omitempty"` // where, without credentials
	// Reachable is true when the last operation got an answer from the
	// store (even a miss or a garbage value); false before the first one.
	Reachable   bool       `json:"reachable"`
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
	LastOpAt    *time.Time `json:"lastOpAt,omitempty"` // last operation, whatever its outcome
	LastOKAt    *time.Time `json:"lastOkAt,omitempty"` // last operation that succeeded
}
