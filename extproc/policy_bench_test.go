package extproc

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
)

// BenchmarkToolsListPolicy10k is the server's own work for one unpaged
// tools/list of a 10,000-tool route, gRPC left out: on a route without
// policies, and on the same route with the admins-only-destructive policy
// for a caller whose filtered catalog is cached (a seventh of the tools
// hidden). Both run in the same loop; filtered/unfiltered is the ratio of
// their medians.
// first-list-us is the first filtered list, which builds the view.
func BenchmarkToolsListPolicy10k(b *testing.B) {
	snap := bigSnapshot(b, 10_000, 0, "")
	routes := testRoutes{"/mcp/core": {key: "core", snap: snap}}
	plain, err := New(Config{}, routes, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	filtered, err := New(Config{}, routes, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	set, err := authz.Compile(routePolicies("core", authz.Policy{Name: "admins-only-destructive", Effect: "deny", When: adminsOnlyDestructive}))
	if err != nil {
		b.Fatal(err)
	}
	filtered.SetPolicies(set)
	filtered.callerSeam = func(*corev3.HeaderMap) *identity.Caller { return devCaller }
	for _, s := range []*Server{plain, filtered} {
		s.GRPCServerOptions()
	}
	seq := listRequest("1", false)
	list := func(s *Server) time.Duration {
		start := time.Now()
		x := s.newRequest(context.Background())
		x.next(seq[0])
		if _, ok := x.next(seq[1]).(*procmsg.Wire); !ok {
			b.Fatal("the answer was not prepared")
		}
		x.finish()
		return time.Since(start)
	}
	list(plain)
	build := list(filtered) // builds and caches the caller's view (and the route's prepared tools)
	// Medians: the machine is shared, and a mean follows whoever else runs.
	var tPlain, tFiltered []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		tPlain = append(tPlain, list(plain))
		tFiltered = append(tFiltered, list(filtered))
	}
	p50 := func(d []time.Duration) float64 { slices.Sort(d); return float64(d[len(d)/2].Nanoseconds()) }
	unf, filt := p50(tPlain), p50(tFiltered)
	b.ReportMetric(unf, "unfiltered-p50-ns")
	b.ReportMetric(filt, "filtered-p50-ns")
	b.ReportMetric(filt/unf, "filtered/unfiltered")
	b.ReportMetric(float64(build.Microseconds()), "first-list-us") // the cache miss
}

// TestRouteWithoutPoliciesPaysNothing: a 10,000-tool tools/list on a
// route no policy names costs the same allocations whether or not another
// route has policies, looks up no policy and prepares no caller; its cost
// does not grow with the list. Negative control: the same list on a route
// that has a policy costs more the first time (it builds the view).
func TestRouteWithoutPoliciesPaysNothing(t *testing.T) {
	snap := bigSnapshot(t, 10_000, 0, "")
	routes := testRoutes{"/mcp/core": {key: "core", snap: snap}}
	newServer := func(cfg *authz.Config) *Server {
		s, err := New(Config{}, routes, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg != nil {
			set, err := authz.Compile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s.SetPolicies(set)
		}
		s.callerSeam = func(*corev3.HeaderMap) *identity.Caller { return devCaller }
		s.GRPCServerOptions()
		return s
	}
	deny := authz.Policy{Name: "admins-only-destructive", Effect: "deny", When: adminsOnlyDestructive}
	none := newServer(nil)
	elsewhere := newServer(routePolicies("other", deny))
	here := newServer(routePolicies("core", deny))

	list := listRequest("1", false)
	run := func(s *Server, seq []*extprocv3.ProcessingRequest) *request {
		x := s.newRequest(context.Background())
		for _, m := range seq {
			x.next(m)
		}
		x.finish()
		return x
	}
	if x := run(elsewhere, list); x.pol.route != nil || x.pol.caller != nil {
		t.Error("a route without policies looked up policies or prepared the caller")
	}
	costs := map[string]float64{}
	for name, s := range map[string]*Server{"none": none, "elsewhere": elsewhere} {
		run(s, list) // warm: the route's prepared pages
		costs[name] = testing.AllocsPerRun(50, func() { run(s, list) })
	}
	if costs["none"] != costs["elsewhere"] {
		t.Errorf("tools/list allocations: %v without any policy, %v with policies on another route", costs["none"], costs["elsewhere"])
	}
	if costs["none"] > 100 {
		t.Errorf("a 10,000-tool tools/list made %v allocations", costs["none"])
	}
	// The first list on the route with a policy builds its view
	// (AllocsPerRun would warm it first).
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	run(here, list)
	runtime.ReadMemStats(&ms)
	first := float64(ms.Mallocs - before)
	t.Logf("allocations per list: %v without policies, %v with policies elsewhere, %v first with a policy", costs["none"], costs["elsewhere"], first)
	if first <= costs["none"] {
		t.Errorf("negative control: the first list on a route with a policy made %v allocations, no more than without (%v)", first, costs["none"])
	}
}
