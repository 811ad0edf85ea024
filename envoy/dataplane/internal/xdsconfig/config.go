// Package xdsconfig compiles the xDS resources the local data plane accepts
// (a listener with an HTTP connection manager, its filters and
// local_reply_config, routes, clusters and endpoints) into the immutable
// Config the data plane swaps in atomically, and rejects what it does not
// emulate, so an ADS update it cannot honour is NACKed.
package xdsconfig

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlymutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/rules"
)

// Config is one immutable, validated configuration of the data plane. It
// is swapped atomically by Apply and read without locks by every request.
type Config struct {
	Listener string
	HCM      *hcmConfig
	Routes   *routeTable
	Clusters map[string]*Cluster

	// DownstreamTLS is the listener's DownstreamTlsContext, nil for
	// plaintext (downstream_tls.go).
	DownstreamTLS *tls.Config
}

// hcmConfig is the compiled HTTP connection manager of the listener.
type hcmConfig struct {
	StreamIdleTimeout time.Duration    // stream_idle_timeout; 0: disabled
	IdleTimeout       time.Duration    // common_http_protocol_options.idle_timeout; 0: disabled (dataplane idle.go)
	early             []*stringMatcher // early header mutation: remove_on_match key matchers
	Filters           []*ExtProcFilter
	LocalReply        *LocalReplyConfig
	GenerateRequestID bool
	UseRemoteAddress  bool // use_remote_address, unless skip_xff_append
	ServerName        string
	BufferLimit       uint64 // listener per_connection_buffer_limit_bytes
	NormalizePath     bool
	MergeSlashes      bool
	// Downstream request limits (codec and connection-manager checks).
	escapedSlashes  hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction
	MaxHeadersBytes int // max_request_headers_kb, default 60 KiB
	MaxHeaders      int // common_http_protocol_options.max_headers_count, default 100
	underscores     corev3.HttpProtocolOptions_HeadersWithUnderscoresAction
	// SuppressEnvoyHeaders is the router's suppress_envoy_headers: no
	// x-envoy-expected-rq-timeout-ms upstream, no
	// x-envoy-upstream-service-time downstream.
	SuppressEnvoyHeaders bool
	// InternalCIDRs is internal_address_config.cidr_ranges: a request is
	// internal only from one of them (none: no request is, Envoy's
	// default since 1.33).
	InternalCIDRs []netip.Prefix
	// XFCC is forward_client_cert_details.
	XFCC hcmv3.HttpConnectionManager_ForwardClientCertDetails
}

// ApplyEarly applies the early header mutation extension
// (source/extensions/http/early_header_mutation/header_mutation) to the
// request headers, before x-request-id handling and routing.
func (h *hcmConfig) ApplyEarly(m *headers.Map) {
	for _, e := range h.early {
		m.DelFunc(e.match)
	}
}

// resourceList is what Apply reads: the resources of each type.
type resourceList map[resourcev3.Type][]types.Resource

// Compile compiles a complete set of resources into a Config, or names the
// first resource it cannot emulate.
func Compile(res resourceList) (*Config, error) {
	_, routeConfigs, err := validated(res[resourcev3.RouteType], "route configuration", (*routev3.RouteConfiguration).GetName)
	if err != nil {
		return nil, err
	}
	_, clas, err := validated(res[resourcev3.EndpointType], "cluster load assignment", (*endpointv3.ClusterLoadAssignment).GetClusterName)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Clusters: map[string]*Cluster{}}
	clusters, _, err := validated(res[resourcev3.ClusterType], "cluster", (*clusterv3.Cluster).GetName)
	if err != nil {
		return nil, err
	}
	for _, c := range clusters {
		if err := cfg.addCluster(c, clas); err != nil {
			return nil, err
		}
	}
	listeners, _, err := validated(res[resourcev3.ListenerType], "listener", (*listenerv3.Listener).GetName)
	if err != nil {
		return nil, err
	}
	sort.Slice(listeners, func(i, j int) bool { return listeners[i].GetName() < listeners[j].GetName() })
	for _, l := range listeners {
		if err := cfg.addListener(l, routeConfigs); err != nil {
			return nil, err
		}
	}
	if cfg.HCM == nil && len(listeners) > 0 {
		return nil, errors.New("no listener has an HTTP connection manager")
	}
	return cfg, nil
}

// validated returns the resources as T, each passing ValidateAll, in order
// and by name (the last of a name); what and name identify a resource in
// the error.
func validated[T interface{ ValidateAll() error }](rs []types.Resource, what string, name func(T) string) ([]T, map[string]T, error) {
	out, byName := make([]T, 0, len(rs)), make(map[string]T, len(rs))
	for _, r := range rs {
		v, ok := r.(T)
		if !ok {
			return nil, nil, fmt.Errorf("%s resource has type %T", what, r)
		}
		if err := v.ValidateAll(); err != nil {
			return nil, nil, fmt.Errorf("%s %q: %w", what, name(v), err)
		}
		out, byName[name(v)] = append(out, v), v
	}
	return out, byName, nil
}

// addCluster compiles a cluster, with its endpoints from clas when it is
// an EDS cluster.
func (cfg *Config) addCluster(c *clusterv3.Cluster, clas map[string]*endpointv3.ClusterLoadAssignment) error {
	cl, err := CompileCluster(c)
	if err != nil {
		return fmt.Errorf("cluster %q: %w", c.GetName(), err)
	}
	if cl.isEDS {
		// An EDS cluster without its assignment has no endpoints (UH).
		if cla, ok := clas[cl.edsName]; ok {
			if cl.priorities, err = compileEndpoints(cla); err != nil {
				return fmt.Errorf("cluster load assignment %q: %w", cl.edsName, err)
			}
		}
	}
	if _, dup := cfg.Clusters[cl.name]; dup {
		return fmt.Errorf("duplicate cluster %q", cl.name)
	}
	cfg.Clusters[cl.name] = cl
	return nil
}

// addListener compiles the listener's HTTP connection manager and its
// routes, unless an earlier listener already has one: the first listener
// with an HTTP connection manager is served.
func (cfg *Config) addListener(l *listenerv3.Listener, routeConfigs map[string]*routev3.RouteConfiguration) error {
	h, err := ListenerHCM(l)
	if err != nil {
		return fmt.Errorf("listener %q: %w", l.GetName(), err)
	}
	if h == nil || cfg.HCM != nil {
		return nil
	}
	hc, err := compileHCM(h)
	if err != nil {
		return fmt.Errorf("listener %q: %w", l.GetName(), err)
	}
	hc.BufferLimit = rules.DefaultBufferLimit
	if l.GetPerConnectionBufferLimitBytes() != nil {
		hc.BufferLimit = uint64(l.GetPerConnectionBufferLimitBytes().GetValue())
	}
	rc := routeConfigs[h.GetRds().GetRouteConfigName()] // ListenerHCM: RDS only
	if rc == nil {
		return fmt.Errorf("listener %q: route configuration %q not found", l.GetName(), h.GetRds().GetRouteConfigName())
	}
	names := map[string]bool{}
	for _, f := range hc.Filters {
		names[f.Name] = true
	}
	if cfg.Routes, err = CompileRouteTable(rc, names); err != nil {
		return fmt.Errorf("route configuration %q: %w", rc.GetName(), err)
	}
	if cfg.DownstreamTLS, err = listenerTLS(l); err != nil {
		return fmt.Errorf("listener %q: %w", l.GetName(), err)
	}
	cfg.Listener, cfg.HCM = l.GetName(), hc
	return nil
}

// ListenerHCM finds the HTTP connection manager in the listener's filter
// chains (or its default filter chain). Listener filters are not emulated.
func ListenerHCM(l *listenerv3.Listener) (*hcmv3.HttpConnectionManager, error) {
	if l.GetApiListener() != nil {
		return nil, errors.New("api_listener is not emulated")
	}
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) { // nil: no default chain

		for _, f := range fc.GetFilters() {
			a := f.GetTypedConfig()
			if a == nil {
				return nil, fmt.Errorf("network filter %q has no typed_config", f.GetName())
			}
			m, err := a.UnmarshalNew()
			if err != nil {
				return nil, fmt.Errorf("network filter %q: %w", f.GetName(), err)
			}
			if h, ok := m.(*hcmv3.HttpConnectionManager); ok {
				if err := h.ValidateAll(); err != nil {
					return nil, fmt.Errorf("http connection manager: %w", err)
				}
				// RDS only: toolmesh's listener never inlines or scopes its
				// routes (checked here, so ADS NACKs it before any RDS).
				if h.GetRds() == nil {
					return nil, fmt.Errorf("route specifier %T is not emulated", h.GetRouteSpecifier())
				}
				return h, nil
			}
		}
	}
	return nil, nil
}

func compileHCM(h *hcmv3.HttpConnectionManager) (*hcmConfig, error) {
	hc := &hcmConfig{
		GenerateRequestID: h.GetGenerateRequestId() == nil || h.GetGenerateRequestId().GetValue(),
		ServerName:        cmp.Or(h.GetServerName(), rules.DefaultServerName),
		StreamIdleTimeout: rules.DefaultStreamIdleTimeout,
		NormalizePath:     h.GetNormalizePath().GetValue(),
		MergeSlashes:      h.GetMergeSlashes(),
		UseRemoteAddress:  h.GetUseRemoteAddress().GetValue() && !h.GetSkipXffAppend(),
	}
	if err := compileHCMRequestRules(hc, h); err != nil {
		return nil, err
	}
	if d := h.GetStreamIdleTimeout(); d != nil {
		hc.StreamIdleTimeout = d.AsDuration()
	}
	var err error
	if hc.early, err = compileEarlyMutations(h.GetEarlyHeaderMutationExtensions()); err != nil {
		return nil, err
	}
	if hc.LocalReply, err = compileLocalReply(h.GetLocalReplyConfig()); err != nil {
		return nil, err
	}
	return hc, compileHTTPFilters(hc, h.GetHttpFilters())
}

// compileHCMRequestRules compiles what the connection manager applies to
// each request's headers: internal addresses, x-forwarded-client-cert,
// escaped slashes and the codec's header limits.
func compileHCMRequestRules(hc *hcmConfig, h *hcmv3.HttpConnectionManager) error {
	for _, r := range h.GetInternalAddressConfig().GetCidrRanges() {
		addr, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			return fmt.Errorf("internal_address_config.cidr_ranges: %q: %w", r.GetAddressPrefix(), err)
		}
		p, err := addr.Prefix(int(r.GetPrefixLen().GetValue()))
		if err != nil {
			return fmt.Errorf("internal_address_config.cidr_ranges: %w", err)
		}
		hc.InternalCIDRs = append(hc.InternalCIDRs, p)
	}
	switch f := h.GetForwardClientCertDetails(); f {
	case hcmv3.HttpConnectionManager_SANITIZE, hcmv3.HttpConnectionManager_FORWARD_ONLY, hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY:
		hc.XFCC = f
	default:
		// APPEND_FORWARD and SANITIZE_SET write the peer certificate's
		// Details, which the local data plane does not.
		return fmt.Errorf("forward_client_cert_details %v is not emulated", f)
	}
	switch a := h.GetPathWithEscapedSlashesAction(); a {
	case hcmv3.HttpConnectionManager_IMPLEMENTATION_SPECIFIC_DEFAULT, hcmv3.HttpConnectionManager_KEEP_UNCHANGED,
		hcmv3.HttpConnectionManager_REJECT_REQUEST:
		// UNESCAPE_AND_FORWARD and UNESCAPE_AND_REDIRECT: toolmesh rejects.
		hc.escapedSlashes = a
	default:
		return fmt.Errorf("path_with_escaped_slashes_action %v is not emulated", a)
	}
	if t := h.GetServerHeaderTransformation(); t != hcmv3.HttpConnectionManager_OVERWRITE {
		return fmt.Errorf("server_header_transformation %v is not emulated", t)
	}
	// Envoy's defaults: 60 KiB of request headers, 100 headers.
	hc.MaxHeadersBytes, hc.MaxHeaders = 60<<10, 100
	hc.IdleTimeout = rules.DefaultIdleTimeout // dataplane idle.go
	if kb := h.GetMaxRequestHeadersKb(); kb != nil {
		hc.MaxHeadersBytes = int(kb.GetValue()) << 10
	}
	if po := h.GetCommonHttpProtocolOptions(); po != nil {
		if n := po.GetMaxHeadersCount(); n != nil {
			hc.MaxHeaders = int(n.GetValue())
		}
		hc.underscores = po.GetHeadersWithUnderscoresAction()
		if d := po.GetIdleTimeout(); d != nil {
			hc.IdleTimeout = d.AsDuration()
		}
		// max_connection_duration, max_stream_duration: not emulated.
	}
	return nil
}

// compileEarlyMutations compiles early_header_mutation_extensions, of which
// the header_mutation extension's remove_on_match is emulated (the one
// mutation toolmesh emits).
func compileEarlyMutations(exts []*corev3.TypedExtensionConfig) ([]*stringMatcher, error) {
	var early []*stringMatcher
	for _, ext := range exts {
		m, err := ext.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("early header mutation %q: %w", ext.GetName(), err)
		}
		hm, ok := m.(*earlymutationv3.HeaderMutation)
		if !ok {
			return nil, fmt.Errorf("early header mutation %q: %T is not emulated", ext.GetName(), m)
		}
		if err := hm.ValidateAll(); err != nil {
			return nil, fmt.Errorf("early header mutation %q: %w", ext.GetName(), err)
		}
		for _, mu := range hm.GetMutations() {
			rm, ok := mu.GetAction().(*mutationrulesv3.HeaderMutation_RemoveOnMatch_)
			if !ok {
				return nil, fmt.Errorf("early header mutation %q: %T is not emulated", ext.GetName(), mu.GetAction())
			}
			sm, err := compileStringMatcher(rm.RemoveOnMatch.GetKeyMatcher())
			if err != nil {
				return nil, fmt.Errorf("early header mutation %q: %w", ext.GetName(), err)
			}
			early = append(early, sm)
		}
	}
	return early, nil
}

// compileHTTPFilters compiles http_filters: ext_proc filters, and the
// router, which must be last; optional filters it does not know are
// skipped, as Envoy skips an optional filter it has no factory for.
func compileHTTPFilters(hc *hcmConfig, filters []*hcmv3.HttpFilter) error {
	router := false
	for i, f := range filters {
		if f.GetTypedConfig() == nil {
			return fmt.Errorf("http filter %q: only typed_config is emulated", f.GetName())
		}
		m, err := f.GetTypedConfig().UnmarshalNew()
		switch v, ok := m.(interface{ ValidateAll() error }); {
		case err != nil && f.GetIsOptional():
			continue // an optional filter of a type it does not know
		case err == nil && ok:
			err = v.ValidateAll()
		}
		if err != nil {
			return fmt.Errorf("http filter %q: %w", f.GetName(), err)
		}
		switch c := m.(type) {
		case *extprocfilterv3.ExternalProcessor:
			ep, err := compileExtProc(f.GetName(), f.GetDisabled(), c)
			if err != nil {
				return fmt.Errorf("http filter %q: %w", f.GetName(), err)
			}
			hc.Filters = append(hc.Filters, ep)
		case *routerv3.Router:
			if i != len(filters)-1 {
				return fmt.Errorf("http filter %q: the router must be the last filter", f.GetName())
			}
			hc.SuppressEnvoyHeaders, router = c.GetSuppressEnvoyHeaders(), true
		default:
			if f.GetIsOptional() {
				continue
			}
			return fmt.Errorf("http filter %q (%s) is not emulated by the local data plane", f.GetName(), f.GetTypedConfig().GetTypeUrl())
		}
	}
	if !router {
		return errors.New("the last http filter must be the router")
	}
	return nil
}
