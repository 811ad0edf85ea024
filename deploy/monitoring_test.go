package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The monitoring files: the rule file and the dashboard live in the chart
// (its templates read them with .Files.Get), the rule unit tests beside
// the deploy tests.
const (
	rulesFile     = chartDir + "/files/prometheus-rules.yaml"
	dashboardFile = chartDir + "/files/grafana-dashboard.json"
	rulesTestFile = "monitoring/prometheus-rules.test.yaml"
)

// promtool finds promtool, which `make test-deps` installs (Debian package
// prometheus). A missing promtool fails the test: the rules would
// otherwise go unchecked.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not on PATH: run `make test-deps` (it installs Debian's prometheus package, which ships promtool) or put promtool on PATH")
	}
	return p
}

// runPromtool runs promtool with args in the deploy module, bounded in time.
func runPromtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtool(t), args...).CombinedOutput()
	return string(out), err
}

// TestPrometheusRules checks the rule file with `promtool check rules` and
// runs its unit tests (every alert fires on bad input and stays silent on
// healthy input) with `promtool test rules`.
func TestPrometheusRules(t *testing.T) {
	if out, err := runPromtool(t, "check", "rules", rulesFile); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	if out, err := runPromtool(t, "test", "rules", rulesTestFile); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", rulesTestFile, err, out)
	}
}

// TestPrometheusRulesTestsCanFail runs the unit tests against rule files
// broken on purpose: each must make `promtool test rules` fail, so the
// tests above are known to look at what they claim to.
func TestPrometheusRulesTestsCanFail(t *testing.T) {
	rules := string(readRepoFile(t, "deploy/"+rulesFile))
	tests := string(readRepoFile(t, "deploy/"+rulesTestFile))
	for _, tc := range []struct {
		name, from, to string
		all            bool // replace every occurrence
	}{
		{"route without snapshot never fires", "expr: toolmesh_registry_routes_without_snapshot > 0", "expr: toolmesh_registry_routes_without_snapshot > 5", false},
		{"Portal failing ignores successes", "unless on (namespace, job, instance)", "or on (namespace, job, instance)", false},
		{"NACK alert reads the wrong series", "increase(toolmesh_xds_nacks_total[10m])", "increase(toolmesh_xds_responses_total[10m])", false},
		{"error ratio counts every outcome", `toolmesh_tool_calls_total{outcome=~"upstream_4xx|upstream_5xx|upstream_error|timeout|unavailable|no_response|too_large"}[1h]`, `toolmesh_tool_calls_total[1h]`, false},
		{"error budget ten times larger", "* 0.005)", "* 0.05)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(rules, tc.from) {
				t.Fatalf("%s does not contain %q", rulesFile, tc.from)
			}
			dir := t.TempDir()
			n := 1
			if tc.all {
				n = -1
			}
			broken := strings.Replace(rules, tc.from, tc.to, n)
			if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(broken), 0o644); err != nil {
				t.Fatal(err)
			}
			test := strings.Replace(tests, "../helm/toolmesh/files/prometheus-rules.yaml", "rules.yaml", 1)
			if err := os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(test), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := runPromtool(t, "test", "rules", filepath.Join(dir, "test.yaml"))
			if err == nil {
				t.Errorf("promtool test rules passed on a broken rule file:\n%s", out)
			}
			if !strings.Contains(out, "FAILED") {
				t.Errorf("promtool did not report a failed test:\n%s", out)
			}
		})
	}
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Record      string            `json:"record"`
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	if err := yaml.UnmarshalStrict(readRepoFile(t, "deploy/"+rulesFile), &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return rf
}

// TestAlertRunbooks checks every alert's labels and annotations: a known
// severity, a summary and a description, and a runbook_url that is a
// section of docs/operators.md.
func TestAlertRunbooks(t *testing.T) {
	anchors := markdownAnchors(readRepoFile(t, "docs/operators.md"))
	alerts := 0
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			where := "alert " + r.Alert
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", where, a)
				}
			}
			page, anchor, ok := strings.Cut(r.Annotations["runbook_url"], "#")
			if page != "docs/operators.md" || !ok {
				t.Errorf("%s: runbook_url %q is not docs/operators.md#section", where, r.Annotations["runbook_url"])
				continue
			}
			if !anchors[anchor] {
				t.Errorf("%s: docs/operators.md has no section #%s", where, anchor)
			}
		}
	}
	if alerts < 8 {
		t.Fatalf("only %d alerts in %s", alerts, rulesFile)
	}
}

// markdownAnchors are the anchors GitHub gives the headings of a Markdown
// document: lower case, punctuation other than - and _ dropped, spaces as -.
func markdownAnchors(doc []byte) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		h = drop.ReplaceAllString(strings.ToLower(h), "")
		out[strings.ReplaceAll(h, " ", "-")] = true
	}
	return out
}

// envoyMetric is an Envoy statistic the dashboard or the rules use, as
// Envoy names it and as its Prometheus endpoint (/stats/prometheus) does.
type envoyMetric struct {
	stat string // Envoy's name, <name> standing for the cluster name
	doc  string // where Envoy documents it (envoyproxy/envoy)
}

// Envoy's docs and sources the names follow:
//   - docs/root/configuration/upstream/cluster_manager/cluster_stats.rst:
//     the cluster.<name>.* statistics (general, outlier detection, dynamic
//     HTTP statistics upstream_rq_<*xx> and upstream_rq_time).
//   - docs/root/configuration/overview/mgmt_server.rst: control_plane.*.
//   - source/common/config/well_known_names.cc: the default tag extractors;
//     "cluster.(<cluster_name>.)" becomes the tag envoy.cluster_name and
//     "_rq_(<class>)xx" the tag envoy.response_code_class (name "_rq_xx").
//   - source/server/admin/prometheus_stats.cc: the Prometheus name is
//     "envoy_" plus the tag-extracted name with '.' as '_', tags become
//     labels with '.' as '_' (envoy_cluster_name), histograms add
//     _bucket, _sum and _count.
const clusterStatsDoc = "docs/root/configuration/upstream/cluster_manager/cluster_stats.rst"

var envoyMetrics = map[string]envoyMetric{
	"envoy_cluster_upstream_rq_total":                  {"cluster.<name>.upstream_rq_total", clusterStatsDoc},
	"envoy_cluster_upstream_rq_completed":              {"cluster.<name>.upstream_rq_completed", clusterStatsDoc + " (dynamic HTTP statistics)"},
	"envoy_cluster_upstream_rq_xx":                     {"cluster.<name>.upstream_rq_<class>xx", clusterStatsDoc + " (dynamic HTTP statistics)"},
	"envoy_cluster_upstream_rq_time_bucket":            {"cluster.<name>.upstream_rq_time", clusterStatsDoc + " (dynamic HTTP statistics, histogram in ms)"},
	"envoy_cluster_upstream_rq_timeout":                {"cluster.<name>.upstream_rq_timeout", clusterStatsDoc},
	"envoy_cluster_upstream_rq_retry":                  {"cluster.<name>.upstream_rq_retry", clusterStatsDoc},
	"envoy_cluster_upstream_rq_pending_overflow":       {"cluster.<name>.upstream_rq_pending_overflow", clusterStatsDoc},
	"envoy_cluster_upstream_cx_connect_fail":           {"cluster.<name>.upstream_cx_connect_fail", clusterStatsDoc},
	"envoy_cluster_membership_healthy":                 {"cluster.<name>.membership_healthy", clusterStatsDoc},
	"envoy_cluster_membership_total":                   {"cluster.<name>.membership_total", clusterStatsDoc},
	"envoy_cluster_outlier_detection_ejections_active": {"cluster.<name>.outlier_detection.ejections_active", clusterStatsDoc + " (outlier detection statistics)"},
	"envoy_control_plane_connected_state":              {"control_plane.connected_state", "docs/root/configuration/overview/mgmt_server.rst"},
}

// envoyPromName derives the Prometheus name of an Envoy statistic the way
// the files cited above do, for the statistics of envoyMetrics.
func envoyPromName(stat string) string {
	name := strings.Replace(stat, "cluster.<name>.", "cluster.", 1)
	name = strings.Replace(name, "_<class>xx", "_xx", 1)
	name = "envoy_" + strings.ReplaceAll(name, ".", "_")
	if strings.HasSuffix(stat, "upstream_rq_time") {
		name += "_bucket"
	}
	return name
}

func TestEnvoyMetricNames(t *testing.T) {
	for name, m := range envoyMetrics {
		if got := envoyPromName(m.stat); got != name {
			t.Errorf("Envoy statistic %s is %s in Prometheus, not %s", m.stat, got, name)
		}
	}
}

// lazyMetrics are toolmesh series that exist only after an event a healthy
// `toolmesh run` does not see; each must still be defined in the source.
var lazyMetrics = map[string]string{
	"toolmesh_xds_nacks_total": "xds/metrics.go", // first NACK, per resource type
	// Identity: only on routes with auth, policies or approval.
	"toolmesh_auth_requests_total":   "extproc/metrics/metrics.go",
	"toolmesh_authz_decisions_total": "extproc/metrics/metrics.go",
	"toolmesh_approvals_total":       "extproc/metrics/metrics.go",
	// Change notifications: only with notificationsListen set.
	"toolmesh_listeners":                "extproc/notify/metrics.go",
	"toolmesh_listeners_rejected_total": "extproc/notify/metrics.go",
	"toolmesh_notifications_sent_total": "extproc/notify/metrics.go",
}

// grafanaVars are the dashboard's variables, replaced by values PromQL can
// parse.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"$namespace", ".*", "$route", ".*", "$cluster", ".*",
)

// labelValues is a Grafana variable query: label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_]\w*\)$`)

// monitoringExprs returns every PromQL expression of the rule file and the
// dashboard (panel targets and variable queries), by where it is, and the
// names the recording rules define.
func monitoringExprs(t *testing.T) (exprs map[string]string, recorded map[string]bool) {
	t.Helper()
	exprs, recorded = map[string]string{}, map[string]bool{}
	for _, g := range loadRules(t).Groups {
		for i, r := range g.Rules {
			where := fmt.Sprintf("%s: group %s rule %d (%s%s)", rulesFile, g.Name, i, r.Record, r.Alert)
			exprs[where] = r.Expr
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(readRepoFile(t, "deploy/"+dashboardFile), &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
		}
		for i, tg := range p.Targets {
			exprs[fmt.Sprintf("%s: panel %q target %d", dashboardFile, p.Title, i)] = grafanaVars.Replace(tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", dashboardFile, v.Name, s)
			continue
		}
		exprs[fmt.Sprintf("%s: variable %s", dashboardFile, v.Name)] = grafanaVars.Replace(m[1])
	}
	return exprs, recorded
}

// metricNames parses expr and returns the metric names it selects.
func metricNames(expr string) ([]string, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

// TestMonitoringMetricsExist parses every PromQL expression of the
// dashboard and the rules and checks each metric name: toolmesh's against
// what a started `toolmesh run` exposes on /metrics after MCP requests
// (or, for a few series created by rare events, its source), Envoy's
// against the documented statistics of envoyMetrics.
func TestMonitoringMetricsExist(t *testing.T) {
	exprs, recorded := monitoringExprs(t)
	if len(exprs) < 40 {
		t.Fatalf("only %d expressions found", len(exprs))
	}
	exposed := scrapeToolmeshRun(t)
	for _, want := range []string{"toolmesh_tool_calls_total", "toolmesh_extproc_request_duration_seconds_bucket", "toolmesh_registry_routes_without_snapshot"} {
		if !exposed[want] {
			t.Fatalf("toolmesh run does not expose %s: the scrape went wrong", want)
		}
	}
	for name, file := range lazyMetrics {
		if exposed[name] {
			t.Errorf("%s is exposed by a healthy run now: drop it from lazyMetrics", name)
		}
		if !bytes.Contains(readRepoFile(t, file), []byte(`"`+name+`"`)) {
			t.Errorf("%s is not defined in %s", name, file)
		}
	}
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	used := map[string]bool{}
	for _, where := range keys {
		names, err := metricNames(exprs[where])
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, exprs[where])
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: selects no metric", where)
		}
		for _, n := range names {
			used[n] = true
			switch {
			case recorded[n]:
			case strings.HasPrefix(n, "toolmesh_"):
				if !exposed[n] && lazyMetrics[n] == "" {
					t.Errorf("%s: toolmesh does not expose %s", where, n)
				}
			case strings.HasPrefix(n, "envoy_"):
				if _, ok := envoyMetrics[n]; !ok {
					t.Errorf("%s: %s is not a documented Envoy statistic (envoyMetrics)", where, n)
				}
			default:
				t.Errorf("%s: %s is neither toolmesh's, Envoy's nor a recording rule's", where, n)
			}
		}
	}
	for n := range envoyMetrics {
		if !used[n] {
			t.Errorf("envoyMetrics lists %s, which nothing uses", n)
		}
	}
	for n := range recorded {
		if !used[n] {
			t.Errorf("recording rule %s is used by no alert", n)
		}
	}
}

// TestMetricNameCheckCatchesTypos runs the checks' parts on made-up
// expressions: a misspelt toolmesh metric is not exposed, an undocumented
// Envoy statistic is not listed, and unparsable PromQL is an error.
func TestMetricNameCheckCatchesTypos(t *testing.T) {
	if _, err := metricNames(`sum(rate(toolmesh_tool_calls_total[5m]`); err == nil {
		t.Error("unbalanced parentheses parsed")
	}
	names, err := metricNames(`sum by (route) (rate(toolmesh_tool_call_total[5m])) / on (route) group_left envoy_cluster_upstream_rq_totals`)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names) != "[toolmesh_tool_call_total envoy_cluster_upstream_rq_totals]" {
		t.Fatalf("names = %v", names)
	}
	if _, ok := envoyMetrics[names[1]]; ok {
		t.Error("a misspelt Envoy statistic is listed")
	}
}

// scrapeToolmeshRun builds toolmesh, starts `toolmesh run` (the demo Portal
// and Tool Services) on loopback ports, makes the MCP requests that create
// the request and tool-call series, and returns the metric names /metrics
// exposes (histograms and summaries with their _bucket, _sum and _count).
func scrapeToolmeshRun(t *testing.T) map[string]bool {
	t.Helper()
	bin := buildToolmesh(t)
	ports := loopbackPorts(t, 4)
	listen, extproc, xdsAddr, admin := ports[0], ports[1], ports[2], ports[3]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--listen", listen, "--extproc-listen", extproc,
		"--xds-listen", xdsAddr, "--admin-listen", admin, "--drain-delay", "0s")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("toolmesh output:\n%s", logs.String())
		}
	}()

	adminURL := "http://" + admin
	ready := false
	for !ready {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("toolmesh run exited: %v", err)
		case <-ctx.Done():
			t.Fatal("toolmesh run not ready in time")
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(adminURL + "/readyz"); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}

	mcp := "http://" + listen + "/mcp/core"
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"deploy-test","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"math.add","arguments":{"a":2,"b":3}}}`,
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, mcp, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", mcp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s %s: %s %s", mcp, body, resp.Status, b)
		}
	}

	// The request's series are recorded when its ext_proc stream ends,
	// which may be just after the client has its answer: scrape until
	// the tool call shows.
	for {
		names := scrapeNames(t, adminURL+"/metrics")
		if names["toolmesh_tool_calls_total"] {
			return names
		}
		select {
		case <-ctx.Done():
			return names
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrapeNames fetches a Prometheus text endpoint and returns the metric
// names it exposes (histograms and summaries with their _bucket, _sum and
// _count).
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		case "summary":
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// buildToolmesh builds cmd/toolmesh of the repository into a temporary
// directory and returns the binary's path.
func buildToolmesh(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "toolmesh")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/toolmesh")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/toolmesh: %v\n%s", err, out)
	}
	return bin
}

// loopbackPorts reserves n distinct loopback ports by listening on all of
// them at once, then closing them for toolmesh to bind.
func loopbackPorts(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs
}
