package registry

import (
	"context"
	"errors"
	"sync"
)

// MemoryStore keeps snapshots in process memory: the embedded default, which
// makes warm start a no-op across restarts but keeps the Store contract.
type MemoryStore struct {
	mu    sync.RWMutex
	snaps map[string]*Snapshot
}

// NewMemoryStore returns an empty in-memory [Store], safe for concurrent use.
func NewMemoryStore() Store { return &MemoryStore{snaps: map[string]*Snapshot{}} }

// Load implements [Store]; it returns nil, nil when the route has no snapshot.
func (m *MemoryStore) Load(ctx context.Context, route string) (*Snapshot, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.snaps[route], nil
}

// Save implements [Store]. Snapshots are immutable, so it keeps the pointer.
func (m *MemoryStore) Save(ctx context.Context, s *Snapshot) error {
	if s == nil || s.Route == "" {
		return errors.New("save snapshot: no route")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snaps[s.Route] = s
	return nil
}

// Delete implements [Store].
func (m *MemoryStore) Delete(ctx context.Context, route string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.snaps, route)
	return nil
}
