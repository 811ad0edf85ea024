package xds

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// EnvoyTracing programs Envoy's own OpenTelemetry tracer on the MCP
// listener (docs/operators.md, "Tracing"): Envoy starts or continues the
// trace of every request, exports its spans over OTLP/gRPC to Collector,
// and passes its span to the ext_proc server and the Tool Service, so
// Envoy's spans and toolmesh's join one trace.
type EnvoyTracing struct {
	// Collector is the OTLP/gRPC collector's host:port; xDS emits the
	// cluster CollectorCluster for it.
	Collector string `json:"collector"`
	// SamplingPercent is the share of requests without a sampling decision
	// that Envoy samples, 0 to 100 (HCM tracing.random_sampling).
	SamplingPercent float64 `json:"samplingPercent"`
	// ServiceName is the service.name of Envoy's spans (default envoy).
	ServiceName string `json:"serviceName,omitempty"`
}

// CollectorCluster is the cluster Envoy's tracer exports to. It is emitted
// over CDS with the Tool Service clusters, not required in the bootstraps:
// the tracer builds its gRPC client with the cluster check skipped
// (source/extensions/tracers/opentelemetry/opentelemetry_tracer_impl.cc,
// Driver: factoryForGrpcService(..., skip_cluster_check true)), and ADS
// delivers clusters before the listener that names it.
const CollectorCluster = "toolmesh_otel_collector"

// openTelemetryTracer is the tracer's extension name
// (source/extensions/tracers/opentelemetry/config.cc).
const openTelemetryTracer = "envoy.tracers.opentelemetry"

const collectorConnectTimeout = 5 * time.Second

func (t *EnvoyTracing) check() error {
	if t == nil {
		return nil
	}
	if _, _, err := hostPort("EnvoyTracing.Collector", t.Collector); err != nil {
		return err
	}
	if t.SamplingPercent < 0 || t.SamplingPercent > 100 {
		return fmt.Errorf("options: EnvoyTracing.SamplingPercent %g is not between 0 and 100", t.SamplingPercent)
	}
	return nil
}

// buildTracing is the HCM tracing block, nil with tracing off.
func buildTracing(opts Options) (*hcmv3.HttpConnectionManager_Tracing, error) {
	t := opts.EnvoyTracing
	if t == nil {
		return nil, nil
	}
	name := t.ServiceName
	name = cmp.Or(name, "envoy")
	cfg, err := pack(&tracev3.OpenTelemetryConfig{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: CollectorCluster},
		}},
		ServiceName: name,
	})
	if err != nil {
		return nil, err
	}
	return &hcmv3.HttpConnectionManager_Tracing{
		Provider: &tracev3.Tracing_Http{
			Name:       openTelemetryTracer,
			ConfigType: &tracev3.Tracing_Http_TypedConfig{TypedConfig: cfg},
		},
		RandomSampling: &typev3.Percent{Value: t.SamplingPercent},
	}, nil
}

// buildCollectorCluster is the HTTP/2 cluster of the OTLP collector, nil
// with tracing off: static for an IP address, strict DNS for a name.
func buildCollectorCluster(opts Options) (*clusterv3.Cluster, error) {
	t := opts.EnvoyTracing
	if t == nil {
		return nil, nil
	}
	host, port, _ := hostPort("", t.Collector) // checked by Options.check
	hpo, err := httpProtocolOptions(true, time.Hour)
	if err != nil {
		return nil, err
	}
	c := &clusterv3.Cluster{
		Name:                          CollectorCluster,
		ConnectTimeout:                durationpb.New(collectorConnectTimeout),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsKey: hpo},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: CollectorCluster,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
						Address: socketAddress(host, port),
					}},
				}},
			}},
		},
	}
	_, notIP := netip.ParseAddr(host)
	return staticOrDNS(c, notIP == nil)
}

// insertCluster inserts c into clusters, which are sorted by name, keeping
// them sorted.
func insertCluster(clusters []types.Resource, c types.Resource) []types.Resource {
	name := func(r types.Resource) string { return r.(*clusterv3.Cluster).GetName() }
	i, _ := slices.BinarySearchFunc(clusters, name(c), func(r types.Resource, n string) int {
		return strings.Compare(name(r), n)
	})
	return slices.Insert(clusters, i, c)
}
