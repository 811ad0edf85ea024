package redisstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/toolmesh/toolmesh/internal/promreg"
	"github.com/toolmesh/toolmesh/registry"
)

// Redis store defaults.
const (
	DefaultRedisPrefix    = "toolmesh:route:"
	DefaultRedisOpTimeout = 500 * time.Millisecond
)

// Round trips are batched: at most redisBatchKeys keys, and for writes at
// most about redisBatchBytes of values, per pipelined round trip, each
// bounded by OpTimeout.
const (
	redisBatchKeys  = 128
	redisBatchBytes = 4 << 20
)

// Hash fields of a route key and of the listing key.
const (
	fieldVersion  = "version"
	fieldSnapshot = "snapshot"
	fieldListing  = "listing"
	fieldSavedAt  = "savedAt"
)

// RedisOptions configures NewRedisStore.
type RedisOptions struct {
	// URL names the server, cluster or sentinel master: redis://,
	// rediss://, redis+cluster://, redis+sentinel:// (and rediss+...), with
	// go-redis's URL syntax after the scheme; see redis_url.go.
	URL string
	// Prefix of the route keys, {Prefix}{route key} (default "toolmesh:route:").
	Prefix string
	// ListingKey holds the Portal's last good listing (default
	// {Prefix}_listing: "_" never starts a route key, so it cannot collide).
	ListingKey string
	// OpTimeout bounds every operation, one round trip each, dial included
	// (default 500ms).
	OpTimeout time.Duration
	// TLSConfig is the base TLS configuration of rediss URLs (a CA, a client
	// certificate); the URL's first host is its ServerName when it has none.
	TLSConfig *tls.Config
	Logger    *slog.Logger // default: discard
	// Registerer receives toolmesh_redis_ops_total{op,outcome} and
	// toolmesh_redis_op_duration_seconds{op}; nil registers nothing.
	Registerer prometheus.Registerer
}

// RedisStore is a [registry.Store] on Redis (ADR 0005): one hash per route,
// {Prefix}{route}, with the fields version (the snapshot version), snapshot
// (its persisted JSON, see registry.Snapshot.MarshalJSON) and savedAt, plus one hash
// for the Portal's last good listing. It implements BatchStore (warm start
// and post-refresh sync in pipelined round trips), ListingStore and
// StatusReporter.
//
// Every operation is bounded by OpTimeout, and a batch stops at its first
// transport failure, so an unreachable or hanging Redis costs a refresh
// cycle about one OpTimeout, never more. Failures are returned (the
// refresher records them per route), counted in the metrics and shown by
// Status.
//
// A value that cannot be used (not a hash, a missing field, a snapshot that
// does not decode or whose content does not hash to its version) is
// reported as a garbage error and left in place: the reader cannot tell
// garbage from a value written by a newer toolmesh during a rolling upgrade,
// or from one an operator is inspecting, and deleting on read would let one
// reader destroy another's data. The next successful refresh of the route
// replaces the key as a whole, which repairs it.
type RedisStore struct {
	client     redis.UniversalClient
	prefix     string
	listingKey string
	timeout    time.Duration
	target     string
	log        *slog.Logger
	ops        *prometheus.CounterVec
	durations  *prometheus.HistogramVec

	mu     sync.Mutex
	status registry.StoreStatus
}

var (
	_ registry.BatchStore     = (*RedisStore)(nil)
	_ registry.ListingStore   = (*RedisStore)(nil)
	_ registry.StatusReporter = (*RedisStore)(nil)
)

// NewRedisStore returns a Redis store for opts.URL. It does not connect:
// Redis being down at start must not stop toolmesh, so only a bad URL or a
// metrics conflict that cannot be shared is an error. Close it when done.
func NewRedisStore(opts RedisOptions) (*RedisStore, error) {
	opts.Prefix = cmp.Or(opts.Prefix, DefaultRedisPrefix)
	if opts.ListingKey == "" {
		opts.ListingKey = opts.Prefix + "_listing"
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = DefaultRedisOpTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	target, err := parseRedisURL(opts.URL, opts.TLSConfig)
	if err != nil {
		return nil, err
	}
	s := &RedisStore{
		prefix:     opts.Prefix,
		listingKey: opts.ListingKey,
		timeout:    opts.OpTimeout,
		target:     target.display,
		log:        opts.Logger,
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolmesh_redis_ops_total",
			Help: "Redis snapshot store operations per key, by operation (load, check, save, delete, load_listing, save_listing, spend) and outcome (ok, miss, garbage, error, timeout).",
		}, []string{"op", "outcome"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolmesh_redis_op_duration_seconds",
			Help:    "Duration of Redis snapshot store round trips (one pipelined batch each), by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op"}),
		status: registry.StoreStatus{Backend: "redis", Target: target.display},
	}
	if s.client, err = target.client(opts.OpTimeout); err != nil {
		return nil, err
	}
	// A store made again on the same registry (a second one, a reload)
	// counts in the same series.
	if s.ops, err = promreg.Register(opts.Registerer, s.ops); err == nil {
		s.durations, err = promreg.Register(opts.Registerer, s.durations)
	}
	if err != nil {
		_ = s.client.Close()
		return nil, fmt.Errorf("redis store: %w", err)
	}
	return s, nil
}

// Close closes the connections to Redis.
func (s *RedisStore) Close() error { return s.client.Close() }

// Status implements [registry.StatusReporter].
func (s *RedisStore) Status() registry.StoreStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	for _, p := range []**time.Time{&st.LastErrorAt, &st.LastOpAt, &st.LastOKAt} {
		if *p != nil {
			t := **p
			*p = &t
		}
	}
	return st
}

func (s *RedisStore) key(route string) string { return s.prefix + route }

// Outcomes of one key's operation, the outcome label of the ops metric.
const (
	outcomeOK      = "ok"
	outcomeMiss    = "miss"
	outcomeGarbage = "garbage"
	outcomeError   = "error"
	outcomeTimeout = "timeout"
)

// errGarbage marks a stored value that cannot be used.
var errGarbage = errors.New("garbage value")

// classify names the outcome of err and says whether Redis answered (a
// reply, even an error reply, proves it reachable).
func classify(err error) (outcome string, answered bool) {
	var rerr redis.Error
	var nerr net.Error
	switch {
	case err == nil:
		return outcomeOK, true
	case errors.Is(err, redis.Nil):
		return outcomeMiss, true
	case errors.Is(err, errGarbage), redis.HasErrorPrefix(err, "WRONGTYPE"):
		return outcomeGarbage, true
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return outcomeTimeout, false
	case errors.As(err, &rerr):
		return outcomeError, true
	default:
		return outcomeError, false
	}
}

// done records one round trip of op over n keys: its duration, and the
// store's reachability from its outcome err (nil for success).
func (s *RedisStore) done(op string, start time.Time, err error) {
	now := time.Now()
	s.durations.WithLabelValues(op).Observe(now.Sub(start).Seconds())
	_, answered := classify(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.status.Reachable
	s.status.Reachable = answered
	s.status.LastOpAt = &now
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		s.status.LastOKAt = &now
	default:
		s.status.LastError, s.status.LastErrorAt = fmt.Sprintf("%s: %v", op, err), &now
	}
	switch {
	case was && !answered:
		s.log.Warn("redis store unreachable; serving goes on without it", "target", s.target, "op", op, "err", err)
	case !was && answered && s.status.LastErrorAt != nil:
		s.log.Info("redis store reachable", "target", s.target)
	}
}

// count adds one key's outcome to the ops metric.
func (s *RedisStore) count(op string, err error) {
	outcome, _ := classify(err)
	s.ops.WithLabelValues(op, outcome).Inc()
}

// noteError records the failure of one key in an answered round trip (a
// garbage value, an error reply).
func (s *RedisStore) noteError(op string, err error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.LastError, s.status.LastErrorAt = fmt.Sprintf("%s: %v", op, err), &now
}

// isTransport reports whether err means the round trip failed as a whole
// (Redis did not answer), so the rest of a batch should not be tried.
func isTransport(err error) bool {
	_, answered := classify(err)
	return err != nil && !answered
}
