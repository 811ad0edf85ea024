package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/toolmesh/toolmesh/deploy/render"
)

// prometheusRuleAPI is what a cluster with the Prometheus Operator's CRDs
// serves, as Helm's capabilities name it.
const prometheusRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"

// monitoring: a PrometheusRule carries the rule file (runbook URLs
// prefixed with prometheusRule.runbookBaseURL), a dashboard ConfigMap the
// dashboard file and the sidecar's labels.
func (c *chartCheck) monitoring() {
	t := c.t
	var want ruleFile
	if err := yaml.UnmarshalStrict(readRepoFileR(t, "deploy/"+rulesFile), &want); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	base := c.o.str("prometheusRule.runbookBaseURL")
	for name, pr := range c.o.prometheusRules {
		got := pr.Spec
		for gi := range got.Groups {
			for ri := range got.Groups[gi].Rules {
				r := &got.Groups[gi].Rules[ri]
				if u, ok := r.Annotations["runbook_url"]; ok {
					if !strings.HasPrefix(u, base+"docs/operators.md#") {
						t.Errorf("PrometheusRule %s: alert %s: runbook_url %q does not start with %q", name, r.Alert, u, base+"docs/operators.md#")
					}
					r.Annotations["runbook_url"] = strings.TrimPrefix(u, base)
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("PrometheusRule %s: spec is not %s", name, rulesFile)
		}
		for k, v := range c.o.value("prometheusRule.labels").(map[string]any) {
			if pr.Metadata.Labels[k] != v {
				t.Errorf("PrometheusRule %s: label %s=%q, want %q", name, k, pr.Metadata.Labels[k], v)
			}
		}
	}
	var wantDash any
	if err := json.Unmarshal(readRepoFileR(t, "deploy/"+dashboardFile), &wantDash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	dashboards := 0
	for name, cm := range c.o.configMaps {
		if _, ok := cm.Data["toolmesh.json"]; !ok {
			continue
		}
		dashboards++
		var got any
		if err := json.Unmarshal([]byte(cm.Data["toolmesh.json"]), &got); err != nil {
			t.Errorf("ConfigMap %s: toolmesh.json: %v", name, err)
		} else if !reflect.DeepEqual(got, wantDash) {
			t.Errorf("ConfigMap %s: toolmesh.json is not %s", name, dashboardFile)
		}
		labels, _ := c.o.value("grafanaDashboard.labels").(map[string]any)
		if len(labels) == 0 {
			t.Errorf("ConfigMap %s: grafanaDashboard.labels is empty: no sidecar would load it", name)
		}
		for k, v := range labels {
			if cm.Labels[k] != v {
				t.Errorf("ConfigMap %s: label %s=%q, want %q (grafanaDashboard.labels)", name, k, cm.Labels[k], v)
			}
		}
	}
	if enabled, _ := c.o.value("grafanaDashboard.enabled").(bool); enabled != (dashboards == 1) {
		t.Errorf("grafanaDashboard.enabled is %v and %d dashboard ConfigMaps render", enabled, dashboards)
	}
}

// readRepoFileR is readRepoFile for a reporter.
func readRepoFileR(t reporter, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChartMonitoringObjects checks when the chart renders the
// PrometheusRule and the dashboard ConfigMap: prometheusRule.enabled
// "auto" follows the cluster's API versions.
func TestChartMonitoringObjects(t *testing.T) {
	info := loadCmdInfo(t)
	version := envoyVersion(t)
	for _, tc := range []struct {
		name       string
		apis       []string
		values     map[string]any
		rules      int
		dashboards int
	}{
		{name: "defaults, no Prometheus Operator"},
		{name: "auto with the PrometheusRule API", apis: []string{prometheusRuleAPI}, rules: 1},
		{name: "disabled with the PrometheusRule API", apis: []string{prometheusRuleAPI},
			values: map[string]any{"prometheusRule": map[string]any{"enabled": false}}},
		{name: "enabled without the API, runbook base URL, labels",
			values: map[string]any{"prometheusRule": map[string]any{"enabled": true, "runbookBaseURL": "https://git.example.com/toolmesh/tree/v1/",
				"labels": map[string]any{"release": "prometheus"}}}, rules: 1},
		{name: "dashboard", values: map[string]any{"grafanaDashboard": map[string]any{"enabled": true,
			"labels": map[string]any{"dashboards": "team-a"}, "annotations": map[string]any{"grafana_folder": "MCP"}}}, dashboards: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := render.Load(chartDir)
			if err != nil {
				t.Fatal(err)
			}
			rel := testRelease
			rel.APIVersions = tc.apis
			ms, err := render.Render(ch, rel, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			_, vals, err := renderManifests(nil, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			o := decodeObjects(t, ms, vals)
			if len(o.prometheusRules) != tc.rules {
				t.Errorf("%d PrometheusRules, want %d", len(o.prometheusRules), tc.rules)
			}
			dashboards := 0
			for _, cm := range o.configMaps {
				if _, ok := cm.Data["toolmesh.json"]; ok {
					dashboards++
					if cm.Annotations["grafana_folder"] != "MCP" {
						t.Errorf("dashboard annotations = %v", cm.Annotations)
					}
				}
			}
			if dashboards != tc.dashboards {
				t.Errorf("%d dashboard ConfigMaps, want %d", dashboards, tc.dashboards)
			}
			checkChart(t, o, info, version)
		})
	}
}

// TestChartMonitoringCheckFails shows the monitoring check rejecting a
// PrometheusRule that is not the rule file and a dashboard without the
// sidecar's label.
func TestChartMonitoringCheckFails(t *testing.T) {
	o := renderChart(t, []string{"ci/gateway-production-values.yaml"}, nil)
	for _, pr := range o.prometheusRules {
		pr.Spec.Groups[0].Rules[0].Expr = "vector(1)"
	}
	for _, cm := range o.configMaps {
		if _, ok := cm.Data["toolmesh.json"]; ok {
			delete(cm.Labels, "grafana_dashboard")
		}
	}
	errs := record(func(r reporter) { (&chartCheck{t: r, o: o}).monitoring() })
	joined := strings.Join(errs, "\n")
	for _, want := range []string{"spec is not", "label grafana_dashboard"} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors %q do not mention %q", errs, want)
		}
	}
}
