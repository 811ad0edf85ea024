package xds

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// ClusterView is one Tool Service's cluster as the last successful build
// programmed it: the effective settings (built-in defaults, the Portal's
// cluster object, the override file's defaults and its entry for the
// service, merged by resolveSettings exactly as the translator does) and
// which layer each value comes from. It is for reading (the admin console):
// nothing in it is sent to Envoy.
type ClusterView struct {
	// Service is the Tool Service name; Cluster the Envoy cluster.
	Service string `json:"service"`
	Cluster string `json:"cluster"`
	// Protocol is "toolservice" or "mcp" (registry.ToolService.ProtocolName).
	Protocol string `json:"protocol"`
	// Endpoint is scheme://authority of the service URL, without any path
	// or user information.
	Endpoint string `json:"endpoint"`
	// Routes are the keys of the routes that list the service, sorted.
	Routes   []string          `json:"routes"`
	Settings EffectiveSettings `json:"settings"`
	// Origins maps each field whose value does not come from the built-in
	// default to its layer: "the Portal cluster object", "overrides
	// defaults" or "overrides services.<name>".
	Origins map[string]string `json:"origins,omitempty"`
}

// EffectiveSettings are the merged values of every Tuning field, named as
// in the override file (docs/sre.md). Durations are Go duration strings.
type EffectiveSettings struct {
	ConnectTimeout        config.Duration  `json:"connectTimeout"`
	RequestTimeout        config.Duration  `json:"requestTimeout"` // 0s: no route timeout
	IdleTimeout           *config.Duration `json:"idleTimeout,omitempty"`
	ConnectionIdleTimeout config.Duration  `json:"connectionIdleTimeout"`
	MaxConnections        uint32           `json:"maxConnections"`
	MaxPendingRequests    uint32           `json:"maxPendingRequests"`
	MaxRequests           uint32           `json:"maxRequests"`
	MaxRetries            uint32           `json:"maxRetries"`
	MaxConcurrentRetries  uint32           `json:"maxConcurrentRetries"`
	PerTryTimeout         *config.Duration `json:"perTryTimeout,omitempty"`
	RetryOn               []string         `json:"retryOn"`
	// OutlierDetection and HealthCheck are nil when off.
	OutlierDetection      *registry.OutlierDetection `json:"outlierDetection,omitempty"`
	HealthCheck           *registry.HealthCheck      `json:"healthCheck,omitempty"`
	LBPolicy              string                     `json:"lbPolicy"`
	HTTP2                 bool                       `json:"http2"`
	TLS                   bool                       `json:"tls"`
	SNI                   string                     `json:"sni,omitempty"`    // TLS only; none for an IP literal
	CAFile                string                     `json:"caFile,omitempty"` // TLS only
	MaxRequestBytes       uint64                     `json:"maxRequestBytes"`
	HealthyPanicThreshold float64                    `json:"healthyPanicThreshold"`
}

// tuningFields are the Tuning fields (JSON names) whose origin ClusterView
// reports.
var tuningFields = []string{
	"connectTimeout", "requestTimeout", "idleTimeout", "connectionIdleTimeout",
	"maxConnections", "maxPendingRequests", "maxRequests", "maxRetries",
	"maxConcurrentRetries", "perTryTimeout", "retryOn", "outlierDetection",
	"healthCheck", "lbPolicy", "http2", "sni", "caFile", "maxRequestBytes",
	"healthyPanicThreshold",
}

// buildInput is the input of the last successful build, kept for Clusters.
type buildInput struct {
	routes    []registry.Route
	overrides *Overrides
}

// Clusters returns the effective cluster settings of every Tool Service of
// the last successful build, sorted by service name; nil before the first.
// It recomputes them from that build's routes and overrides, so it never
// waits for a build in progress.
func (s *Server) Clusters() []ClusterView {
	b := s.lastBuild.Load()
	if b == nil {
		return nil
	}
	opts := s.opts
	opts.Overrides = b.overrides
	opts = opts.withDefaults()
	byName := map[string]*ClusterView{}
	for _, r := range b.routes {
		for _, svc := range r.ToolServices {
			if v := byName[svc.Name]; v != nil {
				if !slices.Contains(v.Routes, r.Key) {
					v.Routes = append(v.Routes, r.Key)
				}
				continue
			}
			v, err := clusterView(svc, opts)
			if err != nil {
				// The build translated this service, so this cannot happen;
				// say so rather than show nothing.
				v = ClusterView{Service: svc.Name, Cluster: wire.ClusterName(svc.Name),
					Protocol: svc.ProtocolName(), Origins: map[string]string{"error": err.Error()}}
			}
			v.Routes = []string{r.Key}
			byName[svc.Name] = &v
		}
	}
	out := make([]ClusterView, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		v := byName[name]
		slices.Sort(v.Routes)
		out = append(out, *v)
	}
	return out
}

// clusterView resolves one service the way newUpstream does.
func clusterView(svc registry.ToolService, opts Options) (ClusterView, error) {
	u, err := newUpstream(svc, opts)
	if err != nil {
		return ClusterView{}, fmt.Errorf("tool service %q: %w", svc.Name, err)
	}
	st := u.settings
	es := EffectiveSettings{
		ConnectTimeout:        config.Duration(st.connectTimeout),
		RequestTimeout:        config.Duration(st.requestTimeout),
		ConnectionIdleTimeout: config.Duration(st.connIdleTimeout),
		MaxConnections:        st.maxConnections,
		MaxPendingRequests:    st.maxPendingRequests,
		MaxRequests:           st.maxRequests,
		MaxRetries:            st.maxRetries,
		MaxConcurrentRetries:  st.maxConcurrentRetries,
		RetryOn:               strings.Split(st.retryOn, ","),
		OutlierDetection:      st.outlier,
		HealthCheck:           st.health,
		LBPolicy:              st.lbPolicy,
		HTTP2:                 st.http2,
		TLS:                   u.scheme == "https",
		MaxRequestBytes:       st.maxRequestBytes,
		HealthyPanicThreshold: st.panicThreshold,
	}
	if st.idleTimeout != nil {
		d := config.Duration(*st.idleTimeout)
		es.IdleTimeout = &d
	}
	if st.perTryTimeout > 0 {
		d := config.Duration(st.perTryTimeout)
		es.PerTryTimeout = &d
	}
	if es.TLS {
		// As upstreamTLS sends it.
		if !u.ip {
			es.SNI = u.host
		}
		if st.sni != nil {
			es.SNI = *st.sni
		}
		es.CAFile = st.caFile
	}
	v := ClusterView{
		Service:  svc.Name,
		Cluster:  u.cluster,
		Protocol: svc.ProtocolName(),
		Endpoint: u.scheme + "://" + u.authority,
		Settings: es,
	}
	for _, f := range tuningFields {
		if o := fieldOrigin(f, svc, opts.Overrides); o != "the built-in default" {
			if v.Origins == nil {
				v.Origins = map[string]string{}
			}
			v.Origins[f] = o
		}
	}
	return v, nil
}
