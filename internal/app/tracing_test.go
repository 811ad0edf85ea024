package app

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/pflag"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestTracingConfig: the tracing section, flags over the file, and the
// checks that name the key to change.
func TestTracingConfig(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		flags   []string
		wantErr string // substring; "" for none
		check   func(t *testing.T, c *TracingConfig)
	}{
		{name: "off by default", check: func(t *testing.T, c *TracingConfig) {
			if c.on() {
				t.Error("tracing on without configuration")
			}
		}},
		{name: "file", file: "tracing: {enabled: true, endpoint: 'http://127.0.0.1:4317', protocol: grpc, samplingRatio: 0.25, resourceAttributes: {env: test}}",
			check: func(t *testing.T, c *TracingConfig) {
				if !c.on() || c.Endpoint != "http://127.0.0.1:4317" || *c.SamplingRatio != 0.25 || c.ResourceAttributes["env"] != "test" {
					t.Errorf("got %+v", c)
				}
			}},
		{name: "flags over file", file: "tracing: {enabled: false, samplingRatio: 0.25, protocol: http}",
			flags: []string{"--tracing", "--tracing-sampling-ratio=0", "--tracing-protocol=grpc", "--tracing-resource-attributes=a=b"},
			check: func(t *testing.T, c *TracingConfig) {
				if !c.on() || *c.SamplingRatio != 0 || c.Protocol != "grpc" || c.ResourceAttributes["a"] != "b" {
					t.Errorf("got %+v", c)
				}
			}},
		{name: "bad protocol", flags: []string{"--tracing-protocol=zipkin"}, wantErr: "tracing.protocol (--tracing-protocol)"},
		{name: "bad ratio", flags: []string{"--tracing-sampling-ratio=1.5"}, wantErr: "tracing.samplingRatio (--tracing-sampling-ratio)"},
		{name: "bad endpoint", flags: []string{"--tracing-endpoint=127.0.0.1:4317"}, wantErr: "tracing.endpoint (--tracing-endpoint)"},
		{name: "envoy needs grpc", file: "tracing: {enabled: true, envoy: true, endpoint: 'http://c:4317', protocol: http}",
			wantErr: "tracing.envoy: needs tracing.protocol grpc"},
		{name: "envoy needs an endpoint", file: "tracing: {enabled: true, envoy: true, protocol: grpc}",
			wantErr: "tracing.envoy: needs tracing.endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			bindFlags(fs, flagSet{portal: true, listen: true, extproc: true, xds: true, envoyListen: true})
			args := tc.flags
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "c.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config="+path)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadConfig(fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg.Tracing)
		})
	}
}

// TestTracingSDKDisabled: OTEL_SDK_DISABLED=true turns configured tracing
// off.
func TestTracingSDKDisabled(t *testing.T) {
	c := &TracingConfig{Enabled: true}
	if !c.on() {
		t.Fatal("enabled tracing is off")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if c.on() {
		t.Error("OTEL_SDK_DISABLED=true left tracing on")
	}
}

// TestEnvoyTracingNotForRun: Envoy's tracer is programmed for `xds`, never
// for the local data plane of `run`, which does not trace.
func TestEnvoyTracingNotForRun(t *testing.T) {
	ratio := 0.5
	cfg := Config{Tracing: &TracingConfig{Enabled: true, Envoy: true, Protocol: "grpc",
		Endpoint: "http://collector.obs:4317", SamplingRatio: &ratio}}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	if et := (&app{mode: modeRun, cfg: cfg, tracer: tp}).envoyTracing(); et != nil {
		t.Errorf("run programs Envoy tracing: %+v", et)
	}
	et := (&app{mode: modeXDS, cfg: cfg, tracer: tp}).envoyTracing()
	if et == nil || et.Collector != "collector.obs:4317" || et.SamplingPercent != 50 {
		t.Errorf("xds Envoy tracing %+v, want collector.obs:4317 at 50%%", et)
	}
	if et := (&app{mode: modeXDS, cfg: cfg}).envoyTracing(); et != nil {
		t.Errorf("Envoy tracing programmed with toolmesh's tracing off: %+v", et)
	}
}

// TestTracingResourcePrecedence: the config's resource attributes win over
// the OTEL_* variables, which win over toolmesh's defaults.
func TestTracingResourcePrecedence(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=from-env,team=env-team")
	t.Setenv("OTEL_SERVICE_NAME", "gateway-from-env")
	res, err := newResource(t.Context(), &TracingConfig{ResourceAttributes: map[string]string{"deployment.environment": "from-config"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range res.Attributes() {
		got[string(kv.Key)] = kv.Value.AsString()
	}
	want := map[string]string{"deployment.environment": "from-config", "team": "env-team",
		"service.name": "gateway-from-env", "service.version": version, "telemetry.sdk.name": "opentelemetry"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], w, got)
		}
	}
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	res, err = newResource(t.Context(), &TracingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range res.Attributes() {
		if kv.Key == "service.name" && kv.Value.AsString() != "toolmesh" {
			t.Errorf("default service.name %q, want toolmesh", kv.Value.AsString())
		}
	}
}

// TestTracingHTTPExporter: protocol http posts OTLP/protobuf to the
// endpoint's /v1/traces.
func TestTracingHTTPExporter(t *testing.T) {
	var got atomic.Pointer[string]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := r.Method + " " + r.URL.Path + " " + r.Header.Get("content-type")
		got.Store(&s)
		w.Header().Set("content-type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	tp, err := newTracerProvider(t.Context(), &TracingConfig{Enabled: true, Protocol: "http", Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "probe")
	span.End()
	if err := tp.Shutdown(t.Context()); err != nil { // flushes
		t.Fatal(err)
	}
	seen := "nothing"
	if p := got.Load(); p != nil {
		seen = *p
	}
	if seen != "POST /v1/traces application/x-protobuf" {
		t.Errorf("collector saw %s, want POST /v1/traces application/x-protobuf", seen)
	}
}
