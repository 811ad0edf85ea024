package dataplane

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
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
	"google.golang.org/protobuf/proto"
)

// config is one immutable, validated configuration of the data plane. It
// is swapped atomically by Apply and read without locks by every request.
type config struct {
	listener string
	hcm      *hcmConfig
	routes   *routeTable
	clusters map[string]*cluster

	// downstreamTLS is the listener's DownstreamTlsContext, nil for
	// plaintext (downstream_tls.go).
	downstreamTLS *tls.Config
}

const (
	serverOverwrite = iota
	serverAppendIfAbsent
	serverPassThrough
)

// hcmConfig is the compiled HTTP connection manager of the listener.
type hcmConfig struct {
	streamIdleTimeout time.Duration // stream_idle_timeout; 0: disabled
	idleTimeout       time.Duration // common_http_protocol_options.idle_timeout; 0: disabled (idle.go)
	early             []earlyMutation
	filters           []*extProcFilter
	localReply        *localReplyConfig
	generateRequestID bool
	useRemoteAddress  bool // use_remote_address, unless skip_xff_append
	serverName        string
	serverHeader      int
	bufferLimit       uint64 // listener per_connection_buffer_limit_bytes
	rdsName           string
	normalizePath     bool
	mergeSlashes      bool
	// Downstream request limits (codec and connection-manager checks).
	escapedSlashes  hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction
	maxHeadersBytes int // max_request_headers_kb, default 60 KiB
	maxHeaders      int // common_http_protocol_options.max_headers_count, default 100
	underscores     corev3.HttpProtocolOptions_HeadersWithUnderscoresAction
	// suppressEnvoyHeaders is the router's suppress_envoy_headers: no
	// x-envoy-expected-rq-timeout-ms upstream, no
	// x-envoy-upstream-service-time downstream.
	suppressEnvoyHeaders bool
	// internalCIDRs is internal_address_config.cidr_ranges: a request is
	// internal only from one of them (none: no request is, Envoy's
	// default since 1.33).
	internalCIDRs []netip.Prefix
	// xfcc is forward_client_cert_details.
	xfcc hcmv3.HttpConnectionManager_ForwardClientCertDetails
}

// earlyMutation is one mutation of the early header mutation extension
// (source/extensions/http/early_header_mutation/header_mutation), applied to
// the request headers before x-request-id handling and routing.
type earlyMutation struct {
	remove string
	match  *stringMatcher
	add    *headerAdd
}

// filtersOrNil returns the ext_proc filters; nil for a nil manager.
func (h *hcmConfig) filtersOrNil() []*extProcFilter {
	if h == nil {
		return nil
	}
	return h.filters
}

func (h *hcmConfig) applyEarly(m *headerMap, c *fmtContext) {
	for _, e := range h.early {
		switch {
		case e.remove != "":
			m.del(e.remove)
		case e.match != nil:
			m.delFunc(e.match.match)
		case e.add != nil:
			applyHeadersToAdd(m, []headerAdd{*e.add}, c)
		}
	}
}

// resourceList is what Apply reads: the resources of each type.
type resourceList map[resourcev3.Type][]types.Resource

func compileConfig(res resourceList) (*config, error) {
	routeConfigs := map[string]*routev3.RouteConfiguration{}
	for _, r := range res[resourcev3.RouteType] {
		rc, ok := r.(*routev3.RouteConfiguration)
		if !ok {
			return nil, fmt.Errorf("route resource has type %T", r)
		}
		if err := rc.ValidateAll(); err != nil {
			return nil, fmt.Errorf("route configuration %q: %w", rc.GetName(), err)
		}
		routeConfigs[rc.GetName()] = rc
	}
	clas := map[string]*endpointv3.ClusterLoadAssignment{}
	for _, r := range res[resourcev3.EndpointType] {
		cla, ok := r.(*endpointv3.ClusterLoadAssignment)
		if !ok {
			return nil, fmt.Errorf("endpoint resource has type %T", r)
		}
		if err := cla.ValidateAll(); err != nil {
			return nil, fmt.Errorf("cluster load assignment %q: %w", cla.GetClusterName(), err)
		}
		clas[cla.GetClusterName()] = cla
	}
	cfg := &config{clusters: map[string]*cluster{}}
	for _, r := range res[resourcev3.ClusterType] {
		c, ok := r.(*clusterv3.Cluster)
		if !ok {
			return nil, fmt.Errorf("cluster resource has type %T", r)
		}
		if err := c.ValidateAll(); err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		cl, err := compileCluster(c)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.GetName(), err)
		}
		if cl.isEDS {
			// An EDS cluster without its assignment has no endpoints (UH).
			if cla, ok := clas[cl.edsName]; ok {
				if cl.priorities, err = compileEndpoints(cla); err != nil {
					return nil, fmt.Errorf("cluster load assignment %q: %w", cl.edsName, err)
				}
			}
		}
		if _, dup := cfg.clusters[cl.name]; dup {
			return nil, fmt.Errorf("duplicate cluster %q", cl.name)
		}
		cfg.clusters[cl.name] = cl
	}
	listeners := make([]*listenerv3.Listener, 0, len(res[resourcev3.ListenerType]))
	for _, r := range res[resourcev3.ListenerType] {
		l, ok := r.(*listenerv3.Listener)
		if !ok {
			return nil, fmt.Errorf("listener resource has type %T", r)
		}
		if err := l.ValidateAll(); err != nil {
			return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
		}
		listeners = append(listeners, l)
	}
	sort.Slice(listeners, func(i, j int) bool { return listeners[i].GetName() < listeners[j].GetName() })
	for _, l := range listeners {
		h, err := listenerHCM(l)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
		}
		if h == nil || cfg.hcm != nil {
			continue // the first listener with an HTTP connection manager is served
		}
		hc, inline, err := compileHCM(h)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
		}
		hc.bufferLimit = defaultBufferLimit
		if l.GetPerConnectionBufferLimitBytes() != nil {
			hc.bufferLimit = uint64(l.GetPerConnectionBufferLimitBytes().GetValue())
		}
		rc := inline
		if rc == nil {
			if rc = routeConfigs[hc.rdsName]; rc == nil {
				return nil, fmt.Errorf("listener %q: route configuration %q not found", l.GetName(), hc.rdsName)
			}
		}
		names := map[string]bool{}
		for _, f := range hc.filters {
			names[f.name] = true
		}
		if cfg.routes, err = compileRouteTable(rc, names); err != nil {
			return nil, fmt.Errorf("route configuration %q: %w", rc.GetName(), err)
		}
		if cfg.downstreamTLS, err = listenerTLS(l); err != nil {
			return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
		}
		cfg.listener, cfg.hcm = l.GetName(), hc
	}
	if cfg.hcm == nil && len(listeners) > 0 {
		return nil, errors.New("no listener has an HTTP connection manager")
	}
	return cfg, nil
}

// listenerHCM finds the HTTP connection manager in the listener's filter
// chains (or its default filter chain). Listener filters are not emulated.
func listenerHCM(l *listenerv3.Listener) (*hcmv3.HttpConnectionManager, error) {
	chains := l.GetFilterChains()
	if l.GetDefaultFilterChain() != nil {
		chains = append(chains, l.GetDefaultFilterChain())
	}
	if l.GetApiListener() != nil {
		return nil, errors.New("api_listener is not emulated")
	}
	for _, fc := range chains {
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
				return h, nil
			}
		}
	}
	return nil, nil
}

func compileHCM(h *hcmv3.HttpConnectionManager) (*hcmConfig, *routev3.RouteConfiguration, error) {
	hc := &hcmConfig{
		generateRequestID: h.GetGenerateRequestId() == nil || h.GetGenerateRequestId().GetValue(),
		serverName:        h.GetServerName(),
		normalizePath:     h.GetNormalizePath().GetValue(),
		mergeSlashes:      h.GetMergeSlashes(),
		useRemoteAddress:  h.GetUseRemoteAddress().GetValue() && !h.GetSkipXffAppend(),
	}
	for _, r := range h.GetInternalAddressConfig().GetCidrRanges() {
		addr, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			return nil, nil, fmt.Errorf("internal_address_config.cidr_ranges: %q: %w", r.GetAddressPrefix(), err)
		}
		p, err := addr.Prefix(int(r.GetPrefixLen().GetValue()))
		if err != nil {
			return nil, nil, fmt.Errorf("internal_address_config.cidr_ranges: %w", err)
		}
		hc.internalCIDRs = append(hc.internalCIDRs, p)
	}
	switch f := h.GetForwardClientCertDetails(); f {
	case hcmv3.HttpConnectionManager_SANITIZE, hcmv3.HttpConnectionManager_FORWARD_ONLY, hcmv3.HttpConnectionManager_ALWAYS_FORWARD_ONLY:
		hc.xfcc = f
	default:
		// APPEND_FORWARD and SANITIZE_SET write the peer certificate's
		// details, which the local data plane does not.
		return nil, nil, fmt.Errorf("forward_client_cert_details %v is not emulated", f)
	}
	switch a := h.GetPathWithEscapedSlashesAction(); a {
	case hcmv3.HttpConnectionManager_IMPLEMENTATION_SPECIFIC_DEFAULT, hcmv3.HttpConnectionManager_KEEP_UNCHANGED,
		hcmv3.HttpConnectionManager_REJECT_REQUEST, hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD:
		hc.escapedSlashes = a
	default:
		return nil, nil, fmt.Errorf("path_with_escaped_slashes_action %v is not emulated", a)
	}
	// Envoy's defaults: 60 KiB of request headers, 100 headers.
	hc.maxHeadersBytes, hc.maxHeaders = 60<<10, 100
	hc.idleTimeout = defaultIdleTimeout // idle.go
	if kb := h.GetMaxRequestHeadersKb(); kb != nil {
		hc.maxHeadersBytes = int(kb.GetValue()) << 10
	}
	if po := h.GetCommonHttpProtocolOptions(); po != nil {
		if n := po.GetMaxHeadersCount(); n != nil {
			hc.maxHeaders = int(n.GetValue())
		}
		hc.underscores = po.GetHeadersWithUnderscoresAction()
		if d := po.GetIdleTimeout(); d != nil {
			hc.idleTimeout = d.AsDuration()
		}
		// max_connection_duration, max_stream_duration: not emulated.
	}
	if hc.serverName == "" {
		hc.serverName = defaultServerName
	}
	hc.streamIdleTimeout = defaultStreamIdleTimeout
	if d := h.GetStreamIdleTimeout(); d != nil {
		hc.streamIdleTimeout = d.AsDuration()
	}
	switch h.GetServerHeaderTransformation() {
	case hcmv3.HttpConnectionManager_APPEND_IF_ABSENT:
		hc.serverHeader = serverAppendIfAbsent
	case hcmv3.HttpConnectionManager_PASS_THROUGH:
		hc.serverHeader = serverPassThrough
	}
	var inline *routev3.RouteConfiguration
	switch rs := h.GetRouteSpecifier().(type) {
	case *hcmv3.HttpConnectionManager_Rds:
		hc.rdsName = rs.Rds.GetRouteConfigName()
	case *hcmv3.HttpConnectionManager_RouteConfig:
		inline = rs.RouteConfig
	default:
		return nil, nil, fmt.Errorf("route specifier %T is not emulated", rs)
	}
	for _, ext := range h.GetEarlyHeaderMutationExtensions() {
		m, err := ext.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, nil, fmt.Errorf("early header mutation %q: %w", ext.GetName(), err)
		}
		hm, ok := m.(*earlymutationv3.HeaderMutation)
		if !ok {
			return nil, nil, fmt.Errorf("early header mutation %q: %T is not emulated", ext.GetName(), m)
		}
		if err := hm.ValidateAll(); err != nil {
			return nil, nil, fmt.Errorf("early header mutation %q: %w", ext.GetName(), err)
		}
		for _, mu := range hm.GetMutations() {
			switch {
			case mu.GetRemove() != "":
				hc.early = append(hc.early, earlyMutation{remove: strings.ToLower(mu.GetRemove())})
			case mu.GetRemoveOnMatch() != nil:
				sm, err := compileStringMatcher(mu.GetRemoveOnMatch().GetKeyMatcher())
				if err != nil {
					return nil, nil, fmt.Errorf("early header mutation %q: %w", ext.GetName(), err)
				}
				hc.early = append(hc.early, earlyMutation{match: sm})
			case mu.GetAppend() != nil:
				one, err := compileHeadersToAdd([]*corev3.HeaderValueOption{mu.GetAppend()})
				if err != nil {
					return nil, nil, fmt.Errorf("early header mutation %q: %w", ext.GetName(), err)
				}
				hc.early = append(hc.early, earlyMutation{add: &one[0]})
			}
		}
	}
	var err error
	if hc.localReply, err = compileLocalReply(h.GetLocalReplyConfig()); err != nil {
		return nil, nil, err
	}
	filters := h.GetHttpFilters()
	for i, f := range filters {
		tc := f.GetTypedConfig()
		if tc == nil {
			return nil, nil, fmt.Errorf("http filter %q: only typed_config is emulated", f.GetName())
		}
		m, err := tc.UnmarshalNew()
		if err != nil {
			if f.GetIsOptional() {
				continue
			}
			return nil, nil, fmt.Errorf("http filter %q: %w", f.GetName(), err)
		}
		if v, ok := m.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				return nil, nil, fmt.Errorf("http filter %q: %w", f.GetName(), err)
			}
		}
		switch c := m.(type) {
		case *extprocfilterv3.ExternalProcessor:
			ep, err := compileExtProc(f.GetName(), f.GetDisabled(), c)
			if err != nil {
				return nil, nil, fmt.Errorf("http filter %q: %w", f.GetName(), err)
			}
			hc.filters = append(hc.filters, ep)
		case *routerv3.Router:
			if i != len(filters)-1 {
				return nil, nil, fmt.Errorf("http filter %q: the router must be the last filter", f.GetName())
			}
			hc.suppressEnvoyHeaders = c.GetSuppressEnvoyHeaders()
		default:
			if f.GetIsOptional() {
				continue
			}
			return nil, nil, fmt.Errorf("http filter %q (%s) is not emulated by the local data plane", f.GetName(), tc.GetTypeUrl())
		}
	}
	if len(filters) == 0 {
		return nil, nil, errors.New("no http filters: the router filter is required")
	}
	if _, ok := mustUnmarshal(filters[len(filters)-1]).(*routerv3.Router); !ok {
		return nil, nil, errors.New("the last http filter must be the router")
	}
	return hc, inline, nil
}

func mustUnmarshal(f *hcmv3.HttpFilter) proto.Message {
	m, err := f.GetTypedConfig().UnmarshalNew()
	if err != nil {
		return nil
	}
	return m
}
