package xds_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// nodePortal has three routes; search serves two of them.
func nodePortal() []registry.Route {
	svc := func(name, url string) registry.ToolService { return registry.ToolService{Name: name, URL: url} }
	return []registry.Route{
		{Key: "core", ToolServices: []registry.ToolService{svc("weather", "http://10.0.0.7:8080"), svc("search", "http://search.svc:8080")}},
		{Key: "billing", ToolServices: []registry.ToolService{svc("invoices", "http://10.0.1.9:8080"), svc("search", "http://search.svc:8080")}},
		{Key: "admin", PublicPath: "/ops/admin", ToolServices: []registry.ToolService{svc("audit", "http://10.0.2.3:8080")}},
	}
}

func TestGroupKey(t *testing.T) {
	opts := xds.Options{Nodes: []xds.NodeSelector{
		{ID: "gw-*"},
		{Cluster: "billing-sidecar", Routes: []string{"billing"}},
		{ID: "ops-1", Cluster: "ops", Routes: []string{"core", "admin"}},
		{Cluster: "ops", Routes: []string{"admin"}},
		{Cluster: "ops-copy", Routes: []string{"admin", "core", "admin"}},
	}}
	groups, err := xds.TranslateGroups(nodePortal(), opts)
	if err != nil {
		t.Fatal(err)
	}
	routesOf := map[string][]string{}
	for _, g := range groups {
		routesOf[g.Key] = g.Routes
	}
	if len(groups) != 4 || groups[0].Key != xds.AllRoutesGroup {
		t.Fatalf("groups = %v, want the all-routes group first and 3 route sets", routesOf)
	}
	for _, tc := range []struct {
		id, cluster string
		want        []string // nil: every route
	}{
		{"gw-1", "gateway", nil},
		{"gw-2", "billing-sidecar", nil}, // the first matching selector wins
		{"billing-7f9c", "billing-sidecar", []string{"billing"}},
		{"ops-1", "ops", []string{"admin", "core"}},
		{"ops-2", "ops", []string{"admin"}},
		{"ops-9", "ops-copy", []string{"admin", "core"}}, // same set, same group
		{"stray", "elsewhere", nil},
		{"", "", nil},
	} {
		t.Run(tc.id+"/"+tc.cluster, func(t *testing.T) {
			key := opts.GroupKey(tc.id, tc.cluster)
			got, ok := routesOf[key]
			if !ok {
				t.Fatalf("GroupKey = %q, which TranslateGroups did not build", key)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("node served routes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeSelectorErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []xds.NodeSelector
		want  string
	}{
		{"star inside a pattern", []xds.NodeSelector{{ID: "side*car", Routes: []string{"core"}}},
			`options: nodes[0].id: "side*car" may only end in *`},
		{"bad route key", []xds.NodeSelector{{Cluster: "c", Routes: []string{"core", "Core"}}},
			`options: nodes[0].routes[1]: "Core" is not a route key`},
		{"catch-all before others", []xds.NodeSelector{{Routes: []string{"core"}}, {ID: "gw"}},
			"options: nodes[0]: matches every node, so the selectors after it never match (put it last)"},
		{"several problems", []xds.NodeSelector{{Cluster: "a*b*"}, {ID: "x", Routes: []string{"_"}}},
			"options: nodes[0].cluster: \"a*b*\" may only end in *\noptions: nodes[1].routes[0]: \"_\" is not a route key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := xds.Translate(nodePortal(), xds.Options{Nodes: tc.nodes})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Translate error:\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
	// A catch-all last is the default for every other node.
	if _, err := xds.Translate(nodePortal(), xds.Options{Nodes: []xds.NodeSelector{{ID: "gw-*"}, {Routes: []string{"core"}}}}); err != nil {
		t.Errorf("catch-all last: %v", err)
	}
}

// TestTranslateGroupsSubsets checks every group against the Portal: only
// its routes' public paths, exactly their Tool Services' clusters and
// endpoints, shared (same pointer) with the all-routes group.
func TestTranslateGroupsSubsets(t *testing.T) {
	portal := nodePortal()
	opts := xds.Options{Nodes: []xds.NodeSelector{
		{Cluster: "billing", Routes: []string{"billing", "gone"}},
		{Cluster: "ops", Routes: []string{"admin", "core"}},
		{Cluster: "nothing", Routes: []string{"gone"}},
	}}
	groups, err := xds.TranslateGroups(portal, opts)
	if err != nil {
		t.Fatal(err)
	}
	all := groups[0].Resources
	shared := map[string]any{}
	for _, c := range slices.Concat(all.Clusters, all.Endpoints, all.Listeners) {
		shared[cachev3.GetResourceName(c)+"/"+string(c.ProtoReflect().Descriptor().Name())] = c
	}
	for _, g := range groups {
		t.Run(g.Key, func(t *testing.T) {
			requireValid(t, g.Resources)
			var wantPaths, wantClusters, wantEDS []string
			for _, r := range portal {
				if g.Routes != nil && !slices.Contains(g.Routes, r.Key) {
					continue
				}
				wantPaths = append(wantPaths, r.Path())
				for _, s := range r.ToolServices {
					wantClusters = append(wantClusters, wire.ClusterName(s.Name))
					if strings.HasPrefix(s.URL, "http://10.") {
						wantEDS = append(wantEDS, wire.ClusterName(s.Name))
					}
				}
			}
			for _, l := range []*[]string{&wantPaths, &wantClusters, &wantEDS} {
				slices.Sort(*l)
				*l = slices.Compact(*l)
			}
			var paths []string
			for _, rt := range g.Resources.Routes[0].(*routev3.RouteConfiguration).GetVirtualHosts()[0].GetRoutes() {
				if p := rt.GetMatch().GetPath(); p != "" {
					paths = append(paths, p)
				}
			}
			if !slices.Equal(paths, wantPaths) {
				t.Errorf("public paths %v, want %v", paths, wantPaths)
			}
			var clusters, eds []string
			for _, c := range g.Resources.Clusters {
				clusters = append(clusters, cachev3.GetResourceName(c))
			}
			for _, e := range g.Resources.Endpoints {
				eds = append(eds, e.(*endpointv3.ClusterLoadAssignment).GetClusterName())
			}
			if !slices.Equal(clusters, wantClusters) || !slices.Equal(eds, wantEDS) {
				t.Errorf("clusters %v, endpoints %v; want %v, %v", clusters, eds, wantClusters, wantEDS)
			}
			if got := clusterRefs(g.Resources.Routes[0]); !slices.Equal(got, wantClusters) {
				t.Errorf("routes point at %v, want %v", got, wantClusters)
			}
			for _, r := range slices.Concat(g.Resources.Clusters, g.Resources.Endpoints, g.Resources.Listeners) {
				if shared[cachev3.GetResourceName(r)+"/"+string(r.ProtoReflect().Descriptor().Name())] != any(r) {
					t.Errorf("%s is not shared with the all-routes group", cachev3.GetResourceName(r))
				}
			}
		})
	}
}

// TestOptionsValidate checks that a configuration can be checked without
// routes, with the same messages Translate gives.
func TestOptionsValidate(t *testing.T) {
	zero := uint32(0)
	for _, tc := range []struct {
		name string
		opts xds.Options
		want string
	}{
		{"defaults", xds.Options{}, ""},
		{"bad selector", xds.Options{Nodes: []xds.NodeSelector{{ID: "*x"}}}, `options: nodes[0].id: "*x" may only end in *`},
		{"bad override", xds.Options{Overrides: &xds.Overrides{Defaults: &xds.Tuning{MaxConnections: &zero}}},
			"overrides: defaults.maxConnections: must be at least 1"},
		{"bad limit", xds.Options{ListenPort: 1 << 16}, "options: ListenPort 65536 is not a TCP port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
