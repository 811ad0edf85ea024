package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/refreshtest"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/refresher"
)

// hangingFetcher never answers before its context ends, like Tool Services
// that are slow at a cold start.
type hangingFetcher struct{}

func (hangingFetcher) Fetch(ctx context.Context, svc registry.ToolService) (*registry.Manifest, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// staticSource serves a fixed listing from memory.
type staticSource struct{ l registry.Listing }

func (s staticSource) List(context.Context) (*registry.Listing, error) {
	l := s.l
	l.Routes = slices.Clone(s.l.Routes)
	return &l, nil
}

// warmRoutes returns n routes of one Tool Service each, and their
// snapshots with tools tools each (names and schemas differ per route).
func warmRoutes(b *testing.B, n, tools int) (registry.Listing, []*registry.Snapshot) {
	b.Helper()
	var l registry.Listing
	snaps := make([]*registry.Snapshot, n)
	for i := range n {
		key := fmt.Sprintf("r%04d", i)
		svc := registry.ToolService{Name: "s" + key, URL: "http://127.0.0.1:9/" + key}
		r := registry.Route{Key: key, ToolServices: []registry.ToolService{svc}}
		m := &registry.Manifest{}
		for j := range tools {
			m.Tools = append(m.Tools, registry.ManifestTool{
				Name:        fmt.Sprintf("%s_tool_%02d", key, j),
				Version:     "1",
				Description: fmt.Sprintf("Tool %d of route %s does one thing well", j, key),
				InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"q%d":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1}},"required":["q%d"],"additionalProperties":false}`, i*100+j, i*100+j)),
			})
		}
		s, err := registry.BuildSnapshot(r, map[string]*registry.Manifest{svc.Name: m}, t0)
		if err != nil {
			b.Fatal(err)
		}
		snaps[i] = s
		l.Routes = append(l.Routes, r)
	}
	if err := l.Validate(); err != nil {
		b.Fatal(err)
	}
	return l, snaps
}

// BenchmarkWarmStart1000Routes measures a cold start that serves from Redis:
// 1,000 route snapshots (10 tools each) are in a real Redis; a new registry
// with a fresh store lists the routes, warm-starts them all from Redis, and
// is ready with all 1,000 served, while every manifest fetch hangs. One op is
// Start (listing, warm start) until it returns ready.
func BenchmarkWarmStart1000Routes(b *testing.B) {
	const routes = 1000
	srv := startRedis(b, "")
	l, snaps := warmRoutes(b, routes, 10)
	seed := newRedisStore(b, srv, RedisOptions{})
	for i, err := range seed.Sync(b.Context(), snaps) {
		if err != nil {
			b.Fatalf("seed %s: %v", snaps[i].Route, err)
		}
	}
	c := srv.client()
	defer c.Close()
	var mem, strlen int64
	for _, s := range snaps {
		n, err := c.MemoryUsage(b.Context(), "toolmesh:route:"+s.Route).Result()
		if err != nil {
			b.Fatal(err)
		}
		mem += n
		sl, _ := c.HStrLen(b.Context(), "toolmesh:route:"+s.Route, "snapshot").Result()
		strlen += sl
	}

	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		st, err := NewRedisStore(RedisOptions{URL: srv.url()})
		if err != nil {
			b.Fatal(err)
		}
		reg := refresher.New(refresher.Options{
			Source:              staticSource{l},
			Fetcher:             hangingFetcher{},
			Store:               st,
			FetchTimeout:        time.Minute,
			ReadyAfterWarmStart: true,
		})
		ctx, cancel := context.WithCancel(b.Context())
		b.StartTimer()

		if err := reg.Start(ctx); err != nil || !reg.Ready() {
			b.Fatalf("Start() = %v, ready %v", err, reg.Ready())
		}

		b.StopTimer()
		for _, s := range snaps {
			if _, got, ok := reg.Lookup("/mcp/" + s.Route); !ok || got == nil || got.Version != s.Version {
				b.Fatalf("route %s not served from Redis: %+v", s.Route, refreshtest.RouteStatus(b, reg, s.Route))
			}
		}
		// The first cycle goes on in the background until ctx is done; a
		// store operation it still makes fails on the closed client, which
		// the registry only records.
		cancel()
		_ = st.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(mem)/routes, "redis-B/route")
	b.ReportMetric(float64(strlen)/routes, "snapshot-B/route")
}
