package refresher

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/refreshtest"
	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/internal/scalegen"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/memstore"
)

func TestRegistryWarmStartSkipsForeignServices(t *testing.T) {
	first := newEnv(t)
	first.start(t)
	// The Portal now serves alpha from other Tool Services; the stored
	// alpha would route to a cluster that no longer exists.
	second := newEnv(t, func(o *Options) { o.Store = first.store })
	second.portal.Set(registrytest.ModeOK, second.listing(
		strings.Replace(second.alphaDef, `"name":"a"`, `"name":"a2"`, 1), second.betaDef))
	second.a.Set(registrytest.ModeFail, "")
	second.b.Set(registrytest.ModeFail, "")
	second.shared.Set(registrytest.ModeFail, "")
	second.start(t)
	if second.reg.Snapshot("alpha") != nil {
		t.Error("a stored snapshot of other tool services was served")
	}
	if st := refreshtest.RouteStatus(t, second.reg, "alpha"); !strings.Contains(st.StoreError, "no longer lists") {
		t.Errorf("alpha = %+v", st)
	}
	if second.reg.Snapshot("beta") == nil {
		t.Error("beta, unchanged, must warm-start")
	}
}

// slowStore is a Store whose every Load takes delay, as a Store far away or
// busy would.
type slowStore struct {
	registry.Store
	delay time.Duration
	loads atomic.Int64
}

func (s *slowStore) Load(ctx context.Context, route string) (*registry.Snapshot, error) {
	s.loads.Add(1)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Load(ctx, route)
}

// warmStartCatalog is n routes sharing one Tool Service of one tool.
func warmStartCatalog(n int) (scalegen.Source, *scalegen.Fetcher) {
	c := &scalegen.Catalog{Manifests: map[string]*registry.Manifest{
		"svc": {Tools: []registry.ManifestTool{{Name: "echo", Version: "1",
			InputSchema: json.RawMessage(`{"type":"object"}`)}}},
	}}
	for i := range n {
		c.Listing.Routes = append(c.Listing.Routes, registry.Route{Key: scalegen.RouteKey(i),
			ToolServices: []registry.ToolService{{Name: "svc", URL: "http://svc.tools:8080"}}})
	}
	return scalegen.Source{Listing: c.Listing}, c.Fetcher()
}

// TestWarmStartBoundPerChunk checks that fetchTimeout bounds each chunk of
// the warm start, not the whole of it: a catalog whose stored snapshots take
// longer than fetchTimeout to load in total, but each chunk well within it,
// starts with every route restored. One bound on the whole warm start (as
// before) restored only the routes loaded within it. A Store that times out
// within a chunk ends the warm start there.
func TestWarmStartBoundPerChunk(t *testing.T) {
	const routes = 8*warmStartChunk + 1 // nine chunks
	src, fetch := warmStartCatalog(routes)
	store := memstore.New()
	seed := New(Options{Source: src, Fetcher: fetch, Store: store, FetchTimeout: time.Minute})
	if err := seed.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, rt := range src.Listing.Routes {
		if seed.Snapshot(rt.Key) == nil {
			t.Fatalf("route %s not built", rt.Key)
		}
	}

	for _, tc := range []struct {
		name     string
		delay    time.Duration // per Load; StoreWorkers loads run at once
		timeout  time.Duration
		restored int
	}{
		// A chunk: 256 loads, 8 at a time, 12 ms each: about 400 ms, a
		// fifth of the 2 s fetchTimeout; the nine chunks together over
		// 3 s (timers never fire early).
		{"each chunk in time", 12 * time.Millisecond, 2 * time.Second, routes},
		// The first chunk runs out of time: what it loaded is served,
		// nothing after it is tried.
		{"store too slow", 200 * time.Millisecond, 2 * time.Second, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slow := &slowStore{Store: store, delay: tc.delay}
			reg := New(Options{Source: src, Fetcher: hangingFetcher{}, Store: slow,
				FetchTimeout: tc.timeout, StoreWorkers: 8, ReadyAfterWarmStart: true})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			start := time.Now()
			if err := reg.Start(ctx); err != nil {
				t.Fatal(err)
			}
			restored := 0
			for _, rt := range src.Listing.Routes {
				if reg.Snapshot(rt.Key) != nil {
					restored++
				}
			}
			t.Logf("%d of %d routes restored in %v, %d loads", restored, routes, time.Since(start), slow.loads.Load())
			took := time.Since(start)
			if tc.restored == routes {
				if restored != routes {
					t.Errorf("%d routes restored, want all %d", restored, routes)
				}
				if took < tc.timeout {
					t.Errorf("the warm start took %v, less than fetchTimeout %v: the test does not show a bound per chunk", took, tc.timeout)
				}
				return
			}
			if restored == 0 || restored >= warmStartChunk {
				t.Errorf("%d routes restored, want the part of the first chunk loaded in time", restored)
			}
			if n := slow.loads.Load(); n > warmStartChunk {
				t.Errorf("%d loads: chunks after the first, which timed out, were tried", n)
			}
		})
	}
}

// hangingFetcher is Tool Services that never answer, so every snapshot
// served comes from the Store.
type hangingFetcher struct{}

func (hangingFetcher) Fetch(ctx context.Context, _ registry.ToolService) (*registry.Manifest, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
