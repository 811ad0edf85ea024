package refresher

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolmesh/toolmesh/internal/registrytest"
	"github.com/toolmesh/toolmesh/registry"
)

// TestHealthAges: snapshotAge counts from when the content was built and a
// refresh that finds the same manifests leaves it alone; lastSuccessAge
// counts from the last refresh that fetched every manifest, and keeps
// growing while a Tool Service is down.
func TestHealthAges(t *testing.T) {
	e := newEnv(t)
	e.start(t) // t0: built

	e.clock.advance(time.Minute)
	if err := e.reg.Refresh(t.Context()); err != nil { // t0+1m: same content
		t.Fatal(err)
	}
	e.clock.advance(30 * time.Second)
	a := e.route(t, "alpha")
	if a.SnapshotAge != "1m30s" || a.LastSuccessAge != "30s" {
		t.Errorf("after an unchanged refresh: snapshotAge %q (want 1m30s), lastSuccessAge %q (want 30s)", a.SnapshotAge, a.LastSuccessAge)
	}

	e.a.Set(registrytest.ModeHang, "")
	if err := e.reg.Refresh(t.Context()); err == nil { // t0+1m30s: fails
		t.Fatal("Refresh() with a hanging service succeeded")
	}
	e.clock.advance(time.Minute)
	a = e.route(t, "alpha")
	if a.SnapshotAge != "2m30s" || a.LastSuccessAge != "1m30s" {
		t.Errorf("while failing: snapshotAge %q (want 2m30s), lastSuccessAge %q (want 1m30s)", a.SnapshotAge, a.LastSuccessAge)
	}
	if n := strings.Count(a.LastError, e.a.URL); n != 1 {
		t.Errorf("lastError names the URL %d times, want once: %s", n, a.LastError)
	}

	e.a.Set(registrytest.ModeOK, registrytest.ToolsDoc("a_one", "a_two", "a_three"))
	if err := e.reg.Refresh(t.Context()); err != nil { // t0+2m30s: new content
		t.Fatal(err)
	}
	e.clock.advance(5 * time.Second)
	if a = e.route(t, "alpha"); a.SnapshotAge != "5s" || a.LastSuccessAge != "5s" {
		t.Errorf("after new content: snapshotAge %q, lastSuccessAge %q; want 5s both", a.SnapshotAge, a.LastSuccessAge)
	}
}

// TestHealthLastErrorNamesURLOnce covers each way a manifest GET fails.
func TestHealthLastErrorNamesURLOnce(t *testing.T) {
	for _, mode := range []string{registrytest.ModeHang, registrytest.ModeFail, registrytest.ModeHTML, "closed"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			e.start(t)
			if mode == "closed" {
				e.a.Close() // connection refused
			} else {
				e.a.Set(mode, "")
			}
			if err := e.reg.Refresh(t.Context()); err == nil {
				t.Fatal("Refresh() succeeded")
			}
			le := e.route(t, "alpha").LastError
			if n := strings.Count(le, e.a.URL); n != 1 {
				t.Errorf("lastError names the URL %d times, want once: %s", n, le)
			}
		})
	}
}

// TestRejectedAmbiguousGauges: per-route gauges of rejected and ambiguous
// tools follow the snapshot, and a route's series go when the Portal stops
// listing it.
func TestRejectedAmbiguousGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *Options) { o.Registerer = reg })
	// alpha: a has a bad schema and offers "dup" twice (ambiguous), which
	// shared, after it, also offers (shadowed); beta gets "dup" from
	// shared only.
	e.a.Set(registrytest.ModeOK, `{"tools":[{"name":"a_one","inputSchema":{"type":"object"}},`+
		`{"name":"a_bad","inputSchema":{"type":"string"}},{"name":"dup","inputSchema":{"type":"object"}},`+
		`{"name":"dup","version":"2","inputSchema":{"type":"object"}}]}`)
	e.shared.Set(registrytest.ModeOK, registrytest.ToolsDoc("s_one", "dup"))
	e.start(t)

	a := e.route(t, "alpha")
	if len(a.Rejected) != 1 || len(a.Ambiguous) != 1 {
		t.Fatalf("alpha rejected %v, ambiguous %v; the fixture needs one of each", a.Rejected, a.Ambiguous)
	}
	if len(a.Shadowed) != 1 || a.Shadowed[0] != (registry.Shadowed{Kind: "tool", Name: "dup", Service: "shared", Winner: "a"}) {
		t.Errorf("alpha shadowed %+v, want shared's dup lost to a", a.Shadowed)
	}
	want := map[string]float64{
		"toolmesh_registry_rejected_tools/alpha":   1,
		"toolmesh_registry_ambiguous_tools/alpha":  1,
		"toolmesh_registry_shadowed_entries/alpha": 1,
		"toolmesh_registry_rejected_tools/beta":    0,
		"toolmesh_registry_ambiguous_tools/beta":   0,
		"toolmesh_registry_shadowed_entries/beta":  0,
	}
	if got := routeGauges(t, reg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gauges = %v, want %v", got, want)
	}

	e.portal.Set(registrytest.ModeOK, e.listing(e.betaDef))
	if err := e.reg.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	want = map[string]float64{
		"toolmesh_registry_rejected_tools/beta":   0,
		"toolmesh_registry_ambiguous_tools/beta":  0,
		"toolmesh_registry_shadowed_entries/beta": 0,
	}
	if got := routeGauges(t, reg); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after alpha was delisted: gauges = %v, want %v", got, want)
	}
}

// routeGauges returns the rejected and ambiguous gauges as "name/route" → value.
func routeGauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if n := mf.GetName(); n != "toolmesh_registry_rejected_tools" && n != "toolmesh_registry_ambiguous_tools" && n != "toolmesh_registry_shadowed_entries" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[mf.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}
