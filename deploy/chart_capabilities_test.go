package deploy_test

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/toolmesh/toolmesh/deploy/render"
)

// TestChartRendersWithHelmDefaultCapabilities checks that `helm template
// deploy/helm/toolmesh` works without --kube-version: render.Render makes
// the kubeVersion check helm template makes, against Helm's default
// capabilities (the Helm module of deploy/go.mod, built without the release
// ldflags, says Kubernetes v1.20.0). The last case shows the check bites: the
// chart's former ">=1.30.0-0" constraint fails the default render.
func TestChartRendersWithHelmDefaultCapabilities(t *testing.T) {
	if got := chartutil.DefaultCapabilities.KubeVersion.String(); got != "v1.20.0" {
		t.Logf("Helm's default capabilities now say Kubernetes %s", got)
	}
	for _, tc := range []struct {
		name        string
		kubeVersion string // "" keeps the chart's own
		want        string // error substring; "" renders
	}{
		{name: "chart as shipped"},
		{name: "former constraint", kubeVersion: ">=1.30.0-0", want: "chart requires kubeVersion: >=1.30.0-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := render.Load(chartDir)
			if err != nil {
				t.Fatal(err)
			}
			if tc.kubeVersion != "" {
				ch.Metadata.KubeVersion = tc.kubeVersion
			}
			ms, err := render.Render(ch, testRelease, map[string]any{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("default render: %v", err)
			case tc.want == "" && len(ms) == 0:
				t.Fatal("default render produced no objects")
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("render error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
