package xds_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// connectTimeoutOf returns the connect timeout of the cluster in a CDS
// response.
func connectTimeoutOf(t *testing.T, a *ads, cluster string) (time.Duration, string) {
	t.Helper()
	resp := a.recv()
	if resp.GetTypeUrl() != resourcev3.ClusterType {
		t.Fatalf("got a %s response, want CDS", resp.GetTypeUrl())
	}
	a.send(ack(resp))
	for _, c := range clusters(t, resp) {
		if c.GetName() == cluster {
			return c.GetConnectTimeout().AsDuration(), resp.GetVersionInfo()
		}
	}
	t.Fatalf("no cluster %s in CDS", cluster)
	return 0, ""
}

// TestServerWatchOverrides drives the override file through good, bad,
// conflicting, missing and good again contents while an Envoy node watches
// CDS: good files change the cluster and the version, anything else is
// rejected, counted and shown, and the last good overrides stay.
func TestServerWatchOverrides(t *testing.T) {
	s, cc, reg := startServer(t)
	path := filepath.Join(t.TempDir(), "overrides.yaml")
	// write replaces the file atomically, as docs/sre.md tells SREs to.
	write := func(content string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("services:\n  weather: {connectTimeout: 2s}\n")
	if _, err := s.Update(t.Context(), testRoutes("weather")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.WatchOverrides(ctx, path, 5*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	a := newADS(t, cc, "envoy-1")
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	// The first CDS may predate the file; read until it shows.
	var version string
	eventually(t, "the initial file to be applied", func() bool {
		return s.OverridesStatus().Version != ""
	})
	for {
		d, v := connectTimeoutOf(t, a, "toolsvc_weather")
		if d == 2*time.Second {
			version = v
			break
		}
	}
	if st := s.OverridesStatus(); st.Path != path || st.Services != 1 || st.LastError != "" || version != s.Version() {
		t.Fatalf("OverridesStatus = %+v, version %s / %s", st, version, s.Version())
	}

	for _, step := range []struct {
		name, content string
		wantErr       string        // "": applied
		wantTimeout   time.Duration // the connect timeout in force afterwards
	}{
		{"a changed value", "services:\n  weather: {connectTimeout: 3500ms}\n", "", 3500 * time.Millisecond},
		{"a typo", "services:\n  weather: {connectTimout: 4s}\n", `services.weather: unknown field "connectTimout"`, 3500 * time.Millisecond},
		{"a conflict with the Portal", "services:\n  weather: {connectTimeout: 5s, perTryTimeout: 1h}\n",
			`tool service "weather": perTryTimeout: 1h0m0s (from overrides services.weather) is longer than requestTimeout 15s`, 3500 * time.Millisecond},
		{"an empty file", "", "the file is empty (being rewritten?); write {} to clear every override", 3500 * time.Millisecond},
		{"a deleted file", "-", "stat overrides", 3500 * time.Millisecond},
		{"a good file again", "defaults: {connectTimeout: 6s}\n", "", 6 * time.Second},
	} {
		t.Run(step.name, func(t *testing.T) {
			before := s.Version()
			rejected := labeledValue(t, reg, "toolmesh_xds_override_reloads_total", "result", "rejected")
			if step.content == "-" {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else {
				write(step.content)
			}
			if step.wantErr != "" {
				eventually(t, "the file to be rejected", func() bool {
					return labeledValue(t, reg, "toolmesh_xds_override_reloads_total", "result", "rejected") == rejected+1
				})
				if st := s.OverridesStatus(); !strings.Contains(st.LastError, step.wantErr) {
					t.Errorf("LastError = %q, want it to contain %q", st.LastError, step.wantErr)
				}
				if s.Version() != before {
					t.Errorf("a rejected file changed the version %s → %s", before, s.Version())
				}
			} else {
				d, v := connectTimeoutOf(t, a, "toolsvc_weather")
				if d != step.wantTimeout || v == before {
					t.Errorf("CDS after the change: connect timeout %s version %s (was %s); want %s and a new version",
						d, v, before, step.wantTimeout)
				}
				// The push can reach the node just before the watcher's
				// SetOverrides returns and publishes the version.
				eventually(t, "the server to publish the pushed version", func() bool { return s.Version() == v })
				// The watcher clears the status and counts the reload just
				// after the push; wait for that too.
				eventually(t, "the status to clear after a good file", func() bool { return s.OverridesStatus().LastError == "" })
			}
			if got := observe(t, s.Current(), "weather").connectTimeout; got != step.wantTimeout.String() {
				t.Errorf("the cluster in force has connect timeout %s, want %s", got, step.wantTimeout)
			}
		})
	}
	eventually(t, "three applied reloads", func() bool {
		return labeledValue(t, reg, "toolmesh_xds_override_reloads_total", "result", "applied") == 3
	})
}

// TestServerSetOverrides covers SetOverrides around Update: before the first
// Update, invalid overrides, overrides the Portal conflicts with, and an
// Update that conflicts with the overrides in force.
func TestServerSetOverrides(t *testing.T) {
	s, _, reg := startServer(t)
	ctx := t.Context()
	parse := func(y string) *xds.Overrides {
		o, err := xds.ParseOverrides([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if pushed, err := s.SetOverrides(ctx, parse("services:\n  weather: {maxRetries: 1}\n")); err != nil || pushed || s.Version() != "" {
		t.Fatalf("SetOverrides before Update = %v, %v, version %q; want kept, nothing pushed", pushed, err, s.Version())
	}
	if _, err := s.Update(ctx, testRoutes("weather")); err != nil {
		t.Fatal(err)
	}
	if got := observe(t, s.Current(), "weather").numRetries; got != 1 {
		t.Fatalf("num_retries = %d, want the override's 1", got)
	}
	v1 := s.Version()

	for _, tc := range []struct {
		name    string
		o       *xds.Overrides
		wantErr string
	}{
		{"invalid", &xds.Overrides{Defaults: &xds.Tuning{MaxRequests: new(uint32)}},
			"overrides: defaults.maxRequests: must be at least 1"},
		{"conflicting with the Portal", parse("defaults: {perTryTimeout: 1m}\n"),
			`translate: route "core": tool service "weather": perTryTimeout: 1m0s (from overrides defaults) is longer than requestTimeout 15s (from the built-in default), so no retry could ever start`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pushed, err := s.SetOverrides(ctx, tc.o)
			if err == nil || err.Error() != tc.wantErr || pushed {
				t.Fatalf("SetOverrides = %v, %v; want error %s", pushed, err, tc.wantErr)
			}
			if s.Version() != v1 || observe(t, s.Current(), "weather").numRetries != 1 {
				t.Error("a rejected SetOverrides changed what is served")
			}
		})
	}

	// The overrides in force now reject a Portal change that conflicts.
	routes := testRoutes("weather")
	routes[0].ToolServices[0].Cluster = &registry.ClusterSettings{RequestTimeout: config.Duration(time.Second)}
	if _, err := s.SetOverrides(ctx, parse("services:\n  weather: {maxRetries: 1, perTryTimeout: 2s}\n")); err != nil {
		t.Fatal(err)
	}
	v2 := s.Version()
	buildErrors := metricValue(t, reg, "toolmesh_xds_build_errors_total")
	if _, err := s.Update(ctx, routes); err == nil || !strings.Contains(err.Error(), "perTryTimeout: 2s (from overrides services.weather) is longer than requestTimeout 1s (from the Portal cluster object)") {
		t.Fatalf("Update = %v, want the conflict", err)
	}
	if s.Version() != v2 || metricValue(t, reg, "toolmesh_xds_build_errors_total") != buildErrors+1 {
		t.Error("a failed Update changed the version or was not counted")
	}
	// Clearing the overrides lets nothing stale remain.
	if pushed, err := s.SetOverrides(ctx, nil); err != nil || !pushed || observe(t, s.Current(), "weather").numRetries != 3 {
		t.Fatalf("SetOverrides(nil) = %v, %v", pushed, err)
	}
	if st := s.OverridesStatus(); st.Version != "" || st.Services != 0 {
		t.Errorf("OverridesStatus after clearing = %+v", st)
	}
}

// TestServerDebounceBurst schedules a burst of Portal changes through a
// Debouncer in front of Update: a watching node sees exactly one push,
// carrying the last change.
func TestServerDebounceBurst(t *testing.T) {
	s, cc, reg := startServer(t)
	if _, err := s.Update(t.Context(), testRoutes("weather")); err != nil {
		t.Fatal(err)
	}
	a := newADS(t, cc, "envoy-1")
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	first := a.recv()
	a.send(ack(first))

	applied := make(chan error, 8)
	d := xds.NewDebouncer(300*time.Millisecond, 10*time.Second, func(ctx context.Context, routes []registry.Route) {
		_, err := s.Update(ctx, routes)
		applied <- err
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	const n = 20
	var last []registry.Route
	for i := range n {
		last = testRoutes("weather")
		last[0].ToolServices[0].Cluster = &registry.ClusterSettings{MaxConnections: uint32(100 + i)}
		d.Schedule(last)
	}
	want, err := xds.Translate(last, xds.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := a.recv()
	if resp.GetVersionInfo() != want.Version() {
		t.Fatalf("pushed version %s, want the last change's %s", resp.GetVersionInfo(), want.Version())
	}
	if got := clusters(t, resp)[0].GetCircuitBreakers().GetThresholds()[0].GetMaxConnections().GetValue(); got != 100+n-1 {
		t.Errorf("max_connections %d, want %d", got, 100+n-1)
	}
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "toolmesh_xds_pushes_total"); got != 2 {
		t.Errorf("pushes = %v, want 2 (the first Update and one for the burst)", got)
	}
	if len(applied) != 0 {
		t.Errorf("the burst was applied %d more times", len(applied))
	}
}

// TestWatchOverridesSettles checks, on synctest's fake clock, that a file
// caught mid-write is not applied: a change is read only once the file kept
// its size and time for one poll interval.
func TestWatchOverridesSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		reg := prometheus.NewRegistry()
		s := xds.NewServer(ctx, nil, xds.Options{}, reg)
		if _, err := s.Update(ctx, testRoutes("weather")); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "overrides.yaml")
		write := func(content string) {
			t.Helper()
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		full := "services:\n  weather: {connectTimeout: 3s}\n"
		want, err := xds.ParseOverrides([]byte(full))
		if err != nil {
			t.Fatal(err)
		}
		write("services:\n  weather: {connectTimeout: 2s}\n")
		done := make(chan struct{})
		go func() { s.WatchOverrides(ctx, path, time.Second); close(done) }()

		steps := []struct {
			at      time.Duration
			write   string // "" writes nothing
			connect string // connect timeout in force right after
		}{
			{0, "", "2s"}, // read at once on start
			{1500 * time.Millisecond, "services:\n", "2s"}, // a writer's first chunk (valid YAML on its own)
			{2500 * time.Millisecond, full, "2s"},          // seen changing at 2s, changed again at 3s
			{3500 * time.Millisecond, "", "2s"},            // stable since 3s
			{4500 * time.Millisecond, "", "3s"},            // settled at 4s: applied
		}
		start := time.Now()
		for _, st := range steps {
			time.Sleep(time.Until(start.Add(st.at)))
			if st.write != "" {
				write(st.write)
			}
			synctest.Wait()
			if got := observe(t, s.Current(), "weather").connectTimeout; got != st.connect {
				t.Fatalf("at %s: connect timeout %s, want %s", st.at, got, st.connect)
			}
		}
		if s.OverridesStatus().Version != want.Version() {
			t.Errorf("overrides in force %s, want %s", s.OverridesStatus().Version, want.Version())
		}
		if got := labeledValue(t, reg, "toolmesh_xds_override_reloads_total", "result", "applied"); got != 2 {
			t.Errorf("applied reloads = %v, want 2 (the partial file never was)", got)
		}
		cancel()
		<-done
	})
}
