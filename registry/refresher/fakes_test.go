package refresher

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
)

// jsonStore persists snapshots in their JSON form, as the Redis store will,
// and can be switched to fail.
type jsonStore struct {
	rec  *registrytest.Recorder
	mu   sync.Mutex
	data map[string][]byte
	fail bool
}

func newJSONStore(rec *registrytest.Recorder) *jsonStore {
	return &jsonStore{rec: rec, data: map[string][]byte{}}
}

func (s *jsonStore) setFail(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fail
}

func (s *jsonStore) Load(ctx context.Context, route string) (*registry.Snapshot, error) {
	s.rec.Add("load " + route)
	s.mu.Lock()
	data, fail := s.data[route], s.fail
	s.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("store down")
	}
	if data == nil {
		return nil, nil
	}
	return registry.UnmarshalSnapshot(data)
}

func (s *jsonStore) Save(ctx context.Context, snap *registry.Snapshot) error {
	s.rec.Add("save " + snap.Route)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return fmt.Errorf("store down")
	}
	data, err := snap.MarshalJSON()
	if err != nil {
		return err
	}
	s.data[snap.Route] = data
	return nil
}

func (s *jsonStore) Delete(ctx context.Context, route string) error {
	s.rec.Add("delete " + route)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return fmt.Errorf("store down")
	}
	delete(s.data, route)
	return nil
}

// t0 is the fake clock's start.
var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

// clock is a settable Now.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(t0.UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func mustManifest(t testing.TB, doc string) *registry.Manifest {
	t.Helper()
	m, err := registry.DecodeManifest([]byte(doc))
	if err != nil {
		t.Fatalf("DecodeManifest(%s) = %v", doc, err)
	}
	return m
}
