package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Persisted snapshot formats. Format 2 adds the schema rejections that let a
// restore skip compiling; format 1 (inputs only) is still read, by a full
// build. Format 3 is format 2 with the version hashed from each manifest's
// digest (inputs.hash) rather than from the manifests' encodings
// (inputs.hashV1). Formats 1 and 2 are still read: the restored snapshot
// keeps its stored version, and is written back as format 2, so a store
// entry and its version field always agree; a refresh compares it by
// content, so the upgrade rebuilds nothing.
const (
	snapshotFormat   = 3
	snapshotFormatV2 = 2
	snapshotFormatV1 = 1
)

// storedSnapshot is the persisted form of a Snapshot: its inputs, not its
// compiled state, which UnmarshalSnapshot rebuilds. Version comes first so
// that a reader of the raw value sees it at once.
type storedSnapshot struct {
	Format    int                  `json:"format"`
	Version   string               `json:"version"`
	Route     Route                `json:"route"`
	FetchedAt time.Time            `json:"fetchedAt"`
	Manifests map[string]*Manifest `json:"manifests"`
	// SchemaErrors lists, per Tool Service, the manifest entries (by index
	// in its tools) rejected because their inputSchema did not compile.
	SchemaErrors map[string][]schemaError `json:"schemaErrors,omitempty"`
	// Embeddings are the tool embeddings of a search-mode route (ADR 0007),
	// so that a warm start restores semantic ranking without calling the
	// embedding service. They are derived data, not inputs: optional
	// within format 2 (a toolmesh that does not know them ignores them),
	// not part of the version, and dropped on restore when malformed or of
	// another model, then computed again.
	Embeddings *storedEmbeddings `json:"embeddings,omitempty"`
}

// MarshalJSON implements [json.Marshaler]: the persisted form used by stores
// (route definition, canonical manifests, version, fetch time, and which
// entries were rejected for their input schema).
func (s *Snapshot) MarshalJSON() ([]byte, error) {
	if s.manifests == nil {
		return nil, fmt.Errorf("marshal snapshot of route %q: not built by BuildSnapshot", s.Route)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	format := snapshotFormat
	if s.Version != s.inputs {
		format = snapshotFormatV2 // restored from format 1 or 2; see snapshotFormat
	}
	st := storedSnapshot{
		Format:       format,
		Version:      s.Version,
		Route:        s.def,
		FetchedAt:    s.FetchedAt,
		Manifests:    s.manifests,
		SchemaErrors: s.schemaErrs,
	}
	if s.search != nil {
		if sem := s.search.sem.Load(); sem != nil {
			st.Embeddings = sem.stored()
		}
	}
	err := enc.Encode(st)
	if err != nil {
		return nil, fmt.Errorf("marshal snapshot of route %q: %w", s.Route, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalSnapshot rebuilds a snapshot from its persisted form and checks
// that the inputs hash to the stored version, so a corrupted or foreign entry
// is refused rather than served. The snapshot was validated when it was
// built, so input schemas are not compiled here: each compiles on its tool's
// first call (see [Tool.ValidateArguments]), which makes a warm start of many
// routes cheap. Entries that were rejected for their schema stay rejected.
func UnmarshalSnapshot(data []byte) (*Snapshot, error) {
	var st storedSnapshot
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("unmarshal snapshot: %w", err)
	}
	if st.Format != snapshotFormat && st.Format != snapshotFormatV2 && st.Format != snapshotFormatV1 {
		return nil, fmt.Errorf("unmarshal snapshot: unsupported format %d", st.Format)
	}
	if st.Version == "" {
		return nil, errors.New("unmarshal snapshot: missing version")
	}
	canon, err := canonicalizeAll(st.Route, st.Manifests)
	if err != nil {
		return nil, fmt.Errorf("unmarshal snapshot: %w", err)
	}
	in, err := prepare(st.Route, canon)
	if err != nil {
		return nil, fmt.Errorf("unmarshal snapshot: %w", err)
	}
	stored := in.version
	if st.Format != snapshotFormat {
		if stored, err = in.hashV1(); err != nil {
			return nil, fmt.Errorf("unmarshal snapshot of route %q: %w", st.Route.Key, err)
		}
	}
	if stored != st.Version {
		return nil, fmt.Errorf("unmarshal snapshot of route %q: content hashes to %s, stored version is %s", st.Route.Key, stored, st.Version)
	}
	var snap *Snapshot
	if st.Format == snapshotFormatV1 {
		snap = in.build(st.FetchedAt, builder{})
	} else if snap, err = restoreSchemaErrors(st, in); err != nil {
		return nil, err
	}
	snap.Version = st.Version // differs from snap.inputs for formats 1 and 2
	if snap.search != nil && st.Embeddings != nil {
		// Malformed vectors are dropped, not fatal: they are recomputed.
		if vecs, err := st.Embeddings.decode(); err == nil {
			snap.search.stored = &restoredEmbeddings{model: st.Embeddings.Model, vecs: vecs}
		}
	}
	return snap, nil
}

// restoreSchemaErrors builds a format-2 snapshot lazily, with the entries
// that were rejected for their schema rejected again.
func restoreSchemaErrors(st storedSnapshot, in *inputs) (*Snapshot, error) {
	b := builder{lazy: true, schemaErrs: map[string]map[int]string{}}
	for svc, errs := range st.SchemaErrors {
		m := in.manifests[svc]
		if m == nil {
			return nil, fmt.Errorf("unmarshal snapshot of route %q: schema errors for unknown tool service %q", st.Route.Key, svc)
		}
		byIndex := make(map[int]string, len(errs))
		for _, e := range errs {
			if e.Index < 0 || e.Index >= len(m.Tools) || e.Reason == "" {
				return nil, fmt.Errorf("unmarshal snapshot of route %q: invalid schema error entry %d of tool service %q", st.Route.Key, e.Index, svc)
			}
			byIndex[e.Index] = e.Reason
		}
		b.schemaErrs[svc] = byIndex
	}
	return in.build(st.FetchedAt, b), nil
}
