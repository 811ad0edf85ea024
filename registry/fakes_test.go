package registry

import (
	"context"
	"fmt"
	"sync"

	"github.com/toolmesh/toolmesh/internal/registrytest"
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

func (s *jsonStore) Load(ctx context.Context, route string) (*Snapshot, error) {
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
	return UnmarshalSnapshot(data)
}

func (s *jsonStore) Save(ctx context.Context, snap *Snapshot) error {
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
