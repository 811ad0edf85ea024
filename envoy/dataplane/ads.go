package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// adsType is the client-side state of one resource type on the ADS stream.
type adsType struct {
	url       string
	version   string   // last accepted version_info
	nonce     string   // nonce of the last response received on this stream
	names     []string // subscription; nil means wildcard (LDS, CDS)
	named     bool     // RDS and EDS subscribe by name
	resources map[string]types.Resource
}

// adsClient is a state-of-the-world ADS client that behaves like Envoy's
// (source/extensions/config_subscription/grpc/grpc_mux_impl.cc): CDS and
// LDS are wildcard subscriptions; RDS and EDS subscribe to the names the
// accepted listeners and clusters reference; every response is ACKed with
// its version and nonce, or NACKed with the previous version and an
// error_detail.
type adsClient struct {
	d     *DataPlane
	node  *corev3.Node
	types map[string]*adsType
}

// WatchADS runs a state-of-the-world ADS client against the xDS server at
// target (plaintext gRPC), like Envoy configured with ads_config: it
// subscribes to all listeners and clusters, then to the route
// configurations and cluster load assignments they name, ACKs or NACKs
// every response, and calls Apply whenever the accepted resources form a
// complete set (a NACK carries Apply's error). It reconnects with
// exponential back-off and returns ctx.Err() once ctx is done.
func (d *DataPlane) WatchADS(ctx context.Context, target string, node *corev3.Node) error {
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(controlCreds(d.ctlTLS)),
		keepaliveDialOption(d.keepalive, d.log.With("grpc", "ads")))
	if err != nil {
		return fmt.Errorf("connect to xds %q: %w", target, err)
	}
	defer cc.Close()
	c := &adsClient{d: d, node: node, types: map[string]*adsType{
		resourcev3.ClusterType:  {url: resourcev3.ClusterType},
		resourcev3.ListenerType: {url: resourcev3.ListenerType},
		resourcev3.RouteType:    {url: resourcev3.RouteType, named: true},
		resourcev3.EndpointType: {url: resourcev3.EndpointType, named: true},
	}}
	const base, maxBackoff = 250 * time.Millisecond, 10 * time.Second
	backoff := base
	for {
		received, err := c.run(ctx, discoveryv3.NewAggregatedDiscoveryServiceClient(cc))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if received {
			backoff = base
		}
		d.log.Debug("ads stream ended; reconnecting", "target", target, "error", err, "backoff", backoff)
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// run serves one ADS stream. received reports whether any response arrived.
func (c *adsClient) run(ctx context.Context, client discoveryv3.AggregatedDiscoveryServiceClient) (received bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := client.StreamAggregatedResources(sctx)
	if err != nil {
		return false, fmt.Errorf("open ads stream: %w", err)
	}
	// Envoy asks for clusters first, then listeners; a reconnect re-sends
	// the versions it holds and the names it is subscribed to.
	for _, url := range []string{resourcev3.ClusterType, resourcev3.ListenerType, resourcev3.RouteType, resourcev3.EndpointType} {
		t := c.types[url]
		t.nonce = ""
		if t.named && len(t.names) == 0 {
			continue
		}
		if err := st.Send(c.request(t, t.version, "", nil)); err != nil {
			return false, fmt.Errorf("send %s request: %w", url, err)
		}
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return received, errors.New("ads stream closed by server")
			}
			return received, fmt.Errorf("receive: %w", err)
		}
		received = true
		if err := c.handle(st, resp); err != nil {
			return received, err
		}
	}
}

func (c *adsClient) request(t *adsType, version, nonce string, detail error) *discoveryv3.DiscoveryRequest {
	req := &discoveryv3.DiscoveryRequest{
		VersionInfo:   version,
		Node:          c.node,
		ResourceNames: t.names,
		TypeUrl:       t.url,
		ResponseNonce: nonce,
	}
	if detail != nil {
		req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: detail.Error()}
	}
	return req
}

// handle processes one DiscoveryResponse: decode, check, apply when the set
// is complete, ACK or NACK, then update the RDS/EDS subscriptions.
func (c *adsClient) handle(st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, resp *discoveryv3.DiscoveryResponse) error {
	t, ok := c.types[resp.GetTypeUrl()]
	if !ok {
		c.d.log.Debug("ads response for an unsubscribed type", "type", resp.GetTypeUrl())
		return nil
	}
	t.nonce = resp.GetNonce()
	decoded, err := decodeResources(resp)
	if err == nil {
		err = c.accept(t, decoded)
	}
	if err != nil {
		c.d.log.Warn("xds update rejected", "type", t.url, "version", resp.GetVersionInfo(), "error", err)
		return st.Send(c.request(t, t.version, resp.GetNonce(), err))
	}
	t.version = resp.GetVersionInfo()
	if err := st.Send(c.request(t, t.version, resp.GetNonce(), nil)); err != nil {
		return err
	}
	// Subscriptions follow the accepted listeners and clusters.
	refs := c.references()
	for _, url := range []string{resourcev3.RouteType, resourcev3.EndpointType} {
		nt, names := c.types[url], refs[url]
		// An empty SotW subscription would mean "wildcard"; keep the old
		// one, its resources are no longer used.
		if slices.Equal(nt.names, names) || len(names) == 0 {
			continue
		}
		nt.names = names
		if err := st.Send(c.request(nt, nt.version, nt.nonce, nil)); err != nil {
			return err
		}
	}
	return nil
}

// accept validates a response for type t against the other accepted types.
// If the result is a complete configuration it is applied; the state of t
// changes only if everything succeeds.
func (c *adsClient) accept(t *adsType, decoded map[string]types.Resource) error {
	for name, r := range decoded {
		if v, ok := r.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("%s %q: %w", t.url, name, err)
			}
		}
	}
	prev := t.resources
	t.resources = decoded
	set, complete := c.snapshot()
	if complete {
		if err := c.d.Apply(set); err != nil {
			t.resources = prev
			return err
		}
		return nil
	}
	// Not complete yet (waiting for RDS/EDS): check what can be checked alone.
	for _, r := range decoded {
		var err error
		switch r := r.(type) {
		case *listenerv3.Listener:
			_, err = xdsconfig.ListenerHCM(r)
		case *clusterv3.Cluster:
			if _, err = xdsconfig.CompileCluster(r); err != nil {
				err = fmt.Errorf("cluster %q: %w", r.GetName(), err)
			}
		}
		if err != nil {
			t.resources = prev
			return err
		}
	}
	return nil
}

func decodeResources(resp *discoveryv3.DiscoveryResponse) (map[string]types.Resource, error) {
	out := map[string]types.Resource{}
	for _, a := range resp.GetResources() {
		if a.GetTypeUrl() != resp.GetTypeUrl() {
			return nil, fmt.Errorf("resource of type %q in a %q response", a.GetTypeUrl(), resp.GetTypeUrl())
		}
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", a.GetTypeUrl(), err)
		}
		name := cachev3.GetResourceName(m)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("duplicate resource %q", name)
		}
		out[name] = m
	}
	return out, nil
}

// snapshot assembles the accepted resources; complete is true when there is
// a listener and every route configuration and load assignment referenced
// has arrived.
func (c *adsClient) snapshot() (map[resourcev3.Type][]types.Resource, bool) {
	set := map[resourcev3.Type][]types.Resource{}
	complete := len(c.types[resourcev3.ListenerType].resources) > 0
	for _, url := range []string{resourcev3.ListenerType, resourcev3.ClusterType} {
		have := c.types[url].resources
		for _, n := range slices.Sorted(maps.Keys(have)) {
			set[url] = append(set[url], have[n])
		}
	}
	for url, names := range c.references() {
		have := c.types[url].resources
		for _, n := range names {
			r, ok := have[n]
			if !ok {
				complete = false
				continue
			}
			set[url] = append(set[url], r)
		}
	}
	return set, complete
}

// references are, by type, the RDS names the accepted listeners reference
// and the EDS names the accepted clusters reference, sorted.
func (c *adsClient) references() map[string][]string {
	all := map[string]types.ResourceWithTTL{}
	for _, url := range []string{resourcev3.ListenerType, resourcev3.ClusterType} {
		for n, r := range c.types[url].resources {
			all[url+"/"+n] = types.ResourceWithTTL{Resource: r}
		}
	}
	refs := cachev3.GetResourceReferences(all)
	return map[string][]string{
		resourcev3.RouteType:    slices.Sorted(maps.Keys(refs[resourcev3.RouteType])),
		resourcev3.EndpointType: slices.Sorted(maps.Keys(refs[resourcev3.EndpointType])),
	}
}
