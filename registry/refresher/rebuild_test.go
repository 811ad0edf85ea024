package refresher_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/scalegen"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/refresher"
)

// TestRefreshRebuildsOnlyAffectedRoutes changes Tool Services between two
// refreshes and counts the routes whose snapshot was rebuilt (a route whose
// inputs did not change keeps its snapshot pointer): exactly the routes that
// use a changed service, however many routes share it.
func TestRefreshRebuildsOnlyAffectedRoutes(t *testing.T) {
	// Six routes: route i uses own-i and shared-(i%2), so each shared
	// service serves three routes.
	c := &scalegen.Catalog{Manifests: map[string]*registry.Manifest{}}
	svc := func(name string) registry.ToolService {
		return registry.ToolService{Name: name, URL: "http://127.0.0.1:9/" + name}
	}
	for g := range 2 {
		name := scalegen.SharedService(g)
		c.Manifests[name] = scalegen.Manifest(name, 3, 0)
	}
	for i := range 6 {
		own := scalegen.OwnService(i)
		c.Manifests[own] = scalegen.Manifest(own, 2, 0)
		c.Listing.Routes = append(c.Listing.Routes, registry.Route{
			Key:          scalegen.RouteKey(i),
			ToolServices: []registry.ToolService{svc(own), svc(scalegen.SharedService(i % 2))},
		})
	}
	tests := []struct {
		name    string
		changed []string // Tool Services given a new manifest revision
		want    []int    // routes rebuilt
	}{
		{"nothing changed", nil, nil},
		{"one shared service", []string{scalegen.SharedService(0)}, []int{0, 2, 4}},
		{"one own service", []string{scalegen.OwnService(3)}, []int{3}},
		{"own and shared", []string{scalegen.OwnService(1), scalegen.SharedService(0)}, []int{0, 1, 2, 4}},
		{"both shared", []string{scalegen.SharedService(0), scalegen.SharedService(1)}, []int{0, 1, 2, 3, 4, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := c.Fetcher()
			reg := refresher.New(refresher.Options{Source: scalegen.Source{Listing: c.Listing}, Fetcher: f, Interval: time.Hour})
			if err := reg.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			before := snapshots(reg, c)
			for k, s := range before {
				if s == nil {
					t.Fatalf("route %s has no snapshot after Start: %+v", k, reg.Health())
				}
			}
			for _, name := range tt.changed {
				n := len(c.Manifests[name].Tools)
				f.Set(name, scalegen.Manifest(name, n, 1))
			}
			if err := reg.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, i := range tt.want {
				want = append(want, scalegen.RouteKey(i))
			}
			if got := changedRoutes(before, snapshots(reg, c)); !slices.Equal(got, want) {
				t.Errorf("rebuilt routes %v, want %v", got, want)
			}
			// A rebuilt route serves the new revision.
			for _, key := range want {
				s := reg.Snapshot(key)
				var rev1 bool
				for _, tool := range s.Tools {
					rev1 = rev1 || tool.Version == "1.1.0"
				}
				if !rev1 {
					t.Errorf("route %s rebuilt without the new revision: %v", key, fmt.Sprint(s.Tools[0].Version))
				}
			}
		})
	}
}
