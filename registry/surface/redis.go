package surface

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisPrefix starts every pin key.
const DefaultRedisPrefix = "toolmesh:pin:"

// RedisStore keeps pins in Redis, one hash per key, so that every replica
// holds back and accepts the same definitions, and pins survive restarts.
// Each operation touches one key (scripts included), so it works on a
// cluster as on one server.
type RedisStore struct {
	c       redis.UniversalClient
	prefix  string
	timeout time.Duration
}

// NewRedisStore returns a store on c with keys under prefix ("" for
// DefaultRedisPrefix); timeout bounds each operation (0: 500ms).
func NewRedisStore(c redis.UniversalClient, prefix string, timeout time.Duration) *RedisStore {
	prefix = cmp.Or(prefix, DefaultRedisPrefix)
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}
	return &RedisStore{c: c, prefix: prefix, timeout: timeout}
}

// Hash fields. The definitions are stored as the gateway wrote them, never
// re-encoded by a script, so the bytes stay canonical.
const (
	fAccHash  = "acc.hash"
	fAccDef   = "acc.def"
	fAccAt    = "acc.at"
	fAccBy    = "acc.by"
	fCandHash = "cand.hash"
	fCandDef  = "cand.def"
	fCandAt   = "cand.at"
	fCandRej  = "cand.rejected"
	fRoute    = "route"
	fService  = "service"
	fTool     = "tool"
)

var allFields = []string{fAccHash, fAccDef, fAccAt, fAccBy, fCandHash, fCandDef, fCandAt, fCandRej, fRoute, fService, fTool}

func (s *RedisStore) key(k Key) string {
	return s.prefix + url.PathEscape(k.Route) + "/" + url.PathEscape(k.Service) + "/" + url.PathEscape(k.Tool)
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, k Key) (Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	vals, err := s.c.HMGet(ctx, s.key(k), allFields...).Result()
	if err != nil {
		return Record{}, fmt.Errorf("redis: %w", err)
	}
	return recordOf(k, vals), nil
}

// recordOf turns HMGET's answer (in allFields order) into a Record.
func recordOf(k Key, vals []any) Record {
	str := func(i int) string { s, _ := vals[i].(string); return s }
	at := func(i int) time.Time { t, _ := time.Parse(time.RFC3339Nano, str(i)); return t }
	r := Record{Key: k}
	if h := str(0); h != "" {
		r.Accepted = &Pin{Hash: h, Definition: []byte(str(1)), AcceptedAt: at(2), By: str(3)}
	}
	if h := str(4); h != "" {
		r.Candidate = &Candidate{Hash: h, Definition: []byte(str(5)), SeenAt: at(6), Rejected: str(7) == "1"}
	}
	return r
}

var firstAcceptScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'acc.hash') == 0 then
  redis.call('HSET', KEYS[1], 'acc.hash', ARGV[1], 'acc.def', ARGV[2], 'acc.at', ARGV[3], 'acc.by', ARGV[4],
    'route', ARGV[5], 'service', ARGV[6], 'tool', ARGV[7])
end
return redis.call('HMGET', KEYS[1], ` + quoted(allFields) + `)`)

// FirstAccept implements Store.
func (s *RedisStore) FirstAccept(ctx context.Context, k Key, p Pin) (Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := firstAcceptScript.Run(ctx, s.c, []string{s.key(k)},
		p.Hash, string(p.Definition), p.AcceptedAt.UTC().Format(time.RFC3339Nano), p.By, k.Route, k.Service, k.Tool).Slice()
	if err != nil {
		return Record{}, fmt.Errorf("redis: %w", err)
	}
	return recordOf(k, res), nil
}

var proposeScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'cand.hash') == ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'cand.rejected')
redis.call('HSET', KEYS[1], 'cand.hash', ARGV[1], 'cand.def', ARGV[2], 'cand.at', ARGV[3],
  'route', ARGV[4], 'service', ARGV[5], 'tool', ARGV[6])
return 1`)

// Propose implements Store.
func (s *RedisStore) Propose(ctx context.Context, k Key, c Candidate) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := proposeScript.Run(ctx, s.c, []string{s.key(k)},
		c.Hash, string(c.Definition), c.SeenAt.UTC().Format(time.RFC3339Nano), k.Route, k.Service, k.Tool).Err()
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

var acceptScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'cand.hash') ~= ARGV[1] then return false end
local def = redis.call('HGET', KEYS[1], 'cand.def')
redis.call('HSET', KEYS[1], 'acc.hash', ARGV[1], 'acc.def', def, 'acc.at', ARGV[2], 'acc.by', ARGV[3])
redis.call('HDEL', KEYS[1], 'cand.hash', 'cand.def', 'cand.at', 'cand.rejected')
return def`)

// Accept implements Store.
func (s *RedisStore) Accept(ctx context.Context, k Key, hash, by string, now time.Time) (Pin, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	def, err := acceptScript.Run(ctx, s.c, []string{s.key(k)}, hash, now.UTC().Format(time.RFC3339Nano), by).Text()
	if errors.Is(err, redis.Nil) {
		return Pin{}, ErrNoCandidate
	}
	if err != nil {
		return Pin{}, fmt.Errorf("redis: %w", err)
	}
	return Pin{Hash: hash, Definition: []byte(def), AcceptedAt: now, By: by}, nil
}

var rejectScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'cand.hash') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'cand.rejected', '1')
return 1`)

// Reject implements Store.
func (s *RedisStore) Reject(ctx context.Context, k Key, hash string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := rejectScript.Run(ctx, s.c, []string{s.key(k)}, hash).Int()
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if n == 0 {
		return ErrNoCandidate
	}
	return nil
}

// maxListed bounds List, which serves the console and /health.
const maxListed = 10000

// List implements Store.
func (s *RedisStore) List(ctx context.Context, route string) ([]Record, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*s.timeout)
	defer cancel()
	match := s.prefix + "*"
	if route != "" {
		match = s.prefix + url.PathEscape(route) + "/*"
	}
	var (
		mu   sync.Mutex // ForEachMaster scans the nodes concurrently
		keys []string
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, match, 512).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			full := len(keys) >= maxListed
			if !full {
				keys = append(keys, it.Val())
			}
			mu.Unlock()
			if full {
				break
			}
		}
		return it.Err()
	}
	var err error
	switch c := s.c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("unsupported Redis client %T", s.c)
	}
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	cmds := make([]*redis.SliceCmd, len(keys))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			cmds[i] = p.HMGet(ctx, key, allFields...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	out := make([]Record, 0, len(keys))
	for _, cmd := range cmds {
		vals := cmd.Val()
		str := func(i int) string { s, _ := vals[i].(string); return s }
		out = append(out, recordOf(Key{Route: str(8), Service: str(9), Tool: str(10)}, vals))
	}
	sortRecords(out)
	return out, nil
}

func quoted(fields []string) string {
	q := make([]string, len(fields))
	for i, f := range fields {
		q[i] = "'" + f + "'"
	}
	return strings.Join(q, ", ")
}
