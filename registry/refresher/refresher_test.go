package refresher

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/refreshtest"
	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/fetch"
)

// env is a fake Portal and three fake Tool Services on 127.0.0.1:
// route alpha uses services a and shared; route beta uses b and shared.
type env struct {
	portal            *registrytest.FakeServer
	a, b, shared      *registrytest.FakeServer
	rec               *registrytest.Recorder
	store             *jsonStore
	clock             *clock
	reg               *Registry
	alphaDef, betaDef string
}

func newEnv(t *testing.T, options ...func(*Options)) *env {
	t.Helper()
	e := &env{rec: &registrytest.Recorder{}, clock: newClock()}
	e.a = registrytest.NewFakeServer(t, "/manifest", registrytest.ToolsDoc("a_one", "a_two"))
	e.b = registrytest.NewFakeServer(t, "/manifest", registrytest.ToolsDoc("b_one"))
	e.shared = registrytest.NewFakeServer(t, "/manifest", registrytest.ToolsDoc("s_one"))
	e.alphaDef = fmt.Sprintf(`{"key":"alpha","toolServices":[{"name":"a","url":%q},{"name":"shared","url":%q}]}`, e.a.URL, e.shared.URL)
	e.betaDef = fmt.Sprintf(`{"key":"beta","publicPath":"/tools/beta","toolServices":[{"name":"b","url":%q},{"name":"shared","url":%q}]}`, e.b.URL, e.shared.URL)
	e.portal = registrytest.NewFakeServer(t, "/v1/routes", e.listing(e.alphaDef, e.betaDef))
	e.store = newJSONStore(e.rec)
	opts := Options{
		Source:       refreshtest.RecordingSource{Source: fetch.NewHTTPSource(e.portal.URL, e.portal.Client()), Rec: e.rec},
		Fetcher:      refreshtest.RecordingFetcher{ManifestFetcher: fetch.NewHTTPFetcher(e.a.Client(), 0), Rec: e.rec},
		Store:        e.store,
		FetchTimeout: 300 * time.Millisecond,
		Workers:      2,
		Now:          e.clock.now,
	}
	for _, o := range options {
		o(&opts)
	}
	e.reg = New(opts)
	return e
}

func (e *env) listing(routes ...string) string {
	return `{"routes":[` + strings.Join(routes, ",") + `]}`
}

func (e *env) start(t *testing.T) {
	t.Helper()
	if err := e.reg.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
}

func (e *env) route(t *testing.T, key string) registry.RouteStatus {
	t.Helper()
	return refreshtest.RouteStatus(t, e.reg, key)
}

func TestRegistryStart(t *testing.T) {
	e := newEnv(t)
	if e.reg.Ready() {
		t.Fatal("ready before Start")
	}
	if _, _, ok := e.reg.Lookup("/mcp/alpha"); ok {
		t.Fatal("lookup before Start")
	}
	e.start(t)

	events := e.rec.List()
	if events[0] != "list" || !slices.Contains(events, "load alpha") || !slices.Contains(events, "load beta") {
		t.Fatalf("events = %q", events)
	}
	lastLoad := max(slices.Index(events, "load alpha"), slices.Index(events, "load beta"))
	firstFetch := slices.IndexFunc(events, func(ev string) bool { return strings.HasPrefix(ev, "fetch ") })
	if firstFetch < lastLoad {
		t.Errorf("start-up order must be listing, warm start, manifests: %q", events)
	}
	if n := e.shared.Hits.Load(); n != 1 {
		t.Errorf("shared service fetched %d times in one cycle, want 1", n)
	}
	if !e.reg.Ready() {
		t.Fatal("not ready after Start")
	}

	key, snap, ok := e.reg.Lookup("/mcp/alpha")
	if !ok || key != "alpha" || snap == nil {
		t.Fatalf("Lookup(/mcp/alpha) = %q %v %v", key, snap, ok)
	}
	if got := toolNames(snap); !slices.Equal(got, []string{"a_one", "a_two", "s_one"}) {
		t.Errorf("alpha tools = %q", got)
	}
	if key, snap, ok := e.reg.Lookup("/tools/beta"); !ok || key != "beta" || snap != e.reg.Snapshot("beta") {
		t.Errorf("Lookup(/tools/beta) = %q %v %v", key, snap, ok)
	}
	for _, p := range []string{"/mcp/beta", "/mcp/alpha/", "/mcp/alph", "/mcp", ""} {
		if _, _, ok := e.reg.Lookup(p); ok {
			t.Errorf("Lookup(%q) matched", p)
		}
	}
	if got := e.reg.Routes(); len(got) != 2 || got[0].Key != "alpha" || got[1].Key != "beta" {
		t.Errorf("Routes() = %+v", got)
	}
	if e.store.data["alpha"] == nil || e.store.data["beta"] == nil {
		t.Error("snapshots not saved to the store after the first refresh")
	}

	e.clock.advance(90 * time.Second)
	h := e.reg.Health()
	if !h.Ready || h.PortalError != "" || len(h.RoutesWithoutSnapshot) != 0 || h.RoutesWithoutSnapshot == nil || len(h.Routes) != 2 {
		t.Fatalf("health = %+v", h)
	}
	a := h.Routes[0]
	if a.Key != "alpha" || a.PublicPath != "/mcp/alpha" || a.SnapshotVersion != snap.Version || a.Tools != 3 ||
		a.SnapshotAge != "1m30s" || a.LastError != "" || a.FetchedAt == nil || !a.FetchedAt.Equal(t0) {
		t.Errorf("alpha status = %+v", a)
	}
	if b, err := json.Marshal(h); err != nil || !strings.Contains(string(b), `"routesWithoutSnapshot":[]`) {
		t.Errorf("health JSON = %s, %v", b, err)
	}
}

func TestRegistryRouteIsolation(t *testing.T) {
	for _, mode := range []string{registrytest.ModeFail, registrytest.ModeHang, registrytest.ModeGarbage, registrytest.ModeHTML} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			e.start(t)
			alpha, beta := e.reg.Snapshot("alpha"), e.reg.Snapshot("beta")

			e.a.Set(mode, "")
			e.b.Set(registrytest.ModeOK, registrytest.ToolsDoc("b_one", "b_two"))
			e.clock.advance(time.Minute)
			err := e.reg.Refresh(t.Context())
			if err == nil || !strings.Contains(err.Error(), `route "alpha"`) || strings.Contains(err.Error(), `route "beta"`) {
				t.Fatalf("Refresh() = %v, want only alpha to fail", err)
			}
			if got := e.reg.Snapshot("alpha"); got != alpha {
				t.Errorf("alpha lost its last good snapshot")
			}
			if _, snap, _ := e.reg.Lookup("/mcp/alpha"); snap != alpha {
				t.Errorf("Lookup serves another alpha snapshot")
			}
			nb := e.reg.Snapshot("beta")
			if nb.Version == beta.Version || !slices.Equal(toolNames(nb), []string{"b_one", "b_two", "s_one"}) {
				t.Errorf("beta did not refresh: %s %q", nb.Version, toolNames(nb))
			}
			if !e.reg.Ready() {
				t.Error("not ready while every route has a snapshot")
			}
			as := e.route(t, "alpha")
			if as.LastError == "" || !strings.Contains(as.LastError, `"a"`) || as.LastErrorAt == nil || !as.LastErrorAt.Equal(t0.Add(time.Minute)) {
				t.Errorf("alpha status = %+v, want its error recorded", as)
			}
			if as.SnapshotVersion != alpha.Version || as.Tools != 3 {
				t.Errorf("alpha status does not show the kept snapshot: %+v", as)
			}
			if bs := e.route(t, "beta"); bs.LastError != "" || bs.SnapshotVersion != nb.Version {
				t.Errorf("beta status = %+v", bs)
			}
			if n := e.shared.Hits.Load(); n != 2 {
				t.Errorf("shared service fetched %d times in two cycles, want 2", n)
			}
			stored, err := registry.UnmarshalSnapshot(e.store.data["beta"])
			if err != nil || stored.Version != nb.Version {
				t.Errorf("beta's new snapshot not saved: %v", err)
			}

			e.a.Set(registrytest.ModeOK, "")
			if err := e.reg.Refresh(t.Context()); err != nil {
				t.Fatalf("Refresh() after recovery = %v", err)
			}
			if as := e.route(t, "alpha"); as.LastError != "" || as.LastErrorAt != nil {
				t.Errorf("alpha error not cleared after recovery: %+v", as)
			}
			if e.reg.Snapshot("alpha") != alpha {
				t.Error("an unchanged manifest must keep the same snapshot")
			}
		})
	}
}

func TestRegistryPortalFailure(t *testing.T) {
	for _, tc := range []struct{ name, mode, body string }{
		{"server error", registrytest.ModeFail, ""},
		{"hang", registrytest.ModeHang, ""},
		{"garbage", registrytest.ModeGarbage, ""},
		{"invalid listing", registrytest.ModeOK, `{"routes":[{"key":"BAD","toolServices":[]}]}`},
		{"empty object", registrytest.ModeOK, `{}`},
		{"listing with no routes", registrytest.ModeOK, `{"routes":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.start(t)
			routes := e.reg.Routes()
			alpha := e.reg.Snapshot("alpha")
			ch, unsubscribe := e.reg.Subscribe()
			defer unsubscribe()

			e.portal.Set(tc.mode, tc.body)
			e.b.Set(registrytest.ModeOK, registrytest.ToolsDoc("b_new"))
			err := e.reg.Refresh(t.Context())
			if err == nil || !strings.Contains(err.Error(), "portal listing") {
				t.Fatalf("Refresh() = %v", err)
			}
			if got := e.reg.Routes(); !slices.EqualFunc(got, routes, func(a, b registry.Route) bool { return a.Key == b.Key }) {
				t.Errorf("a failed listing changed the routes: %+v", got)
			}
			if e.reg.Snapshot("alpha") != alpha {
				t.Error("a failed listing changed alpha")
			}
			if got := toolNames(e.reg.Snapshot("beta")); !slices.Equal(got, []string{"b_new", "s_one"}) {
				t.Errorf("the previous listing's routes must keep refreshing, beta = %q", got)
			}
			h := e.reg.Health()
			if h.PortalError == "" || h.PortalErrorAt == nil || len(h.Routes) != 2 || !h.Ready {
				t.Errorf("health = %+v", h)
			}
			select {
			case <-ch:
			default:
				t.Error("beta changed but subscribers were not told")
			}

			// A successful listing without alpha removes it, and only then.
			e.portal.Set(registrytest.ModeOK, e.listing(e.betaDef))
			if err := e.reg.Refresh(t.Context()); err != nil {
				t.Fatalf("Refresh() = %v", err)
			}
			if _, _, ok := e.reg.Lookup("/mcp/alpha"); ok || e.reg.Snapshot("alpha") != nil {
				t.Error("alpha still served after the portal dropped it")
			}
			if got := e.reg.Routes(); len(got) != 1 || got[0].Key != "beta" {
				t.Errorf("Routes() = %+v", got)
			}
			if e.store.data["alpha"] != nil || e.rec.Count("delete alpha") != 1 {
				t.Error("alpha's stored snapshot not deleted")
			}
			h = e.reg.Health()
			if h.PortalError != "" || len(h.Routes) != 1 || h.Routes[0].Key != "beta" {
				t.Errorf("health after removal = %+v", h)
			}
		})
	}
}

func TestRegistryNoSnapshotYet(t *testing.T) {
	e := newEnv(t)
	e.a.Set(registrytest.ModeFail, "")
	e.start(t) // Start records failures; it does not return them
	if _, snap, ok := e.reg.Lookup("/mcp/alpha"); !ok || snap != nil {
		t.Fatalf("Lookup(/mcp/alpha) = %v %v, want a known route without a snapshot", snap, ok)
	}
	h := e.reg.Health()
	if !h.Ready || !slices.Equal(h.RoutesWithoutSnapshot, []string{"alpha"}) {
		t.Errorf("health = %+v", h)
	}
	if st := e.route(t, "alpha"); st.SnapshotVersion != "" || st.LastError == "" {
		t.Errorf("alpha status = %+v", st)
	}

	e2 := newEnv(t)
	e2.a.Set(registrytest.ModeFail, "")
	e2.b.Set(registrytest.ModeFail, "")
	e2.start(t)
	if e2.reg.Ready() {
		t.Error("ready without any snapshot")
	}
	if got := e2.reg.Health().RoutesWithoutSnapshot; !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("routesWithoutSnapshot = %q", got)
	}
}

func TestRegistryWarmStart(t *testing.T) {
	first := newEnv(t)
	first.start(t)
	want := first.reg.Snapshot("alpha")

	// A new process with the same store: the Portal answers, the Tool
	// Services are down. It serves the stored snapshots.
	first.a.Set(registrytest.ModeFail, "")
	first.b.Set(registrytest.ModeFail, "")
	first.shared.Set(registrytest.ModeFail, "")
	reg := New(Options{
		Source:       fetch.NewHTTPSource(first.portal.URL, nil),
		Fetcher:      fetch.NewHTTPFetcher(nil, 0),
		Store:        first.store,
		FetchTimeout: 300 * time.Millisecond,
		Now:          first.clock.now,
	})
	if err := reg.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := reg.Snapshot("alpha")
	if got == nil || got == want || got.Version != want.Version || !got.FetchedAt.Equal(want.FetchedAt) {
		t.Fatalf("warm start snapshot = %+v, want a rebuilt version %s", got, want.Version)
	}
	if !reg.Ready() {
		t.Error("not ready with warm snapshots")
	}
	if tool, res := got.Lookup("a_one"); res != mcp.ToolFound || tool.Cluster != "toolsvc_a" {
		t.Errorf("warm snapshot lookup = %v %+v", res, tool)
	}
	if st := refreshtest.RouteStatus(t, reg, "alpha"); st.LastError == "" || st.SnapshotVersion != want.Version {
		t.Errorf("alpha status = %+v", st)
	}
}

func TestRegistryStoreFailure(t *testing.T) {
	e := newEnv(t)
	e.store.setFail(true)
	e.start(t)
	if !e.reg.Ready() || e.reg.Snapshot("alpha") == nil {
		t.Fatal("a failing store must not stop serving")
	}
	st := e.route(t, "alpha")
	if !strings.Contains(st.StoreError, "store down") || st.LastError != "" {
		t.Errorf("alpha status = %+v, want the store error shown apart from refresh errors", st)
	}
	e.store.setFail(false)
	e.a.Set(registrytest.ModeOK, registrytest.ToolsDoc("a_three"))
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := e.route(t, "alpha"); st.StoreError != "" {
		t.Errorf("store error not cleared after a successful save: %+v", st)
	}
}

func TestRegistrySubscribe(t *testing.T) {
	e := newEnv(t)
	ch, unsubscribe := e.reg.Subscribe()
	e.start(t)
	select {
	case <-ch:
	default:
		t.Fatal("no notification after the first snapshots")
	}
	select {
	case <-ch:
		t.Fatal("notifications must coalesce into one pending value")
	default:
	}

	saves := e.rec.Count("save ")
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("notified although nothing changed")
	default:
	}
	if n := e.rec.Count("save "); n != saves {
		t.Errorf("saved %d times for an unchanged refresh", n-saves)
	}

	e.portal.Set(registrytest.ModeOK, e.listing(strings.Replace(e.alphaDef, `"key":"alpha"`, `"key":"alpha","description":"new"`, 1), e.betaDef))
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no notification after a listing change")
	}

	e.a.Set(registrytest.ModeFail, "")
	if err := e.reg.Refresh(t.Context()); err == nil {
		t.Fatal("want alpha's failure reported")
	}
	select {
	case <-ch:
		t.Fatal("a failed refresh changes no snapshot and must not notify")
	default:
	}

	unsubscribe()
	e.a.Set(registrytest.ModeOK, registrytest.ToolsDoc("a_new"))
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("notified after unsubscribe")
	default:
	}
}

func TestRegistryRun(t *testing.T) {
	e := newEnv(t)
	e.reg.opts.Interval = 10 * time.Millisecond
	e.start(t)
	ch, unsubscribe := e.reg.Subscribe()
	defer unsubscribe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { e.reg.Run(ctx); close(done) }()
	e.b.Set(registrytest.ModeOK, registrytest.ToolsDoc("b_run"))
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not pick up the change")
	}
	cancel()
	<-done
	if got := toolNames(e.reg.Snapshot("beta")); !slices.Equal(got, []string{"b_run", "s_one"}) {
		t.Errorf("beta = %q", got)
	}
}

func TestRegistryStartCanceled(t *testing.T) {
	e := newEnv(t)
	e.portal.Set(registrytest.ModeHang, "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := e.reg.Start(ctx); err == nil {
		t.Fatal("Start with a done context must return its error")
	}
	if h := e.reg.Health(); h.PortalError != "" {
		t.Errorf("shutdown recorded as a portal error: %+v", h)
	}
}

// staticSource and mapFetcher serve a registry from memory, for benchmarks.
type staticSource struct{ l registry.Listing }

func (s staticSource) List(context.Context) (*registry.Listing, error) {
	l := s.l
	l.Routes = slices.Clone(s.l.Routes)
	return &l, nil
}

type mapFetcher map[string]*registry.Manifest

func (f mapFetcher) Fetch(_ context.Context, svc registry.ToolService) (*registry.Manifest, error) {
	if m := f[svc.Name]; m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("no manifest for %q", svc.Name)
}

func BenchmarkLookup(b *testing.B) {
	var l registry.Listing
	f := mapFetcher{}
	for i := range 100 {
		name := fmt.Sprintf("r%03d", i)
		l.Routes = append(l.Routes, registry.Route{Key: name, ToolServices: []registry.ToolService{{Name: name, URL: "http://" + name}}})
		f[name] = mustManifest(b, registrytest.ToolsDoc("tool_a", "tool_b", "tool_c"))
	}
	reg := New(Options{Source: staticSource{l}, Fetcher: f})
	if err := reg.Start(b.Context()); err != nil || !reg.Ready() {
		b.Fatalf("Start() = %v", err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, snap, ok := reg.Lookup("/mcp/r042"); !ok || snap == nil {
				b.Fatal("lookup failed")
			}
		}
	})
}

func TestRegistryConcurrentReaders(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	stop := make(chan struct{})
	errs := make(chan string, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, snap, ok := e.reg.Lookup("/mcp/alpha"); !ok || snap == nil || len(snap.Tools) == 0 {
					errs <- "a reader saw alpha without a snapshot"
					return
				}
				if h := e.reg.Health(); len(h.Routes) != 2 || !h.Ready {
					errs <- fmt.Sprintf("a reader saw health %+v", h)
					return
				}
				_ = e.reg.Routes()
			}
		})
	}
	for i := range 5 {
		e.a.Set(registrytest.ModeOK, registrytest.ToolsDoc(fmt.Sprintf("a_%d", i)))
		if i%2 == 1 {
			e.a.Set(registrytest.ModeFail, "")
		}
		_ = e.reg.Refresh(t.Context())
	}
	close(stop)
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

// TestRegistryMetrics checks the refresh and listing counters and the
// state gauges through a real Prometheus registry.
func TestRegistryMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	e := newEnv(t, func(o *Options) { o.Registerer = reg })
	e.start(t)
	e.a.Set(registrytest.ModeFail, "")
	e.clock.advance(time.Minute)
	_ = e.reg.Refresh(t.Context())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				got[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[name] = m.GetGauge().GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"toolmesh_registry_refreshes_total,outcome=success,route=alpha": 1,
		"toolmesh_registry_refreshes_total,outcome=failure,route=alpha": 1,
		"toolmesh_registry_refreshes_total,outcome=success,route=beta":  2,
		"toolmesh_registry_listings_total,outcome=success":              2,
		"toolmesh_registry_ready":                                       1,
		"toolmesh_registry_routes_without_snapshot":                     0,
		"toolmesh_registry_snapshot_tools,route=beta":                   2,
		"toolmesh_registry_snapshot_age_seconds,route=beta":             0,
		"toolmesh_registry_snapshot_age_seconds,route=alpha":            60,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}

// TestRegistryAllowEmptyListing: with the option set, a listing that names
// no route is a successful one and removes every route.
func TestRegistryAllowEmptyListing(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.AllowEmptyListing = true })
	e.start(t)
	e.portal.Set(registrytest.ModeOK, `{"routes":[]}`)
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh() = %v", err)
	}
	if len(e.reg.Routes()) != 0 || e.reg.Ready() {
		t.Errorf("routes = %+v, ready = %v; want none", e.reg.Routes(), e.reg.Ready())
	}
}
