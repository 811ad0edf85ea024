package xds

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/toolmesh/toolmesh/registry"
)

// NodeSelector picks the routes an Envoy node serves, so a sidecar gets
// only its routes and their clusters while a gateway gets everything.
// Options.Nodes is tried in order and the first selector that matches a
// node wins; a node that no selector matches gets every route. A selector
// with neither ID nor Cluster matches every node, so it can only come last
// (it is then the default for everything else).
type NodeSelector struct {
	// ID matches the Envoy node id (--service-node): exactly, or as a prefix
	// when it ends in "*" ("mcp-sidecar-*"). Empty matches any id.
	ID string `json:"id,omitempty"`
	// Cluster matches the Envoy node cluster (--service-cluster) the same
	// way. Empty matches any cluster. With both set, both must match.
	Cluster string `json:"cluster,omitempty"`
	// Routes are the route keys the node serves. Keys the Portal does not
	// list (yet) are skipped. Empty means every route.
	Routes []string `json:"routes,omitempty"`
}

// Group is the configuration of one node group: every node whose first
// matching selector names the same set of routes is served the same
// snapshot, keyed and versioned per group.
type Group struct {
	// Key is the snapshot key: AllRoutesGroup, or "group/" plus a hash of
	// the sorted route keys.
	Key string
	// Routes are the route keys of the group, sorted; nil for every route.
	Routes []string
	// Resources are the group's listener, route configuration (only its
	// routes), clusters and endpoints (only their Tool Services).
	Resources *Resources
}

// AllRoutesGroup is the key of the node group that gets every route: nodes
// that no selector matches, and gateways.
const AllRoutesGroup = "group/all"

// matches reports whether the selector picks the node.
func (n NodeSelector) matches(id, cluster string) bool {
	return globMatch(n.ID, id) && globMatch(n.Cluster, cluster)
}

func globMatch(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(s, p)
	}
	return pattern == s
}

// routeSet returns the selector's route keys, sorted and deduplicated; nil
// for every route.
func (n NodeSelector) routeSet() []string {
	if len(n.Routes) == 0 {
		return nil
	}
	keys := slices.Clone(n.Routes)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// groupKey is the snapshot key of a route set.
func groupKey(routes []string) string {
	if routes == nil {
		return AllRoutesGroup
	}
	sum := sha256.Sum256([]byte(strings.Join(routes, "\n")))
	return "group/" + hex.EncodeToString(sum[:6])
}

// GroupKey returns the key of the node group that serves the Envoy node
// with this id and cluster.
func (o Options) GroupKey(nodeID, nodeCluster string) string {
	for _, n := range o.Nodes {
		if n.matches(nodeID, nodeCluster) {
			return groupKey(n.routeSet())
		}
	}
	return AllRoutesGroup
}

// groups returns every distinct group of o.Nodes, the all-routes
// group first, then by key.
func (o Options) groups() []Group {
	seen := map[string]bool{AllRoutesGroup: true}
	out := []Group{{Key: AllRoutesGroup}}
	for _, n := range o.Nodes {
		rs := n.routeSet()
		k := groupKey(rs)
		if !seen[k] {
			seen[k] = true
			out = append(out, Group{Key: k, Routes: rs})
		}
	}
	slices.SortFunc(out[1:], func(a, b Group) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// checkNodes rejects selectors that could never do what they say.
func checkNodes(nodes []NodeSelector) error {
	var errs []error
	for i, n := range nodes {
		where := fmt.Sprintf("nodes[%d]", i)
		for _, f := range []struct{ name, v string }{{"id", n.ID}, {"cluster", n.Cluster}} {
			if strings.Contains(strings.TrimSuffix(f.v, "*"), "*") {
				errs = append(errs, fmt.Errorf("%s.%s: %q may only end in *", where, f.name, f.v))
			}
		}
		for j, r := range n.Routes {
			if !validName(r) {
				errs = append(errs, fmt.Errorf("%s.routes[%d]: %q is not a route key", where, j, r))
			}
		}
		if n.ID == "" && n.Cluster == "" && i < len(nodes)-1 {
			errs = append(errs, fmt.Errorf("%s: matches every node, so the selectors after it never match (put it last)", where))
		}
	}
	return errors.Join(errs...)
}

// TranslateGroups translates routes once and returns the resources of
// every node group of opts.Nodes: the all-routes group (AllRoutesGroup,
// what Translate returns) first, then one group per distinct route set,
// sorted by key. Groups share their listener, clusters and endpoints (the
// same pointers); callers must not modify them.
func TranslateGroups(routes []registry.Route, opts Options) ([]Group, error) {
	t, err := newTranslation(routes, opts)
	if err != nil {
		return nil, err
	}
	groups := t.opts.groups()
	for i := range groups {
		groups[i].Resources = t.resources(groups[i].Routes)
	}
	return groups, nil
}

// nodeGroups is the cache's NodeHash: it maps a node to the key of the
// snapshot it is served, by Options.Nodes. Pinned node ids (tests) map to
// a snapshot of their own; their keys are prefixed "node/" so that no node
// id can collide with a group key.
type nodeGroups struct {
	opts   Options
	pinned sync.Map // node id → struct{}
}

var _ cachev3.NodeHash = (*nodeGroups)(nil)

// ID implements [cachev3.NodeHash.ID].
func (g *nodeGroups) ID(node *corev3.Node) string {
	if id := node.GetId(); id != "" {
		if _, ok := g.pinned.Load(id); ok {
			return pinnedKey(id)
		}
	}
	return g.opts.GroupKey(node.GetId(), node.GetCluster())
}

func pinnedKey(nodeID string) string { return "node/" + nodeID }
