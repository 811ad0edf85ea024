package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
)

// routeSnap builds a snapshot of route key with one Tool Service and the
// named tools.
func routeSnap(t testing.TB, key string, tools ...string) *registry.Snapshot {
	t.Helper()
	r := registry.Route{Key: key, ToolServices: []registry.ToolService{{Name: "svc-" + key, URL: "http://svc-" + key}}}
	return mustBuild(t, r, map[string]*registry.Manifest{"svc-" + key: mustManifest(t, registrytest.ToolsDoc(tools...))})
}

func redisOps(t testing.TB, reg *prometheus.Registry, op, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolmesh_redis_ops_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["op"] == op && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestRedisStoreRoundTrip(t *testing.T) {
	srv := startRedis(t, "")
	metrics := prometheus.NewRegistry()
	st := newRedisStore(t, srv, RedisOptions{Registerer: metrics})
	ctx := t.Context()
	if got, err := st.Load(ctx, "alpha"); got != nil || err != nil {
		t.Fatalf("Load(absent) = %v, %v", got, err)
	}
	snap := routeSnap(t, "alpha", "a_one", "a_two")
	if err := st.Save(ctx, snap); err != nil {
		t.Fatalf("Save() = %v", err)
	}
	got, err := st.Load(ctx, "alpha")
	if err != nil || got == nil || got.Version != snap.Version || !slices.Equal(toolNames(got), []string{"a_one", "a_two"}) {
		t.Fatalf("Load() = %+v, %v", got, err)
	}
	if tool, _ := got.Lookup("a_one"); tool == nil || tool.ValidateArguments([]byte(`[]`)) == nil {
		t.Error("a loaded snapshot must validate arguments")
	}

	c := srv.client()
	defer c.Close()
	fields, err := c.HGetAll(ctx, "toolmesh:route:alpha").Result()
	if err != nil || fields["version"] != snap.Version || !strings.HasPrefix(fields["snapshot"], `{"format":3,"version":"`+snap.Version) || fields["savedAt"] == "" {
		t.Fatalf("stored hash = %v, %v", fields, err)
	}

	snaps, errs := st.LoadMany(ctx, []string{"nope", "alpha"})
	if snaps[0] != nil || errs[0] != nil || snaps[1] == nil || errs[1] != nil {
		t.Fatalf("LoadMany() = %v %v", snaps, errs)
	}
	if err := st.Delete(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Load(ctx, "alpha"); got != nil || err != nil {
		t.Fatalf("Load after Delete = %v, %v", got, err)
	}
	if n := redisOps(t, metrics, "load", "ok"); n != 2 {
		t.Errorf("load ok = %v, want 2", n)
	}
	if n := redisOps(t, metrics, "load", "miss"); n != 3 {
		t.Errorf("load miss = %v, want 3", n)
	}
	if n := histogramCount(t, metrics, "load"); n != 4 {
		t.Errorf("load round trips = %d, want 4", n)
	}
	status := st.Status()
	if status.Backend != "redis" || !status.Reachable || status.LastOKAt == nil || status.LastError != "" || status.Target != "redis://"+srv.addr() {
		t.Errorf("Status() = %+v", status)
	}

	// Another prefix is another key space.
	other := newRedisStore(t, srv, RedisOptions{Prefix: "tm2:"})
	if err := other.Save(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, "tm2:alpha").Result(); n != 1 {
		t.Error("custom prefix not used")
	}
	if got, _ := st.Load(ctx, "alpha"); got != nil {
		t.Error("prefixes leak into each other")
	}
}

func TestRedisStoreSync(t *testing.T) {
	srv := startRedis(t, "")
	metrics := prometheus.NewRegistry()
	st := newRedisStore(t, srv, RedisOptions{Registerer: metrics})
	ctx := t.Context()
	a, b := routeSnap(t, "alpha", "x"), routeSnap(t, "beta", "y")
	for _, err := range st.Sync(ctx, []*registry.Snapshot{a, b}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := redisOps(t, metrics, "save", "ok"); n != 2 {
		t.Fatalf("saves = %v, want 2", n)
	}
	// Unchanged: only the version check, no write.
	for _, err := range st.Sync(ctx, []*registry.Snapshot{a, b}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := redisOps(t, metrics, "save", "ok"); n != 2 {
		t.Errorf("an unchanged sync wrote: saves = %v", n)
	}
	a2 := routeSnap(t, "alpha", "x", "z")
	st.Sync(ctx, []*registry.Snapshot{a2, b})
	if n := redisOps(t, metrics, "save", "ok"); n != 3 {
		t.Errorf("saves = %v, want 3 (alpha changed)", n)
	}
	if got, _ := st.Load(ctx, "alpha"); got == nil || got.Version != a2.Version {
		t.Errorf("alpha not updated")
	}
}

func TestRedisStoreAuth(t *testing.T) {
	srv := startRedis(t, "s3cret/pw")
	ctx := t.Context()
	url := "redis://:s3cret%2Fpw@" + srv.addr() + "/0"
	st := newRedisStore(t, srv, RedisOptions{URL: url})
	snap := routeSnap(t, "alpha", "x")
	if err := st.Save(ctx, snap); err != nil {
		t.Fatalf("Save with the password = %v", err)
	}
	if got, err := st.Load(ctx, "alpha"); err != nil || got == nil {
		t.Fatalf("Load with the password = %v, %v", got, err)
	}
	for _, tc := range []struct{ name, url, want string }{
		{"wrong password", "redis://:nope@" + srv.addr(), "WRONGPASS"},
		{"no password", "redis://" + srv.addr(), "NOAUTH"},
	} {
		bad := newRedisStore(t, srv, RedisOptions{URL: tc.url})
		_, err := bad.Load(ctx, "alpha")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: Load() = %v, want %s", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: the password leaks: %v", tc.name, err)
		}
		// Redis answered: it is reachable, and the failure is shown.
		if s := bad.Status(); !s.Reachable || !strings.Contains(s.LastError, tc.want) || s.LastOKAt != nil {
			t.Errorf("%s: Status() = %+v", tc.name, s)
		}
	}
	if strings.Contains(st.Status().Target, "s3cret") {
		t.Errorf("target shows the password: %q", st.Status().Target)
	}
}

func TestRedisStoreGarbage(t *testing.T) {
	srv := startRedis(t, "")
	metrics := prometheus.NewRegistry()
	st := newRedisStore(t, srv, RedisOptions{Registerer: metrics})
	ctx := t.Context()
	c := srv.client()
	defer c.Close()
	good := routeSnap(t, "good", "x")
	goodJSON, _ := good.MarshalJSON()
	setup := map[string]func(key string) error{
		"string value": func(k string) error { return c.Set(ctx, k, "not a hash", 0).Err() },
		"list value":   func(k string) error { return c.RPush(ctx, k, "a").Err() },
		"no snapshot":  func(k string) error { return c.HSet(ctx, k, "version", "v").Err() },
		"bad json":     func(k string) error { return c.HSet(ctx, k, "version", "v", "snapshot", "{").Err() },
		"other route": func(k string) error {
			return c.HSet(ctx, k, "version", good.Version, "snapshot", goodJSON).Err()
		},
		"version mismatch": func(k string) error {
			return c.HSet(ctx, k, "version", "0123", "snapshot", goodJSON).Err()
		},
		"tampered content": func(k string) error {
			return c.HSet(ctx, k, "version", good.Version, "snapshot", strings.Replace(string(goodJSON), `"x"`, `"y"`, 1)).Err()
		},
	}
	i := 0
	for name, put := range setup {
		t.Run(name, func(t *testing.T) {
			route := fmt.Sprintf("g%d", i)
			i++
			key := "toolmesh:route:" + route
			if err := put(key); err != nil {
				t.Fatal(err)
			}
			before := redisOps(t, metrics, "load", "garbage")
			got, err := st.Load(ctx, route)
			if got != nil || err == nil || !strings.Contains(err.Error(), "garbage") && !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Fatalf("Load() = %v, %v; want a garbage error", got, err)
			}
			if n := redisOps(t, metrics, "load", "garbage"); n != before+1 {
				t.Errorf("garbage loads %v → %v", before, n)
			}
			if n, _ := c.Exists(ctx, key).Result(); n != 1 {
				t.Fatal("a garbage value must be left in place")
			}
			if s := st.Status(); !s.Reachable || s.LastError == "" {
				t.Errorf("Status() = %+v, want reachable with the garbage error", s)
			}
			// The next successful refresh replaces it.
			fix := routeSnap(t, route, "fixed")
			if errs := st.Sync(ctx, []*registry.Snapshot{fix}); errs[0] != nil {
				t.Fatalf("Sync over garbage = %v", errs[0])
			}
			if got, err := st.Load(ctx, route); err != nil || got.Version != fix.Version {
				t.Fatalf("Load after repair = %v, %v", got, err)
			}
		})
	}
}

func TestRedisStoreSlowServer(t *testing.T) {
	srv := startRedis(t, "")
	st := newRedisStore(t, srv, RedisOptions{OpTimeout: 150 * time.Millisecond})
	ctx := context.Background() // no deadline of its own: only OpTimeout can end a call
	if err := st.Save(ctx, routeSnap(t, "alpha", "x")); err != nil {
		t.Fatal(err)
	}
	admin := srv.client()
	defer admin.Close()
	// CLIENT PAUSE holds every client's commands, this one's too, for 2s.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "2000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}

	// Were calls not bounded by OpTimeout, each would wait out the pause
	// and then succeed.
	_, err := st.Load(ctx, "alpha")
	if outcome, _ := classify(err); outcome != outcomeTimeout {
		t.Fatalf("Load on a paused server = %v, want a timeout", err)
	}
	if errs := st.Sync(ctx, []*registry.Snapshot{routeSnap(t, "beta", "y")}); errs[0] == nil {
		t.Fatal("Sync on a paused server succeeded")
	}
	if s := st.Status(); s.Reachable || !strings.Contains(s.LastError, "deadline") && !strings.Contains(s.LastError, "timeout") {
		t.Errorf("Status() = %+v", s)
	}
	// Once the pause is over, the same store works again.
	var got *registry.Snapshot
	for range 100 {
		if got, err = st.Load(ctx, "alpha"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || got == nil {
		t.Fatalf("Load after the pause = %v, %v", got, err)
	}
	if s := st.Status(); !s.Reachable {
		t.Errorf("Status() after recovery = %+v", s)
	}
}

// A server that accepts connections and never answers: OpTimeout ends every
// call, dial included.
func TestRedisStoreHangingServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	st, err := NewRedisStore(RedisOptions{URL: "redis://" + l.Addr().String(), OpTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Load(context.Background(), "alpha")
	if outcome, _ := classify(err); outcome != outcomeTimeout {
		t.Fatalf("Load = %v, want a timeout", err)
	}
}

func TestRedisStoreUnreachable(t *testing.T) {
	metrics := prometheus.NewRegistry()
	st, err := NewRedisStore(RedisOptions{URL: "redis://127.0.0.1:" + fmt.Sprint(freePort(t)), OpTimeout: time.Second, Registerer: metrics})
	if err != nil {
		t.Fatalf("NewRedisStore must not need Redis up: %v", err)
	}
	defer st.Close()
	ctx := t.Context()
	routes := make([]string, 3*redisBatchKeys)
	for i := range routes {
		routes[i] = fmt.Sprintf("r%d", i)
	}
	snaps, errs := st.LoadMany(ctx, routes)
	for i := range routes {
		if snaps[i] != nil || errs[i] == nil {
			t.Fatalf("route %d: %v %v", i, snaps[i], errs[i])
		}
	}
	if !errors.Is(errs[len(errs)-1], errs[0]) && errs[len(errs)-1].Error() != errs[0].Error() {
		t.Errorf("later batches must fail with the first batch's error: %v vs %v", errs[0], errs[len(errs)-1])
	}
	// One round trip was tried; the other batches failed without one.
	if got := histogramCount(t, metrics, "load"); got != 1 {
		t.Errorf("load round trips = %d, want 1", got)
	}
	if n := redisOps(t, metrics, "load", "error"); n != float64(len(routes)) {
		t.Errorf("load errors = %v, want %d", n, len(routes))
	}
	s := st.Status()
	if s.Reachable || s.LastError == "" || s.LastOKAt != nil {
		t.Errorf("Status() = %+v", s)
	}
	if err := st.Save(ctx, routeSnap(t, "alpha", "x")); err == nil {
		t.Error("Save succeeded without Redis")
	}
	if l, err := st.LoadListing(ctx); l != nil || err == nil {
		t.Errorf("LoadListing = %v, %v", l, err)
	}
}

func histogramCount(t testing.TB, reg *prometheus.Registry, op string) uint64 {
	t.Helper()
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "toolmesh_redis_op_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "op" && lp.GetValue() == op {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

func TestRedisStoreListing(t *testing.T) {
	srv := startRedis(t, "")
	metrics := prometheus.NewRegistry()
	st := newRedisStore(t, srv, RedisOptions{Registerer: metrics})
	ctx := t.Context()
	if l, err := st.LoadListing(ctx); l != nil || err != nil {
		t.Fatalf("LoadListing(absent) = %v, %v", l, err)
	}
	l, err := registry.DecodeListing([]byte(`{"routes":[{"key":"listing","toolServices":[{"name":"a","url":"http://a"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := st.SaveListing(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if n := redisOps(t, metrics, "save_listing", "ok"); n != 1 {
		t.Errorf("an unchanged listing was written again: %v writes", n)
	}
	got, err := st.LoadListing(ctx)
	if err != nil || len(got.Routes) != 1 || got.Routes[0].Key != "listing" || got.Routes[0].PublicPath != "/mcp/listing" {
		t.Fatalf("LoadListing() = %+v, %v", got, err)
	}
	// A route named "listing" does not collide with the listing key.
	if err := st.Save(ctx, routeSnap(t, "listing", "x")); err != nil {
		t.Fatal(err)
	}
	if got, err := st.LoadListing(ctx); err != nil || got == nil {
		t.Fatalf("the listing was overwritten by route %q: %v", "listing", err)
	}
	c := srv.client()
	defer c.Close()
	c.HSet(ctx, "toolmesh:route:_listing", "listing", `{"routes":[]}`)
	if _, err := st.LoadListing(ctx); err == nil || !strings.Contains(err.Error(), "garbage") {
		t.Errorf("LoadListing(tampered) = %v", err)
	}
}

// TestRedisStoreSharedRegistry: a second store on the same metrics registry
// (a reload) shares the series; a collector of another shape under the
// same name is an error, not a panic.
func TestRedisStoreSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	url := "redis://127.0.0.1:" + fmt.Sprint(freePort(t))
	a, err := NewRedisStore(RedisOptions{URL: url, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewRedisStore(RedisOptions{URL: url, Registerer: reg})
	if err != nil {
		t.Fatalf("second store on the same registry: %v", err)
	}
	defer b.Close()
	if a.ops != b.ops || a.durations != b.durations {
		t.Error("the second store does not share the first one's series")
	}

	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "toolmesh_redis_ops_total", Help: "something else"}))
	if _, err := NewRedisStore(RedisOptions{URL: url, Registerer: other}); err == nil || !strings.Contains(err.Error(), "redis store: register metrics") {
		t.Errorf("NewRedisStore() on a conflicting registry = %v", err)
	}
}

// TestRedisStoreSpend: the approval ledger is single-use across stores
// (replicas) sharing one Redis, and a key expires with its state.
func TestRedisStoreSpend(t *testing.T) {
	srv := startRedis(t, "")
	a, b := newRedisStore(t, srv, RedisOptions{}), newRedisStore(t, srv, RedisOptions{})
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	if first, err := a.Spend(ctx, "s1", exp); !first || err != nil {
		t.Fatalf("first Spend = %v, %v; want true", first, err)
	}
	for _, st := range []*RedisStore{a, b} {
		if first, err := st.Spend(ctx, "s1", exp); first || err != nil {
			t.Fatalf("second Spend = %v, %v; want false", first, err)
		}
	}
	if first, err := b.Spend(ctx, "s2", exp); !first || err != nil {
		t.Fatalf("other id: Spend = %v, %v; want true", first, err)
	}
	c := srv.client()
	ttl, err := c.TTL(ctx, DefaultRedisPrefix+"_spent:s1").Result()
	if err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL = %v, %v; want the state's remaining life", ttl, err)
	}
	srv.stop()
	if _, err := a.Spend(ctx, "s3", exp); err == nil {
		t.Fatal("Spend with Redis down: no error; the call must be refused")
	}
}
