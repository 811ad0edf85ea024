package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolmesh/toolmesh/xds"
)

// TracingConfig configures OpenTelemetry traces exported over OTLP
// (docs/operators.md, "Tracing"). Tracing is off unless Enabled. A field
// left unset falls back to the OpenTelemetry SDK's standard OTEL_*
// environment variables, then to the SDK's defaults; a field that is set
// wins over the environment.
type TracingConfig struct {
	// Enabled turns tracing on (flag --tracing). OTEL_SDK_DISABLED=true
	// turns it off again.
	Enabled bool `json:"enabled,omitempty"`
	// Endpoint is the collector's OTLP URL: http://host:4317 (gRPC, no TLS),
	// https://host:4317 (gRPC over TLS), or for protocol http the base URL,
	// http(s)://host:4318, to which /v1/traces is added. Empty:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, then
	// the SDK's default (localhost, TLS).
	Endpoint string `json:"endpoint,omitempty"`
	// Protocol is "grpc" or "http" (OTLP over HTTP with protobuf). Empty:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL
	// ("grpc" or "http/protobuf"), then grpc.
	Protocol string `json:"protocol,omitempty"`
	// SamplingRatio is the share of new traces sampled, 0 to 1; a request
	// that carries a trace context follows its sampled flag (parent-based).
	// Unset: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, then 1.
	SamplingRatio *float64 `json:"samplingRatio,omitempty"`
	// ResourceAttributes are added to the resource of every span, over
	// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (service.name defaults
	// to toolmesh).
	ResourceAttributes map[string]string `json:"resourceAttributes,omitempty"`
	// Envoy programs Envoy's own OpenTelemetry tracer over xDS, exporting
	// over OTLP/gRPC to the same collector (a cluster toolmesh emits), so
	// Envoy's spans and toolmesh's join one trace. Needs protocol grpc and
	// an Endpoint; the local data plane of `run` does not trace and is
	// never programmed with it.
	Envoy bool `json:"envoy,omitempty"`
}

// on reports whether tracing is enabled, environment included.
func (t *TracingConfig) on() bool {
	if t == nil || !t.Enabled {
		return false
	}
	v, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")))
	return !v
}

// validate checks the tracing section; field names are the config keys.
func (t *TracingConfig) validate() error {
	if t == nil {
		return nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("tracing.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch t.Protocol {
	case "", "grpc", "http":
	default:
		bad("protocol (--tracing-protocol)", "%q is neither grpc nor http", t.Protocol)
	}
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("endpoint (--tracing-endpoint)", "%q is not an http:// or https:// URL with a host", t.Endpoint)
		}
	}
	if r := t.SamplingRatio; r != nil && (*r < 0 || *r > 1) {
		bad("samplingRatio (--tracing-sampling-ratio)", "%g is not between 0 and 1", *r)
	}
	for k := range t.ResourceAttributes {
		if strings.TrimSpace(k) == "" {
			bad("resourceAttributes", "an attribute has an empty name")
		}
	}
	if t.Envoy {
		if t.Protocol != "grpc" {
			bad("envoy", "needs tracing.protocol grpc: Envoy's tracer exports OTLP over gRPC")
		}
		if _, err := t.envoyCollector(); err != nil {
			bad("envoy", "%v", err)
		}
	}
	return errors.Join(errs...)
}

// envoyCollector is the collector's host:port for Envoy's tracer.
func (t *TracingConfig) envoyCollector() (string, error) {
	u, err := url.Parse(t.Endpoint)
	if t.Endpoint == "" || err != nil || u.Host == "" {
		return "", errors.New("needs tracing.endpoint, the collector Envoy exports to")
	}
	host, port := u.Hostname(), u.Port()
	port = cmp.Or(port, "4317")
	return net.JoinHostPort(host, port), nil
}

// newTracerProvider builds the tracer provider of a tracing config that is
// on: a batching OTLP exporter, the sampler and the resource. Shut it down
// to flush.
func newTracerProvider(ctx context.Context, t *TracingConfig) (*sdktrace.TracerProvider, error) {
	exp, err := newExporter(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("tracing exporter: %w", err)
	}
	res, err := newResource(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if t.SamplingRatio != nil {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*t.SamplingRatio))))
	} // else the SDK reads OTEL_TRACES_SAMPLER, default parent-based always-on
	return sdktrace.NewTracerProvider(opts...), nil
}

// newResource is the resource of every span. Later sources win: the
// default service name and version, then OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME, then the config's resourceAttributes.
func newResource(ctx context.Context, t *TracingConfig) (*resource.Resource, error) {
	keys := make([]string, 0, len(t.ResourceAttributes))
	for k := range t.ResourceAttributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]attribute.KeyValue, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, attribute.String(k, t.ResourceAttributes[k]))
	}
	return resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "toolmesh"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithAttributes(attrs...))
}

// newExporter is the OTLP exporter of the configured (or environment's)
// protocol. Options given here override the OTEL_EXPORTER_OTLP_* variables,
// which the exporters read themselves.
func newExporter(ctx context.Context, t *TracingConfig) (*otlptrace.Exporter, error) {
	proto := t.Protocol
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
	}
	switch proto {
	case "", "grpc":
		var opts []otlptracegrpc.Option
		if t.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(t.Endpoint))
		}
		return otlptracegrpc.New(ctx, opts...)
	case "http", "http/protobuf":
		var opts []otlptracehttp.Option
		if t.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(t.Endpoint, "/")+"/v1/traces"))
		}
		return otlptracehttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("OTLP protocol %q is not supported (grpc, http/protobuf)", proto)
	}
}

// applyTracingFlags applies the --tracing* flags over the config file's
// tracing section.
func applyTracingFlags(fs *pflag.FlagSet, cfg *Config) error {
	changed := func(name string) bool {
		f := fs.Lookup(name)
		return f != nil && f.Changed
	}
	t := cfg.Tracing
	get := func() *TracingConfig {
		if t == nil {
			t = &TracingConfig{}
			cfg.Tracing = t
		}
		return t
	}
	var errs []error
	if changed("tracing") {
		v, err := fs.GetBool("tracing")
		errs = append(errs, err)
		get().Enabled = v
	}
	if changed("tracing-endpoint") {
		get().Endpoint = fs.Lookup("tracing-endpoint").Value.String()
	}
	if changed("tracing-protocol") {
		get().Protocol = fs.Lookup("tracing-protocol").Value.String()
	}
	if changed("tracing-sampling-ratio") {
		v, err := fs.GetFloat64("tracing-sampling-ratio")
		errs = append(errs, err)
		get().SamplingRatio = &v
	}
	if changed("tracing-resource-attributes") {
		v, err := fs.GetStringToString("tracing-resource-attributes")
		errs = append(errs, err)
		get().ResourceAttributes = v
	}
	return errors.Join(errs...)
}

// startTracing builds the tracer provider when tracing is on and registers
// its shutdown, which flushes the spans still batched, as a cleanup. It
// returns nil with tracing off.
func startTracing(ctx context.Context, cfg Config, m mode, log *slog.Logger, cleanups *[]func()) (trace.TracerProvider, error) {
	if !cfg.Tracing.on() {
		return nil, nil
	}
	tp, err := newTracerProvider(ctx, cfg.Tracing)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	*cleanups = append(*cleanups, func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("tracing: flushing spans at shutdown failed", "error", err)
		}
	})
	log.Info("tracing on", "endpoint", cfg.Tracing.Endpoint, "protocol", cfg.Tracing.Protocol,
		"envoy", cfg.Tracing.Envoy && m != modeRun)
	return tp, nil
}

// envoyTracing is the xDS option that programs Envoy's tracer, nil when
// off. Never for `run`: its local data plane does not trace
// (envoy/dataplane/internal/rules/rules.go) and is not programmed with a tracer.
func (a *app) envoyTracing() *xds.EnvoyTracing {
	t := a.cfg.Tracing
	if a.mode == modeRun || a.tracer == nil || !t.Envoy {
		return nil
	}
	addr, err := t.envoyCollector()
	if err != nil {
		return nil // validate rejected this config already
	}
	ratio := 1.0
	if t.SamplingRatio != nil {
		ratio = *t.SamplingRatio
	}
	return &xds.EnvoyTracing{Collector: addr, SamplingPercent: ratio * 100}
}
