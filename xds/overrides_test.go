package xds_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

func TestParseOverridesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"misspelled field", "services:\n  weather:\n    requestTimout: 1s\n",
			`services.weather: unknown field "requestTimout"`},
		{"misspelled nested field", "services:\n  weather:\n    outlierDetection: {intervall: 5s}\n",
			`services.weather.outlierDetection: unknown field "intervall"`},
		{"misspelled top-level key", "service: {}\n", `unknown field "service"`},
		{"negative count", "services:\n  weather:\n    maxConnections: -1\n",
			"services.weather.maxConnections: got number -1, want a whole number from 0 to 4294967295"},
		{"duration without unit", "defaults:\n  healthCheck: {interval: 5}\n",
			`defaults.healthCheck.interval: duration must be a string such as "1s": 5`},
		{"duration in words", "services:\n  weather:\n    connectTimeout: 10 seconds\n",
			`services.weather.connectTimeout: invalid duration "10 seconds": time: unknown unit " seconds" in duration "10 seconds"`},
		{"retryOn as a string", "services:\n  weather:\n    retryOn: connect-failure\n",
			"services.weather.retryOn: got string, want a list of strings"},
		{"service as a list", "services:\n  weather: [1]\n", "services.weather: got array, want a mapping"},
		{"duplicate key", "services:\n  weather:\n    maxRetries: 1\n    maxRetries: 2\n",
			"decode yaml: yaml: unmarshal errors:\n  line 4: key \"maxRetries\" already set in map"},
		{"unknown retry condition", "services:\n  weather:\n    retryOn: [5xx, reset-before-requests]\n",
			`services.weather.retryOn[1]: "reset-before-requests" is not a retry condition toolmesh can use (5xx, gateway-error, reset, reset-before-request, connect-failure, envoy-ratelimited, retriable-4xx, refused-stream, http3-post-connect-failure)`},
		{"retry condition twice", "services:\n  weather:\n    retryOn: [reset, reset]\n",
			`services.weather.retryOn[1]: "reset" is listed twice`},
		{"no retry condition", "services:\n  weather:\n    retryOn: []\n",
			"services.weather.retryOn: must name at least one condition (maxRetries: 0 disables retries)"},
		{"zero connect timeout", "defaults:\n  connectTimeout: 0s\n", "defaults.connectTimeout: 0s must be positive"},
		{"zero per-try timeout", "services:\n  weather:\n    perTryTimeout: 0s\n", "services.weather.perTryTimeout: 0s must be positive"},
		{"zero circuit breaker", "services:\n  weather:\n    maxPendingRequests: 0\n", "services.weather.maxPendingRequests: must be at least 1"},
		{"panic threshold over 100", "services:\n  weather:\n    healthyPanicThreshold: 101\n",
			"services.weather.healthyPanicThreshold: 101 is not a percentage in 0..100"},
		{"negative panic threshold", "defaults:\n  healthyPanicThreshold: -1\n",
			"defaults.healthyPanicThreshold: -1 is not a percentage in 0..100"},
		{"zero body limit", "services:\n  weather:\n    maxRequestBytes: 0\n", "services.weather.maxRequestBytes: must be at least 1"},
		{"ejection percent over 100", "services:\n  weather:\n    outlierDetection: {maxEjectionPercent: 101}\n",
			"services.weather.outlierDetection.maxEjectionPercent: 101 is not in 1..100"},
		{"zero threshold", "services:\n  weather:\n    healthCheck: {unhealthyThreshold: 0}\n",
			"services.weather.healthCheck.unhealthyThreshold: must be at least 1"},
		{"relative health path", "services:\n  weather:\n    healthCheck: {path: ready}\n",
			`services.weather.healthCheck.path: "ready" must start with /`},
		{"unknown lb policy", "services:\n  weather:\n    lbPolicy: FASTEST\n",
			`services.weather.lbPolicy: "FASTEST" is not one of ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV`},
		{"sni in defaults", "defaults:\n  sni: tools.example\n",
			"defaults.sni: names one server, so it is set per service, not in defaults"},
		{"sni an IP", "services:\n  weather:\n    sni: 10.0.0.1\n",
			`services.weather.sni: "10.0.0.1" is an IP address; SNI must be a DNS name (RFC 6066 §3)`},
		{"relative CA file", "services:\n  weather:\n    caFile: ca.pem\n",
			`services.weather.caFile: "ca.pem" must be an absolute path on Envoy's file system`},
		{"service name not a Portal name", "services:\n  Weather: {}\n",
			"services.Weather: tool service name must match [a-z0-9][a-z0-9-]{0,62}"},
		{"negative duration", "defaults:\n  maxRequests: 0\nservices:\n  weather:\n    idleTimeout: -1s\n",
			"services.weather.idleTimeout: invalid duration \"-1s\": negative"},
		{"validation problems joined", "defaults:\n  maxRequests: 0\nservices:\n  a: {maxConnections: 0}\n  b: {lbPolicy: x}\n",
			"defaults.maxRequests: must be at least 1\nservices.a.maxConnections: must be at least 1\nservices.b.lbPolicy: \"x\" is not one of ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := xds.ParseOverrides([]byte(tc.in))
			if err == nil {
				t.Fatalf("ParseOverrides accepted it: %+v", o)
			}
			if err.Error() != tc.want {
				t.Fatalf("error:\n got: %s\nwant: %s", err, tc.want)
			}
			if o != nil {
				t.Error("ParseOverrides returned overrides along with its error")
			}
		})
	}
}

func TestParseOverrides(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		check    func(t *testing.T, o *xds.Overrides)
	}{
		{"empty file", "", func(t *testing.T, o *xds.Overrides) {
			if o.Version() != "" || o.Defaults != nil || len(o.Services) != 0 {
				t.Errorf("an empty file is not empty overrides: %+v", o)
			}
		}},
		{"an empty mapping", "{}\n", func(t *testing.T, o *xds.Overrides) {
			if o.Version() != "" {
				t.Errorf("version %q, want none", o.Version())
			}
		}},
		{"comments only", "# nothing yet\n", func(t *testing.T, o *xds.Overrides) {
			if o.Version() != "" {
				t.Errorf("version %q, want none", o.Version())
			}
		}},
		{"explicit zero differs from unset", "services:\n  weather:\n    maxRetries: 0\n    http2: false\n", func(t *testing.T, o *xds.Overrides) {
			w := o.Services["weather"]
			if w.MaxRetries == nil || *w.MaxRetries != 0 || w.HTTP2 == nil || *w.HTTP2 || w.MaxConnections != nil {
				t.Errorf("weather = %+v", w)
			}
		}},
		{"null service entry", "services:\n  weather:\n", func(t *testing.T, o *xds.Overrides) {
			if _, ok := o.Services["weather"]; !ok || o.Version() == "" {
				t.Errorf("services = %+v, version %q", o.Services, o.Version())
			}
		}},
		{"JSON works too", `{"defaults":{"connectTimeout":"2s"}}`, func(t *testing.T, o *xds.Overrides) {
			if o.Defaults == nil || o.Defaults.ConnectTimeout == nil || o.Defaults.ConnectTimeout.D() != 2*time.Second {
				t.Errorf("defaults = %+v", o.Defaults)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := xds.ParseOverrides([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// TestOverridesVersion checks that the version is a function of content,
// not of formatting, and changes with any value.
func TestOverridesVersion(t *testing.T) {
	parse := func(s string) *xds.Overrides {
		t.Helper()
		o, err := xds.ParseOverrides([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a := parse("services:\n  weather: {maxRetries: 1, connectTimeout: 2s}\n  maps: {http2: true}\n")
	b := parse("# reordered\nservices:\n  maps:\n    http2: true\n  weather:\n    connectTimeout: 2000ms\n    maxRetries: 1\n")
	c := parse("services:\n  weather: {maxRetries: 2, connectTimeout: 2s}\n  maps: {http2: true}\n")
	if a.Version() != b.Version() {
		t.Errorf("same overrides, different versions: %s, %s", a.Version(), b.Version())
	}
	if a.Version() == c.Version() {
		t.Error("different overrides, same version")
	}
	if (*xds.Overrides)(nil).Version() != "" {
		t.Error("nil overrides have a version")
	}
}

func TestLoadOverrides(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("services:\n  weather: {maxRetries: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("services:\n  weather: {maxRetries: many}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := xds.LoadOverrides(good); err != nil || *o.Services["weather"].MaxRetries != 1 {
		t.Fatalf("LoadOverrides(good) = %+v, %v", o, err)
	}
	_, err := xds.LoadOverrides(bad)
	if want := "overrides " + bad + ": services.weather.maxRetries: got string, want a whole number from 0 to 4294967295"; err == nil || err.Error() != want {
		t.Errorf("LoadOverrides(bad) = %v, want %s", err, want)
	}
	if _, err := xds.LoadOverrides(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "read overrides") {
		t.Errorf("LoadOverrides(missing) = %v", err)
	}
}

// TestTranslateOverrideErrors covers problems only the merged settings
// show, and invalid overrides handed to Translate directly: the error names
// the route, the Tool Service, the field and the layer that set it.
func TestTranslateOverrideErrors(t *testing.T) {
	routes := []registry.Route{{Key: "core", ToolServices: []registry.ToolService{{
		Name: "weather", URL: "http://10.0.0.1:8080",
		Cluster: &registry.ClusterSettings{RequestTimeout: config.Duration(10 * time.Second)},
	}}}}
	d := func(s string) *config.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		r := config.Duration(v)
		return &r
	}
	u := func(n uint32) *uint32 { return &n }
	for _, tc := range []struct {
		name string
		o    *xds.Overrides
		want string
	}{
		{
			name: "per-try timeout over the Portal's request timeout",
			o:    &xds.Overrides{Services: map[string]xds.Tuning{"weather": {PerTryTimeout: d("20s")}}},
			want: `route "core": tool service "weather": perTryTimeout: 20s (from overrides services.weather) is longer than requestTimeout 10s (from the Portal cluster object), so no retry could ever start`,
		},
		{
			name: "per-try timeout in defaults over a service's request timeout",
			o: &xds.Overrides{
				Defaults: &xds.Tuning{PerTryTimeout: d("5s")},
				Services: map[string]xds.Tuning{"weather": {RequestTimeout: d("3s")}},
			},
			want: `route "core": tool service "weather": perTryTimeout: 5s (from overrides defaults) is longer than requestTimeout 3s (from overrides services.weather), so no retry could ever start`,
		},
		{
			name: "hand-built invalid overrides",
			o:    &xds.Overrides{Services: map[string]xds.Tuning{"weather": {MaxConnections: u(0)}, "maps": {MaxRequests: u(0)}}},
			want: "overrides: services.maps.maxRequests: must be at least 1\noverrides: services.weather.maxConnections: must be at least 1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := xds.Translate(routes, xds.Options{Overrides: tc.o})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Translate error:\n got: %v\nwant: %s", err, tc.want)
			}
			if res != nil {
				t.Error("Translate produced resources along with its error")
			}
		})
	}
	// No route timeout: any per-try timeout is fine.
	zero := &xds.Overrides{Services: map[string]xds.Tuning{"weather": {RequestTimeout: d("0s"), PerTryTimeout: d("1m")}}}
	if _, err := xds.Translate(routes, xds.Options{Overrides: zero}); err != nil {
		t.Errorf("requestTimeout 0 with a per-try timeout: %v", err)
	}
}

// effective is what the generated cluster and route say about one Tool
// Service, as the merge tests compare it.
type effective struct {
	connectTimeout, requestTimeout, idleTimeout, perTryTimeout, connIdle string
	maxConnections, maxPending, maxRequests, maxRetriesCB                uint32
	numRetries                                                           int64 // -1: no retry policy
	retryOn, lbPolicy                                                    string
	http2                                                                bool
	outlier                                                              string // "off" or "consecutive/interval/base/percent"
	health                                                               string // "off" or "path interval timeout healthy/unhealthy"
	sni, san, caFile                                                     string
	panic                                                                float64 // common_lb_config.healthy_panic_threshold; -1: unset
}

func observe(t *testing.T, res *xds.Resources, service string) effective {
	t.Helper()
	name := wire.ClusterName(service)
	var c *clusterv3.Cluster
	for _, r := range res.Clusters {
		if cachev3.GetResourceName(r) == name {
			c = r.(*clusterv3.Cluster)
		}
	}
	var rt *routev3.Route
	for _, r := range res.Routes[0].(*routev3.RouteConfiguration).GetVirtualHosts()[0].GetRoutes() {
		if r.GetName() == name {
			rt = r
		}
	}
	if c == nil || rt == nil {
		t.Fatalf("no cluster or route %s", name)
	}
	cb := c.GetCircuitBreakers().GetThresholds()[0]
	var hpo upstreamhttpv3.HttpProtocolOptions
	if err := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&hpo); err != nil {
		t.Fatal(err)
	}
	e := effective{
		connectTimeout: c.GetConnectTimeout().AsDuration().String(),
		requestTimeout: rt.GetRoute().GetTimeout().AsDuration().String(),
		connIdle:       hpo.GetCommonHttpProtocolOptions().GetIdleTimeout().AsDuration().String(),
		maxConnections: cb.GetMaxConnections().GetValue(),
		maxPending:     cb.GetMaxPendingRequests().GetValue(),
		maxRequests:    cb.GetMaxRequests().GetValue(),
		maxRetriesCB:   cb.GetMaxRetries().GetValue(),
		numRetries:     -1,
		lbPolicy:       c.GetLbPolicy().String(),
		http2:          hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil,
		outlier:        "off",
		health:         "off",
		panic:          -1,
	}
	if p := c.GetCommonLbConfig().GetHealthyPanicThreshold(); p != nil {
		e.panic = p.GetValue()
	}
	if it := rt.GetRoute().GetIdleTimeout(); it != nil {
		e.idleTimeout = it.AsDuration().String()
	}
	if rp := rt.GetRoute().GetRetryPolicy(); rp != nil {
		e.numRetries = int64(rp.GetNumRetries().GetValue())
		e.retryOn = rp.GetRetryOn()
		if pt := rp.GetPerTryTimeout(); pt != nil {
			e.perTryTimeout = pt.AsDuration().String()
		}
	}
	if od := c.GetOutlierDetection(); od != nil {
		e.outlier = strings.Join([]string{
			itoa(od.GetConsecutive_5Xx().GetValue()), od.GetInterval().AsDuration().String(),
			od.GetBaseEjectionTime().AsDuration().String(), itoa(od.GetMaxEjectionPercent().GetValue()),
		}, "/")
	}
	if hcs := c.GetHealthChecks(); len(hcs) > 0 {
		hc := hcs[0]
		e.health = strings.Join([]string{
			hc.GetHttpHealthCheck().GetPath(), hc.GetInterval().AsDuration().String(), hc.GetTimeout().AsDuration().String(),
			itoa(hc.GetHealthyThreshold().GetValue()) + "/" + itoa(hc.GetUnhealthyThreshold().GetValue()),
		}, " ")
	}
	if ts := c.GetTransportSocket(); ts != nil {
		var tc tlsv3.UpstreamTlsContext
		if err := ts.GetTypedConfig().UnmarshalTo(&tc); err != nil {
			t.Fatal(err)
		}
		vc := tc.GetCommonTlsContext().GetValidationContext()
		e.sni = tc.GetSni()
		e.san = vc.GetMatchTypedSubjectAltNames()[0].GetSanType().String() + ":" + vc.GetMatchTypedSubjectAltNames()[0].GetMatcher().GetExact()
		e.caFile = vc.GetTrustedCa().GetFilename()
	}
	return e
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// TestTuningMerge checks the merge order built-in defaults < Portal <
// overrides.defaults < overrides.services[name], field by field, on what
// Envoy is actually sent.
func TestTuningMerge(t *testing.T) {
	base := effective{
		connectTimeout: "1s", requestTimeout: "15s", connIdle: "30s",
		maxConnections: 1024, maxPending: 1024, maxRequests: 1024, maxRetriesCB: 3,
		numRetries: 3, retryOn: "connect-failure,refused-stream,reset-before-request",
		lbPolicy: "ROUND_ROBIN", outlier: "off", health: "off", panic: 0,
	}
	with := func(change func(*effective)) effective {
		e := base
		change(&e)
		return e
	}
	parse := func(s string) *xds.Overrides {
		o, err := xds.ParseOverrides([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	tlsBase := func(e *effective) {
		e.sni, e.san, e.caFile = "tools.example", "DNS:tools.example", xds.DefaultUpstreamCAFile
	}
	for _, tc := range []struct {
		name   string
		url    string
		portal *registry.ClusterSettings
		over   string
		want   effective
	}{
		{name: "built-in defaults", want: base},
		{
			name:   "portal over defaults",
			portal: &registry.ClusterSettings{ConnectTimeout: config.Duration(3 * time.Second), MaxRetries: 1, HTTP2: true, LBPolicy: "RANDOM"},
			want: with(func(e *effective) {
				e.connectTimeout, e.numRetries, e.maxRetriesCB, e.http2, e.lbPolicy = "3s", 1, 1, true, "RANDOM"
			}),
		},
		{
			name:   "override defaults over portal, service over override defaults",
			portal: &registry.ClusterSettings{ConnectTimeout: config.Duration(3 * time.Second), RequestTimeout: config.Duration(time.Minute)},
			over:   "defaults: {connectTimeout: 4s, maxConnections: 10}\nservices:\n  weather: {connectTimeout: 5s}\n",
			want: with(func(e *effective) {
				e.connectTimeout, e.requestTimeout, e.maxConnections = "5s", "1m0s", 10
			}),
		},
		{
			name:   "explicit zero and false win",
			portal: &registry.ClusterSettings{MaxRetries: 2, HTTP2: true},
			over:   "services:\n  weather: {maxRetries: 0, http2: false, requestTimeout: 0s, idleTimeout: 0s}\n",
			want: with(func(e *effective) {
				e.numRetries, e.maxRetriesCB, e.retryOn, e.requestTimeout, e.idleTimeout = -1, 0, "", "0s", "0s"
			}),
		},
		{
			name: "retry knobs",
			over: "services:\n  weather: {maxRetries: 2, maxConcurrentRetries: 50, perTryTimeout: 4s, retryOn: [5xx, connect-failure], idleTimeout: 1m, connectionIdleTimeout: 90s}\n",
			want: with(func(e *effective) {
				e.numRetries, e.maxRetriesCB, e.perTryTimeout, e.retryOn, e.idleTimeout, e.connIdle = 2, 50, "4s", "5xx,connect-failure", "1m0s", "1m30s"
			})},
		{
			name: "per-try timeout alone keeps a retry policy without retries",
			over: "services:\n  weather: {maxRetries: 0, perTryTimeout: 2s}\n",
			want: with(func(e *effective) { e.numRetries, e.maxRetriesCB, e.perTryTimeout = 0, 0, "2s" }),
		},
		{
			name:   "outlier detection: portal on, override fields merge",
			portal: &registry.ClusterSettings{OutlierDetection: &registry.OutlierDetection{Consecutive5xx: 9}},
			over:   "services:\n  weather: {outlierDetection: {interval: 1s}}\n",
			want:   with(func(e *effective) { e.outlier = "9/1s/30s/10" }),
		},
		{
			name:   "outlier detection: defaults turn it on, the service turns it off",
			portal: &registry.ClusterSettings{OutlierDetection: &registry.OutlierDetection{}},
			over:   "defaults: {outlierDetection: {maxEjectionPercent: 50}}\nservices:\n  weather: {outlierDetection: {enabled: false}}\n",
			want:   base,
		},
		{
			name: "health check: on from an empty override object",
			over: "defaults: {healthCheck: {}}\n",
			want: with(func(e *effective) { e.health = "/healthz 5s 1s 1/3" }),
		},
		{
			name:   "health check: portal fields kept, override fields win, off and on again",
			portal: &registry.ClusterSettings{HealthCheck: &registry.HealthCheck{Path: "/live", Timeout: config.Duration(2 * time.Second)}},
			over:   "defaults: {healthCheck: {enabled: false}}\nservices:\n  weather: {healthCheck: {enabled: true, unhealthyThreshold: 5}}\n",
			want:   with(func(e *effective) { e.health = "/healthz 5s 1s 1/5" }),
		},
		{
			name:   "health check: portal fields kept under an override",
			portal: &registry.ClusterSettings{HealthCheck: &registry.HealthCheck{Path: "/live", Timeout: config.Duration(2 * time.Second)}},
			over:   "services:\n  weather: {healthCheck: {interval: 9s}}\n",
			want:   with(func(e *effective) { e.health = "/live 9s 2s 1/3" }),
		},
		{
			name: "healthy panic threshold: defaults, then the service",
			over: "defaults: {healthyPanicThreshold: 50}\nservices:\n  weather: {healthyPanicThreshold: 12.5}\n",
			want: with(func(e *effective) { e.panic = 12.5 }),
		},
		{
			name: "tls defaults",
			url:  "https://tools.example",
			want: with(tlsBase),
		},
		{
			name: "tls: CA file from defaults, SNI and SAN per service",
			url:  "https://tools.example",
			over: "defaults: {caFile: /etc/ca/all.pem}\nservices:\n  weather: {sni: weather.internal}\n",
			want: with(func(e *effective) {
				e.sni, e.san, e.caFile = "weather.internal", "DNS:weather.internal", "/etc/ca/all.pem"
			}),
		},
		{
			name: "tls on an IP: no SNI unless set",
			url:  "https://192.0.2.1",
			want: with(func(e *effective) { e.san, e.caFile = "IP_ADDRESS:192.0.2.1", xds.DefaultUpstreamCAFile }),
		},
		{
			name: "tls settings of an http service are ignored",
			over: "defaults: {caFile: /etc/ca/all.pem}\nservices:\n  weather: {sni: weather.internal}\n",
			want: base,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url
			if url == "" {
				url = "http://10.0.0.1:8080"
			}
			routes := []registry.Route{{Key: "core", ToolServices: []registry.ToolService{{Name: "weather", URL: url, Cluster: tc.portal}}}}
			var o *xds.Overrides
			if tc.over != "" {
				o = parse(tc.over)
			}
			res, err := xds.Translate(routes, xds.Options{Overrides: o})
			if err != nil {
				t.Fatal(err)
			}
			requireValid(t, res)
			if got := observe(t, res, "weather"); got != tc.want {
				t.Errorf("effective settings\n got: %+v\nwant: %+v", got, tc.want)
			}
		})
	}
}

// TestOverrideBodyLimit checks that a Tool Service's maxRequestBytes
// lowers the body limit of the public path of every route that lists it, a
// route taking the largest limit of its services, and that a limit over
// the deployment-wide one is an error.
func TestOverrideBodyLimit(t *testing.T) {
	svc := func(name string) registry.ToolService {
		return registry.ToolService{Name: name, URL: "http://" + name + ".svc:8080"}
	}
	routes := []registry.Route{
		{Key: "big", ToolServices: []registry.ToolService{svc("upload"), svc("small")}},
		{Key: "plain", ToolServices: []registry.ToolService{svc("small")}},
		{Key: "tiny", ToolServices: []registry.ToolService{svc("tiny"), svc("small")}},
	}
	o, err := xds.ParseOverrides([]byte("services:\n  small: {maxRequestBytes: 65536}\n  tiny: {maxRequestBytes: 1024}\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := xds.Translate(routes, xds.Options{Overrides: o, MaxRequestBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	vh := res.Routes[0].(*routev3.RouteConfiguration).GetVirtualHosts()[0]
	if got := vh.GetRequestBodyBufferLimit().GetValue(); got != 8<<20 {
		t.Errorf("virtual host limit %d, want Options.MaxRequestBytes", got)
	}
	got := map[string]uint64{}
	for _, r := range vh.GetRoutes() {
		if l := r.GetRequestBodyBufferLimit(); l != nil {
			got[r.GetName()] = l.GetValue()
		}
	}
	want := map[string]uint64{"unrouted /mcp/plain": 65536, "unrouted /mcp/tiny": 65536}
	if len(got) != len(want) || got["unrouted /mcp/plain"] != 65536 || got["unrouted /mcp/tiny"] != 65536 {
		t.Errorf("route body limits = %v, want %v", got, want)
	}

	_, err = xds.Translate(routes, xds.Options{Overrides: o, MaxRequestBytes: 32768})
	wantErr := `route "big": tool service "small": maxRequestBytes: 65536 (from overrides services.small) is over the deployment-wide limit 32768 (Options.MaxRequestBytes), which the extproc server enforces as well; raise that instead`
	if err == nil || err.Error() != wantErr {
		t.Errorf("Translate error:\n got: %v\nwant: %s", err, wantErr)
	}
}
