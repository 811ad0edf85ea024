package app

import "time"

// Idle timeouts of the HTTP servers: a keep-alive connection without a
// request is closed after them, so idle peers cannot hold connections
// (and file descriptors) open forever. A connection that never sends a
// request is bounded by readHeaderTimeout. The local data plane's listener
// takes its own from the idle_timeout xDS gives its HTTP connection
// manager, as Envoy does (envoy/dataplane/idle.go).
const (
	// adminIdleTimeout outlasts a Prometheus scrape interval, so a scraper
	// keeps its connection.
	adminIdleTimeout = 2 * time.Minute
	// notificationsIdleTimeout is longer than the 1 h idle_timeout xds
	// gives Envoy's toolmesh_notifications cluster: Envoy closes an idle
	// connection first and never reuses one the server is closing. A
	// stream in progress is a request, never idle.
	notificationsIdleTimeout = time.Hour + 5*time.Minute
)

// idle is d, or the test hook's timeout when one is set.
func (a *app) idle(d time.Duration) time.Duration {
	if a.idleOverride > 0 {
		return a.idleOverride
	}
	return d
}
