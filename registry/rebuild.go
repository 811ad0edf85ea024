package registry

import (
	"errors"
	"fmt"
	"time"
)

// What the refresher (registry/refresher) needs from a snapshot and the
// listing model, without reaching into either.

// RebuildCanonical builds route's snapshot from manifests (keyed by Tool
// Service name, already canonicalized: see Canonicalize) as BuildSnapshot
// does, unless cur already has that content: then it returns nil, nil, and
// the caller keeps cur (and its pointer). A restored cur whose schema failed
// on first use is rebuilt even so, so the tool is rejected rather than
// failing every call. The refresher canonicalizes each fetched manifest once
// per cycle, however many routes use it.
func RebuildCanonical(route Route, cur *Snapshot, manifests map[string]*Canonical, fetchedAt time.Time) (*Snapshot, error) {
	in, err := prepare(route, manifests)
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.inputs == in.version && !cur.lazyFailed() {
		return nil, nil
	}
	return in.build(fetchedAt, builder{}), nil
}

// CheckCatalogOverride checks one route's catalog override of the toolmesh
// config file like the listing's catalog object; each error names the route
// and the field.
func CheckCatalogOverride(key string, c Catalog) error {
	var errs []error
	if !nameRE.MatchString(key) {
		errs = append(errs, fmt.Errorf("catalog override for %q: route key must match %s", key, nameRE))
	}
	for _, err := range c.check() {
		errs = append(errs, fmt.Errorf("catalog override for route %q: catalog.%w", key, err))
	}
	return errors.Join(errs...)
}

// ToolServices returns the Tool Services the snapshot was built from, in
// the route's order. The slice is shared and must not be modified.
func (s *Snapshot) ToolServices() []ToolService { return s.def.ToolServices }
