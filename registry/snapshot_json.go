package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// snapshotFormat versions the persisted form, so a store written by another
// build of toolmesh is recognised.
const snapshotFormat = 1

// storedSnapshot is the persisted form of a Snapshot: its inputs, not its
// compiled state, which UnmarshalSnapshot rebuilds.
type storedSnapshot struct {
	Format    int                  `json:"format"`
	Route     Route                `json:"route"`
	Version   string               `json:"version"`
	FetchedAt time.Time            `json:"fetchedAt"`
	Manifests map[string]*Manifest `json:"manifests"`
}

// MarshalJSON implements [json.Marshaler]: the persisted form used by stores
// (route definition, canonical manifests, version, fetch time).
func (s *Snapshot) MarshalJSON() ([]byte, error) {
	if s.manifests == nil {
		return nil, fmt.Errorf("marshal snapshot of route %q: not built by BuildSnapshot", s.Route)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(storedSnapshot{
		Format:    snapshotFormat,
		Route:     s.def,
		Version:   s.Version,
		FetchedAt: s.FetchedAt,
		Manifests: s.manifests,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal snapshot of route %q: %w", s.Route, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalSnapshot rebuilds a snapshot from its persisted form with
// BuildSnapshot and checks that the rebuilt version is the stored one, so a
// corrupted or foreign entry is refused rather than served.
func UnmarshalSnapshot(data []byte) (*Snapshot, error) {
	var st storedSnapshot
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("unmarshal snapshot: %w", err)
	}
	if st.Format != snapshotFormat {
		return nil, fmt.Errorf("unmarshal snapshot: unsupported format %d", st.Format)
	}
	if st.Version == "" {
		return nil, errors.New("unmarshal snapshot: missing version")
	}
	s, err := BuildSnapshot(st.Route, st.Manifests, st.FetchedAt)
	if err != nil {
		return nil, fmt.Errorf("unmarshal snapshot: %w", err)
	}
	if s.Version != st.Version {
		return nil, fmt.Errorf("unmarshal snapshot of route %q: content hashes to %s, stored version is %s", st.Route.Key, s.Version, st.Version)
	}
	return s, nil
}
