package deploy_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// freeForm are values whose contents are passed through (Kubernetes
// objects, the toolmesh config file, the Portal document): documented as a
// whole, not key by key.
var freeForm = map[string]bool{
	"config": true, "portal.routes": true, "podSecurityContext": true, "securityContext": true,
	"resources": true, "annotations": true, "labels": true,
}

// TestChartValuesDocumented checks that the chart README's table names
// every value of values.yaml.
func TestChartValuesDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := strings.TrimPrefix(prefix+"."+k, ".")
			sub, isMap := v.(map[string]any)
			if isMap && len(sub) > 0 && !freeForm[p] && !freeForm[k] {
				walk(p, sub)
				continue
			}
			paths = append(paths, p)
		}
	}
	walk("", vals)
	sort.Strings(paths)
	if len(paths) < 40 {
		t.Fatalf("only %d values found", len(paths))
	}
	for _, p := range paths {
		if !strings.Contains(string(readme), "`"+p+"`") {
			t.Errorf("README.md does not document `%s`", p)
		}
	}
}
