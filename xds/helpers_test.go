package xds_test

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// clusterRefs returns the clusters a route configuration routes to.
func clusterRefs(r types.Resource) []string {
	rc, ok := r.(*routev3.RouteConfiguration)
	if !ok {
		return nil
	}
	var refs []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			if c := rt.GetRoute().GetCluster(); c != "" {
				refs = append(refs, c)
			}
		}
	}
	return refs
}
