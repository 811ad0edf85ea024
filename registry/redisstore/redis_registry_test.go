package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/refreshtest"
	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/fetch"
	"github.com/toolmesh/toolmesh/registry/refresher"
)

// recordingRedis logs the refresher's calls to a RedisStore.
type recordingRedis struct {
	*RedisStore
	rec *registrytest.Recorder
}

func (s recordingRedis) LoadMany(ctx context.Context, routes []string) ([]*registry.Snapshot, []error) {
	s.rec.Add("load " + strings.Join(routes, ","))
	return s.RedisStore.LoadMany(ctx, routes)
}

func (s recordingRedis) Sync(ctx context.Context, snaps []*registry.Snapshot) []error {
	var names []string
	for _, sn := range snaps {
		names = append(names, sn.Route)
	}
	s.rec.Add("sync " + strings.Join(names, ","))
	return s.RedisStore.Sync(ctx, snaps)
}

func (s recordingRedis) LoadListing(ctx context.Context) (*registry.Listing, error) {
	s.rec.Add("load-listing")
	return s.RedisStore.LoadListing(ctx)
}

func (s recordingRedis) SaveListing(ctx context.Context, l *registry.Listing) error {
	s.rec.Add("save-listing")
	return s.RedisStore.SaveListing(ctx, l)
}

// gateFetcher holds every fetch until release is closed (or its context
// ends), and says when one has started.
type gateFetcher struct {
	registry.ManifestFetcher
	entered chan struct{}
	release chan struct{}
}

func newGateFetcher(f registry.ManifestFetcher) *gateFetcher {
	return &gateFetcher{ManifestFetcher: f, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *gateFetcher) Fetch(ctx context.Context, svc registry.ToolService) (*registry.Manifest, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.ManifestFetcher.Fetch(ctx, svc)
}

// withRedis makes an env use a recording Redis store on srv.
func withRedis(t *testing.T, srv *redisServer, rec *registrytest.Recorder, ropts RedisOptions) func(*refresher.Options) {
	return func(o *refresher.Options) {
		o.Store = recordingRedis{newRedisStore(t, srv, ropts), rec}
	}
}

func TestRegistryRedisStartOrder(t *testing.T) {
	srv := startRedis(t, "")
	rec := &registrytest.Recorder{}
	e := newEnv(t, withRedis(t, srv, rec, RedisOptions{}), func(o *refresher.Options) {
		o.Source = refreshtest.RecordingSource{Source: o.Source, Rec: rec}
		o.Fetcher = refreshtest.RecordingFetcher{ManifestFetcher: o.Fetcher, Rec: rec}
	})
	e.start(t)
	events := rec.List()
	want := []string{"list", "load alpha,beta", "save-listing"}
	if len(events) < 6 || !slices.Equal(events[:3], want) || events[len(events)-1] != "sync alpha,beta" {
		t.Fatalf("events = %q, want %q, then the fetches, then one sync", events, want)
	}
	for _, ev := range events[3 : len(events)-1] {
		if !strings.HasPrefix(ev, "fetch ") {
			t.Fatalf("events = %q: only fetches between the warm start and the sync", events)
		}
	}
	c := srv.client()
	defer c.Close()
	for _, key := range []string{"toolmesh:route:alpha", "toolmesh:route:beta", "toolmesh:route:_listing"} {
		if n, _ := c.Exists(t.Context(), key).Result(); n != 1 {
			t.Errorf("%s not written", key)
		}
	}
	v, _ := c.HGet(t.Context(), "toolmesh:route:alpha", "version").Result()
	if v != e.reg.Snapshot("alpha").Version {
		t.Errorf("stored version %q, serving %q", v, e.reg.Snapshot("alpha").Version)
	}
	h := e.reg.Health()
	if h.Store == nil || h.Store.Backend != "redis" || !h.Store.Reachable || h.Store.LastOKAt == nil {
		t.Errorf("health store = %+v", h.Store)
	}
	if st := e.route(t, "alpha"); st.Restored || st.StoreError != "" {
		t.Errorf("alpha = %+v", st)
	}
}

func TestRegistryRedisWarmStart(t *testing.T) {
	srv := startRedis(t, "")
	first := newEnv(t, withRedis(t, srv, &registrytest.Recorder{}, RedisOptions{}))
	first.start(t)
	want := first.reg.Snapshot("alpha")
	c := srv.client()
	defer c.Close()
	c.Set(t.Context(), "toolmesh:route:beta", "garbage", 0)

	// A new process: the Portal answers; the Tool Services answer only when
	// the test lets them.
	gate := newGateFetcher(fetch.NewHTTPFetcher(nil, 0))
	second := newEnv(t, withRedis(t, srv, &registrytest.Recorder{}, RedisOptions{}), func(o *refresher.Options) {
		o.Source = fetch.NewHTTPSource(first.portal.URL, nil)
		o.Fetcher = gate
		o.FetchTimeout = 30 * time.Second
		o.ReadyAfterWarmStart = true
	})
	reg := second.reg
	if err := reg.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Start returned with the warm snapshots served, before any manifest.
	if !reg.Ready() {
		t.Fatal("not ready after a warm start")
	}
	key, snap, ok := reg.Lookup("/mcp/alpha")
	if !ok || key != "alpha" || snap == nil || snap.Version != want.Version {
		t.Fatalf("Lookup(/mcp/alpha) = %q %v %v", key, snap, ok)
	}
	if tool, _ := snap.Lookup("a_one"); tool == nil || tool.ValidateArguments([]byte(`{}`)) != nil {
		t.Error("a restored tool must validate")
	}
	if st := refreshtest.RouteStatus(t, reg, "alpha"); !st.Restored || st.StoreError != "" {
		t.Errorf("alpha = %+v, want restored", st)
	}
	if st := refreshtest.RouteStatus(t, reg, "beta"); st.Restored || !strings.Contains(st.StoreError, "load: ") || reg.Snapshot("beta") != nil {
		t.Errorf("beta = %+v, want its garbage reported and no snapshot", st)
	}
	<-gate.entered
	if st := refreshtest.RouteStatus(t, reg, "alpha"); !st.Restored || st.LastRefresh != nil {
		t.Fatalf("alpha = %+v: refreshed while every fetch is held", st)
	}

	close(gate.release)
	waitFor(t, 10*time.Second, "the first refresh", func() (bool, string) {
		alpha, beta := refreshtest.RouteStatus(t, reg, "alpha"), refreshtest.RouteStatus(t, reg, "beta")
		if alpha.Restored || alpha.LastRefresh == nil {
			return false, fmt.Sprintf("alpha = %+v", alpha)
		}
		snap := reg.Snapshot("beta")
		if beta.StoreError != "" || snap == nil {
			return false, fmt.Sprintf("beta = %+v: the refresh must replace the garbage", beta)
		}
		if v, _ := c.HGet(t.Context(), "toolmesh:route:beta", "version").Result(); v != snap.Version {
			return false, fmt.Sprintf("beta's key not repaired: version %q", v)
		}
		return true, ""
	})
}

func TestRegistryRedisColdStartPortalDown(t *testing.T) {
	srv := startRedis(t, "")
	first := newEnv(t, withRedis(t, srv, &registrytest.Recorder{}, RedisOptions{}))
	first.start(t)

	rec := &registrytest.Recorder{}
	second := newEnv(t, withRedis(t, srv, rec, RedisOptions{}), func(o *refresher.Options) {
		o.Fetcher = newGateFetcher(fetch.NewHTTPFetcher(nil, 0)) // Tool Services hang too
		o.ReadyAfterWarmStart = true
	})
	second.portal.Set(registrytest.ModeFail, "")
	if err := second.reg.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	reg := second.reg
	if !reg.Ready() {
		t.Fatalf("not ready: %+v", reg.Health())
	}
	if events := rec.List(); !slices.Equal(events, []string{"load-listing", "load alpha,beta"}) {
		t.Errorf("store events = %q", events)
	}
	for path, key := range map[string]string{"/mcp/alpha": "alpha", "/tools/beta": "beta"} {
		k, snap, ok := reg.Lookup(path)
		if !ok || k != key || snap == nil || snap.Version != first.reg.Snapshot(key).Version {
			t.Errorf("Lookup(%s) = %q %v %v", path, k, snap, ok)
		}
	}
	h := reg.Health()
	if !h.ListingRestored || h.PortalError == "" || h.LastListing != nil || len(h.Routes) != 2 || !h.Routes[0].Restored {
		t.Errorf("health = %+v", h)
	}

	// The Portal comes back without alpha: now, and only now, alpha goes.
	second.portal.Set(registrytest.ModeOK, second.listing(second.betaDef))
	_ = reg.Refresh(t.Context()) // its held fetches time out; the listing is what counts
	if _, _, ok := reg.Lookup("/mcp/alpha"); ok {
		t.Error("alpha still served after a successful listing dropped it")
	}
	if h := reg.Health(); h.ListingRestored || h.PortalError != "" {
		t.Errorf("health after the Portal answered = %+v", h)
	}

	// No stored listing: nothing to serve, and Start still returns.
	empty := startRedis(t, "")
	third := newEnv(t, withRedis(t, empty, &registrytest.Recorder{}, RedisOptions{}))
	third.portal.Set(registrytest.ModeFail, "")
	third.start(t)
	if third.reg.Ready() || len(third.reg.Routes()) != 0 || third.reg.Health().ListingRestored {
		t.Errorf("health = %+v", third.reg.Health())
	}
}

func TestRegistryRedisRestart(t *testing.T) {
	srv := startRedis(t, "")
	metrics := prometheus.NewRegistry()
	e := newEnv(t, withRedis(t, srv, &registrytest.Recorder{}, RedisOptions{OpTimeout: 200 * time.Millisecond, Registerer: metrics}), func(o *refresher.Options) {
		o.FetchTimeout = 2 * time.Second
	})
	e.start(t)

	srv.stop()
	e.a.Set(registrytest.ModeOK, registrytest.ToolsDoc("a_new"))
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh with Redis down = %v; Redis must not fail a refresh", err)
	}
	if got := toolNames(e.reg.Snapshot("alpha")); !slices.Equal(got, []string{"a_new", "s_one"}) {
		t.Errorf("alpha = %q: refreshing must go on without Redis", got)
	}
	h := e.reg.Health()
	if h.Store == nil || h.Store.Reachable || h.Store.LastError == "" {
		t.Errorf("health store = %+v, want unreachable", h.Store)
	}
	if st := e.route(t, "alpha"); !strings.Contains(st.StoreError, "save: ") {
		t.Errorf("alpha = %+v, want its store error", st)
	}

	// A new, empty Redis on the same port: the next refresh fills it.
	srv.restart()
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	h = e.reg.Health()
	if h.Store == nil || !h.Store.Reachable {
		t.Errorf("health store after restart = %+v", h.Store)
	}
	for _, key := range []string{"alpha", "beta"} {
		if st := e.route(t, key); st.StoreError != "" {
			t.Errorf("%s = %+v, want the store error cleared", key, st)
		}
	}
	fresh := newRedisStore(t, srv, RedisOptions{})
	for _, key := range []string{"alpha", "beta"} {
		got, err := fresh.Load(t.Context(), key)
		if err != nil || got == nil || got.Version != e.reg.Snapshot(key).Version {
			t.Errorf("%s in the restarted Redis = %v, %v", key, got, err)
		}
	}
	if l, err := fresh.LoadListing(t.Context()); err != nil || l == nil || len(l.Routes) != 2 {
		t.Errorf("listing in the restarted Redis = %v, %v", l, err)
	}
	if n := redisOps(t, metrics, "check", "timeout") + redisOps(t, metrics, "check", "error"); n == 0 {
		t.Error("the failed checks while Redis was down are not counted")
	}
}

func TestRegistryRedisDownAtStart(t *testing.T) {
	addr := fmt.Sprintf("redis://127.0.0.1:%d", freePort(t))
	st, err := NewRedisStore(RedisOptions{URL: addr, OpTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := newEnv(t, func(o *refresher.Options) { o.Store = st; o.ReadyAfterWarmStart = true })
	e.start(t)
	if !e.reg.Ready() || e.reg.Snapshot("alpha") == nil {
		t.Fatal("Redis down must not stop serving")
	}
	h := e.reg.Health()
	if h.Store == nil || h.Store.Reachable || h.Store.Target != addr {
		t.Errorf("health store = %+v", h.Store)
	}
	if rs := e.route(t, "alpha"); !strings.Contains(rs.StoreError, "save: ") || rs.LastError != "" {
		t.Errorf("alpha = %+v", rs)
	}
}
