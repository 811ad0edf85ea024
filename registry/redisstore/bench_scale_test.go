package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/refreshtest"
	"github.com/toolmesh/toolmesh/internal/scalegen"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/refresher"
)

// BenchmarkScaleWarmStart measures a warm start from a real Redis at the
// catalog sizes of scalegen.Sizes (TOOLMESH_BENCH_SCALE): every route's
// snapshot is in Redis, a new registry with a fresh store lists the routes
// and serves them all from Redis while every manifest fetch hangs. One op
// is Start until it returns ready. Its growth sub-benchmark fails when the
// time per tool grows faster than linear from one size to the next.
func BenchmarkScaleWarmStart(b *testing.B) {
	sizes := scalegen.Sizes(b)
	res := scalegen.Results{}
	srv := startRedis(b, "")
	for _, n := range sizes {
		c := scalegen.Generate(n)
		pairs := float64(c.RouteTools())
		snaps := seedScale(b, srv, c)
		c.Manifests = nil // the Tool Services' side is not needed any more
		b.Run(fmt.Sprintf("routes=%d/warm-start", n), func(b *testing.B) {
			var heap float64
			for b.Loop() {
				b.StopTimer()
				base := scalegen.HeapInUse()
				st, err := NewRedisStore(RedisOptions{URL: srv.url()})
				if err != nil {
					b.Fatal(err)
				}
				reg := refresher.New(refresher.Options{
					Source:              scalegen.Source{Listing: c.Listing},
					Fetcher:             hangingFetcher{},
					Store:               st,
					FetchTimeout:        10 * time.Minute,
					ReadyAfterWarmStart: true,
				})
				ctx, cancel := context.WithCancel(context.Background())
				b.StartTimer()
				if err := reg.Start(ctx); err != nil || !reg.Ready() {
					b.Fatalf("Start() = %v, ready %v", err, reg.Ready())
				}
				b.StopTimer()
				heap = float64(scalegen.HeapInUse()) - float64(base)
				for _, rt := range c.Listing.Routes {
					if _, got, ok := reg.Lookup(rt.Path()); !ok || got == nil || got.Version != snaps[rt.Key] {
						b.Fatalf("route %s not served from Redis: %+v", rt.Key, refreshtest.RouteStatus(b, reg, rt.Key))
					}
				}
				cancel()
				_ = st.Close()
				b.StartTimer()
			}
			perPair := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / pairs
			res.Set("warm-start-per-tool", n, perPair)
			res.Set("restored-heap-per-tool", n, heap/pairs)
			b.ReportMetric(perPair, "ns/tool")
			b.ReportMetric(heap/(1<<20), "heap-MB")
			b.ReportMetric(heap/pairs, "heap-B/tool")
		})
		if err := srv.client().FlushAll(context.Background()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	res.CheckGrowth(b, sizes,
		scalegen.Bound{Metric: "warm-start-per-tool", Max: 4},
		scalegen.Bound{Metric: "restored-heap-per-tool", Max: 2},
	)
}

// seedScale builds every route of c in memory, writes the snapshots to
// Redis and returns their versions by route.
func seedScale(b *testing.B, srv *redisServer, c *scalegen.Catalog) map[string]string {
	b.Helper()
	reg := refresher.New(refresher.Options{Source: scalegen.Source{Listing: c.Listing}, Fetcher: c.Fetcher(), Interval: time.Hour, FetchTimeout: 10 * time.Minute})
	if err := reg.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	snaps := make([]*registry.Snapshot, 0, len(c.Listing.Routes))
	versions := make(map[string]string, len(c.Listing.Routes))
	for _, rt := range c.Listing.Routes {
		s := reg.Snapshot(rt.Key)
		if s == nil {
			b.Fatalf("route %s not built: %+v", rt.Key, refreshtest.RouteStatus(b, reg, rt.Key))
		}
		snaps = append(snaps, s)
		versions[rt.Key] = s.Version
	}
	seed := newRedisStore(b, srv, RedisOptions{OpTimeout: time.Minute})
	// Sync in slices: one pipeline of every snapshot of a large catalog
	// would be held in memory whole.
	for i := 0; i < len(snaps); i += 500 {
		part := snaps[i:min(i+500, len(snaps))]
		for j, err := range seed.Sync(context.Background(), part) {
			if err != nil {
				b.Fatalf("seed %s: %v", part[j].Route, err)
			}
		}
	}
	return versions
}
