package registry

import (
	"context"
	"time"
)

// Source lists the Portal's routes (SPEC §3): a local JSON/YAML file or an
// HTTP Portal's GET /v1/routes.
type Source interface {
	List(ctx context.Context) (*Listing, error)
}

// ManifestFetcher fetches one Tool Service's manifest (SPEC §4).
type ManifestFetcher interface {
	Fetch(ctx context.Context, svc ToolService) (*Manifest, error)
}

// Store keeps each route's last good snapshot for warm start (SPEC §5). The
// memory store is the embedded default; Redis comes with its own issue.
type Store interface {
	Load(ctx context.Context, route string) (*Snapshot, error) // nil, nil when absent
	Save(ctx context.Context, s *Snapshot) error
	Delete(ctx context.Context, route string) error
}

// RouteStatus is one route's line of the health detail.
type RouteStatus struct {
	Key             string         `json:"key"`
	PublicPath      string         `json:"publicPath"`
	SnapshotVersion string         `json:"snapshotVersion,omitempty"`
	SnapshotAge     string         `json:"snapshotAge,omitempty"`
	FetchedAt       *time.Time     `json:"fetchedAt,omitempty"`
	Tools           int            `json:"tools"`
	LastError       string         `json:"lastError,omitempty"`
	LastErrorAt     *time.Time     `json:"lastErrorAt,omitempty"`
	Ambiguous       []string       `json:"ambiguous,omitempty"`
	Rejected        []RejectedTool `json:"rejected,omitempty"`

	// LastRefresh is the last time a refresh confirmed the snapshot's
	// content; SnapshotAge counts from it (or from FetchedAt if later).
	LastRefresh *time.Time `json:"lastRefresh,omitempty"`
	// StoreError is the latest failure to load or save the route's snapshot
	// in the Store; serving goes on without the Store.
	StoreError string `json:"storeError,omitempty"`
}

// Health is the health detail of SPEC §5.
type Health struct {
	Ready                 bool          `json:"ready"`
	Routes                []RouteStatus `json:"routes"`
	RoutesWithoutSnapshot []string      `json:"routesWithoutSnapshot"`
	PortalError           string        `json:"portalError,omitempty"`
	PortalErrorAt         *time.Time    `json:"portalErrorAt,omitempty"`
	LastListing           *time.Time    `json:"lastListing,omitempty"`
}
