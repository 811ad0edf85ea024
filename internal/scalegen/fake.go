package scalegen

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/toolmesh/toolmesh/registry"
)

// Source is a Portal that serves a fixed listing from memory.
type Source struct{ Listing registry.Listing }

// List implements [registry.Source].
func (s Source) List(context.Context) (*registry.Listing, error) {
	l := s.Listing
	l.Routes = slices.Clone(s.Listing.Routes)
	return &l, nil
}

// Fetcher serves the catalog's manifests from memory; Set replaces one, as a
// Tool Service that was redeployed.
type Fetcher struct {
	mu sync.RWMutex
	m  map[string]*registry.Manifest
}

// Fetcher returns a Fetcher of the catalog's manifests.
func (c *Catalog) Fetcher() *Fetcher {
	f := &Fetcher{m: make(map[string]*registry.Manifest, len(c.Manifests))}
	for k, v := range c.Manifests {
		f.m[k] = v
	}
	return f
}

// Fetch implements [registry.ManifestFetcher].
func (f *Fetcher) Fetch(_ context.Context, svc registry.ToolService) (*registry.Manifest, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if m := f.m[svc.Name]; m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("no manifest for tool service %q", svc.Name)
}

// Set replaces the manifest of Tool Service name.
func (f *Fetcher) Set(name string, m *registry.Manifest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[name] = m
}
