package extproc

import (
	"context"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/identity"
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
		x := s.newExchange(context.Background())
		x.next(seq[0])
		if _, ok := x.next(seq[1]).(*wireMessage); !ok {
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
