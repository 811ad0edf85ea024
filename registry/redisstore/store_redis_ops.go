package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolmesh/toolmesh/internal/parallel"
	"github.com/toolmesh/toolmesh/registry"
)

// Load implements [registry.Store]: nil, nil when the route has no stored snapshot.
func (s *RedisStore) Load(ctx context.Context, route string) (*registry.Snapshot, error) {
	snaps, errs := s.LoadMany(ctx, []string{route})
	return snaps[0], errs[0]
}

// LoadMany implements [registry.BatchStore]: pipelined HMGETs, at most
// redisBatchKeys per round trip; after a transport failure the remaining
// routes fail with the same error without another round trip. Snapshots are
// decoded on all cores.
func (s *RedisStore) LoadMany(ctx context.Context, routes []string) ([]*registry.Snapshot, []error) {
	snaps, errs := make([]*registry.Snapshot, len(routes)), make([]error, len(routes))
	versions, raws := make([]string, len(routes)), make([][]byte, len(routes))
	counted := make([]bool, len(routes)) // outcome already in the metric
	var down error
	for start := 0; start < len(routes); start += redisBatchKeys {
		end := min(start+redisBatchKeys, len(routes))
		if down != nil {
			for i := start; i < end; i++ {
				errs[i], counted[i] = down, true
				s.count("load", down)
			}
			continue
		}
		octx, cancel := context.WithTimeout(ctx, s.timeout)
		began := time.Now()
		pipe := s.client.Pipeline()
		cmds := make([]*redis.SliceCmd, end-start)
		for i := range cmds {
			cmds[i] = pipe.HMGet(octx, s.key(routes[start+i]), fieldVersion, fieldSnapshot)
		}
		ran, err := pipe.Exec(octx)
		cancel()
		if batchFailed(ran, err) {
			down = fmt.Errorf("load from redis: %w", err)
			s.done("load", began, err)
			for i := start; i < end; i++ {
				errs[i], counted[i] = down, true
				s.count("load", err)
			}
			continue
		}
		s.done("load", began, nil)
		for i, cmd := range cmds {
			k := start + i
			vals, err := cmd.Result()
			switch {
			case err != nil:
				errs[k] = fmt.Errorf("load %s: %w", s.key(routes[k]), err)
			case vals[0] == nil && vals[1] == nil:
				// absent
			default:
				v, okV := vals[0].(string)
				data, okS := vals[1].(string)
				if !okV || !okS {
					errs[k] = fmt.Errorf("load %s: %w: field %s or %s missing", s.key(routes[k]), errGarbage, fieldVersion, fieldSnapshot)
					continue
				}
				versions[k], raws[k] = v, []byte(data)
			}
		}
	}
	parallel.ForEach(len(routes), runtime.GOMAXPROCS(0), func(k int) {
		if raws[k] == nil {
			return
		}
		snap, err := registry.UnmarshalSnapshot(raws[k])
		switch {
		case err != nil:
			errs[k] = fmt.Errorf("load %s: %w: %v", s.key(routes[k]), errGarbage, err)
		case snap.Version != versions[k] || snap.Route != routes[k]:
			errs[k] = fmt.Errorf("load %s: %w: holds route %q version %s under version %s", s.key(routes[k]), errGarbage, snap.Route, snap.Version, versions[k])
		default:
			snaps[k] = snap
		}
	})
	for k, err := range errs {
		if counted[k] {
			continue
		}
		if err == nil && snaps[k] == nil {
			err = redis.Nil // absent
		}
		s.count("load", err)
		if err != nil && !errors.Is(err, redis.Nil) {
			s.noteError("load", err)
		}
	}
	return snaps, errs
}

// Save implements [registry.Store]: it writes the snapshot, replacing whatever the
// key held.
func (s *RedisStore) Save(ctx context.Context, snap *registry.Snapshot) error {
	if snap == nil || snap.Route == "" {
		return errors.New("save snapshot: no route")
	}
	return s.write(ctx, []*registry.Snapshot{snap}, nil)[0]
}

// Sync implements [registry.BatchStore]: one pipelined round trip (per
// redisBatchKeys routes) reads the stored versions, then the snapshots that
// are missing, outdated or garbage are written. An unchanged catalog costs
// one small round trip per refresh, and a Redis that lost its data is filled
// again by the next refresh.
func (s *RedisStore) Sync(ctx context.Context, snaps []*registry.Snapshot) []error {
	errs := make([]error, len(snaps))
	var stale []*registry.Snapshot
	var staleAt []int
	replace := map[string]bool{}
	var down error
	for start := 0; start < len(snaps); start += redisBatchKeys {
		end := min(start+redisBatchKeys, len(snaps))
		if down != nil {
			for i := start; i < end; i++ {
				errs[i] = down
				s.count("check", down)
			}
			continue
		}
		octx, cancel := context.WithTimeout(ctx, s.timeout)
		began := time.Now()
		pipe := s.client.Pipeline()
		cmds := make([]*redis.StringCmd, end-start)
		for i := range cmds {
			cmds[i] = pipe.HGet(octx, s.key(snaps[start+i].Route), fieldVersion)
		}
		ran, err := pipe.Exec(octx)
		cancel()
		if batchFailed(ran, err) {
			down = fmt.Errorf("check redis: %w", err)
			s.done("check", began, err)
			for i := start; i < end; i++ {
				errs[i] = down
				s.count("check", err)
			}
			continue
		}
		s.done("check", began, nil)
		for i, cmd := range cmds {
			snap := snaps[start+i]
			v, err := cmd.Result()
			s.count("check", err)
			switch {
			case err == nil && v == snap.Version:
				continue // holds this version
			case err == nil, errors.Is(err, redis.Nil):
			case redis.HasErrorPrefix(err, "WRONGTYPE"):
				replace[snap.Route] = true
			default:
				errs[start+i] = fmt.Errorf("check %s: %w", s.key(snap.Route), err)
				s.noteError("check", errs[start+i])
				continue
			}
			stale = append(stale, snap)
			staleAt = append(staleAt, start+i)
		}
	}
	for i, err := range s.write(ctx, stale, replace) {
		errs[staleAt[i]] = err
	}
	return errs
}

// write stores snaps, in pipelined round trips of at most redisBatchKeys
// keys and about redisBatchBytes; keys in replace (or found to hold another
// type) are deleted first, since HSET cannot overwrite a value of another
// type. After a transport failure the rest fail without another round trip.
func (s *RedisStore) write(ctx context.Context, snaps []*registry.Snapshot, replace map[string]bool) []error {
	errs := make([]error, len(snaps))
	data := make([][]byte, len(snaps))
	for i, snap := range snaps {
		b, err := snap.MarshalJSON()
		if err != nil {
			errs[i] = err
			continue
		}
		data[i] = b
	}
	savedAt := time.Now().UTC().Format(time.RFC3339Nano)
	var down error
	for start := 0; start < len(snaps); {
		end, size := start, 0
		for end < len(snaps) && end-start < redisBatchKeys && (end == start || size+len(data[end]) <= redisBatchBytes) {
			size += len(data[end])
			end++
		}
		batch := start
		start = end
		if down != nil {
			for i := batch; i < end; i++ {
				if errs[i] == nil {
					errs[i] = down
					s.count("save", down)
				}
			}
			continue
		}
		if !slices.ContainsFunc(errs[batch:end], func(err error) bool { return err == nil }) {
			continue // nothing that encodes
		}
		down = s.writeBatch(ctx, snaps[batch:end], data[batch:end], errs[batch:end], replace, savedAt)
	}
	return errs
}

// writeBatch stores one batch of write in one pipelined round trip, setting
// errs (parallel to snaps; an entry already set did not encode). It returns
// the transport failure when the round trip failed as a whole.
func (s *RedisStore) writeBatch(ctx context.Context, snaps []*registry.Snapshot, data [][]byte, errs []error, replace map[string]bool, savedAt string) (down error) {
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	began := time.Now()
	pipe := s.client.Pipeline()
	cmds := make([]*redis.IntCmd, len(snaps))
	for i, snap := range snaps {
		if errs[i] != nil {
			continue
		}
		k := s.key(snap.Route)
		if replace[snap.Route] {
			pipe.Del(octx, k)
		}
		cmds[i] = pipe.HSet(octx, k, fieldVersion, snap.Version, fieldSnapshot, data[i], fieldSavedAt, savedAt)
	}
	ran, err := pipe.Exec(octx)
	cancel()
	if batchFailed(ran, err) {
		down = fmt.Errorf("save to redis: %w", err)
		s.done("save", began, err)
	} else {
		s.done("save", began, nil)
	}
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		if down != nil {
			errs[i] = down
			s.count("save", err)
			continue
		}
		err := cmd.Err()
		if redis.HasErrorPrefix(err, "WRONGTYPE") && !replace[snaps[i].Route] {
			// Garbage of another type: replace it now.
			retry := s.write(ctx, []*registry.Snapshot{snaps[i]}, map[string]bool{snaps[i].Route: true})
			errs[i] = retry[0]
			continue
		}
		s.count("save", err)
		if err != nil {
			errs[i] = fmt.Errorf("save %s: %w", s.key(snaps[i].Route), err)
			s.noteError("save", errs[i])
		}
	}
	return down
}

// batchFailed reports whether a pipelined round trip failed as a whole:
// Redis did not answer, or the connection could not be set up (a failed
// AUTH, say), so that no command got its own reply. The rest of a batch is
// then not tried.
func batchFailed(ran []redis.Cmder, err error) bool {
	if err == nil {
		return false
	}
	if isTransport(err) {
		return true
	}
	return !slices.ContainsFunc(ran, func(c redis.Cmder) bool { return c.Err() != nil })
}

// Delete implements [registry.Store].
func (s *RedisStore) Delete(ctx context.Context, route string) error {
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	began := time.Now()
	err := s.client.Del(octx, s.key(route)).Err()
	s.done("delete", began, err)
	s.count("delete", err)
	if err != nil {
		return fmt.Errorf("delete %s: %w", s.key(route), err)
	}
	return nil
}

// LoadListing implements [registry.ListingStore].
func (s *RedisStore) LoadListing(ctx context.Context) (*registry.Listing, error) {
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	began := time.Now()
	vals, err := s.client.HMGet(octx, s.listingKey, fieldVersion, fieldListing).Result()
	cancel()
	s.done("load_listing", began, err)
	if err != nil {
		s.count("load_listing", err)
		return nil, fmt.Errorf("load listing %s: %w", s.listingKey, err)
	}
	if vals[0] == nil && vals[1] == nil {
		s.count("load_listing", redis.Nil)
		return nil, nil
	}
	data, ok := vals[1].(string)
	if !ok {
		err = fmt.Errorf("load listing %s: %w: field %s missing", s.listingKey, errGarbage, fieldListing)
	} else if v, _ := vals[0].(string); v != listingVersion([]byte(data)) {
		err = fmt.Errorf("load listing %s: %w: content does not match its version", s.listingKey, errGarbage)
	}
	var l *registry.Listing
	if err == nil {
		if l, err = registry.DecodeListing([]byte(data)); err != nil {
			err = fmt.Errorf("load listing %s: %w: %v", s.listingKey, errGarbage, err)
		}
	}
	s.count("load_listing", err)
	if err != nil {
		s.noteError("load_listing", err)
		return nil, err
	}
	return l, nil
}

// SaveListing implements [registry.ListingStore]: it writes the listing only when the
// stored one differs, so an unchanged Portal costs one small read per cycle.
func (s *RedisStore) SaveListing(ctx context.Context, l *registry.Listing) error {
	data, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("save listing: %w", err)
	}
	version := listingVersion(data)
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	began := time.Now()
	stored, err := s.client.HGet(octx, s.listingKey, fieldVersion).Result()
	s.done("check", began, err)
	s.count("check", err)
	switch {
	case err == nil && stored == version:
		return nil
	case err == nil, errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "WRONGTYPE"):
	default:
		return fmt.Errorf("save listing %s: %w", s.listingKey, err)
	}
	began = time.Now()
	pipe := s.client.TxPipeline() // one key: fine in a cluster too
	pipe.Del(octx, s.listingKey)
	pipe.HSet(octx, s.listingKey, fieldVersion, version, fieldListing, data, fieldSavedAt, time.Now().UTC().Format(time.RFC3339Nano))
	_, err = pipe.Exec(octx)
	s.done("save_listing", began, err)
	s.count("save_listing", err)
	if err != nil {
		return fmt.Errorf("save listing %s: %w", s.listingKey, err)
	}
	return nil
}

// listingVersion is the content hash stored beside a listing.
func listingVersion(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:16])
}

// Spend records id as used until expires, with SET NX PXAT on
// {Prefix}_spent:{id} ("_" never starts a route key): the first caller
// across every replica sharing this Redis gets true, any later one false
// until the key expires with the state it names. It implements the
// approval step's Ledger (extproc/approval, ADR 0011).
func (s *RedisStore) Spend(ctx context.Context, id string, expires time.Time) (bool, error) {
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	began := time.Now()
	reply, err := s.client.SetArgs(octx, s.prefix+"_spent:"+id, "1", redis.SetArgs{Mode: "NX", ExpireAt: expires}).Result()
	if errors.Is(err, redis.Nil) { // NX and the key exists
		reply, err = "", nil
	}
	s.done("spend", began, err)
	s.count("spend", err)
	if err != nil {
		return false, fmt.Errorf("spend approval %s: %w", id, err)
	}
	return reply == "OK", nil
}
