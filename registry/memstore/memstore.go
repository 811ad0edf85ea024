// Package memstore is the in-memory registry.Store: the embedded default of
// the refresher (registry/refresher), which keeps the Store contract but
// makes a warm start across restarts a no-op. It imports registry; registry
// never imports it.
package memstore

import (
	"context"
	"errors"
	"sync"

	"github.com/toolmesh/toolmesh/registry"
)

// Store keeps snapshots in process memory.
type Store struct {
	mu    sync.RWMutex
	snaps map[string]*registry.Snapshot
}

// New returns an empty in-memory [registry.Store], safe for concurrent use.
func New() registry.Store { return &Store{snaps: map[string]*registry.Snapshot{}} }

// Load implements [registry.Store]; it returns nil, nil when the route has no snapshot.
func (m *Store) Load(ctx context.Context, route string) (*registry.Snapshot, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.snaps[route], nil
}

// Save implements [registry.Store]. Snapshots are immutable, so it keeps the pointer.
func (m *Store) Save(ctx context.Context, s *registry.Snapshot) error {
	if s == nil || s.Route == "" {
		return errors.New("save snapshot: no route")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snaps[s.Route] = s
	return nil
}

// Delete implements [registry.Store].
func (m *Store) Delete(ctx context.Context, route string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.snaps, route)
	return nil
}
