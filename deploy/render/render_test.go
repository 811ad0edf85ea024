package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/deploy/render"
)

func TestReadValuesLaterFilesWin(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(a, []byte("mode: gateway\nenvoy: {replicas: 2, concurrency: 4}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("envoy: {replicas: 5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vals, err := render.ReadValues(a, b)
	if err != nil {
		t.Fatal(err)
	}
	envoy := vals["envoy"].(map[string]any)
	if envoy["replicas"] != float64(5) || envoy["concurrency"] != float64(4) || vals["mode"] != "gateway" {
		t.Errorf("merged values = %v", vals)
	}
	if _, err := render.ReadValues(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing value file is not an error")
	}
}

func TestRenderOrdersLikeHelmTemplate(t *testing.T) {
	ch, err := render.Load("../helm/toolmesh")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := render.Render(ch, render.Release{Name: "r", Namespace: "ns"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Helm's install order: ServiceAccount and ConfigMaps before the
	// Services, Services before the Deployments.
	first := map[string]int{}
	for i, m := range ms {
		if strings.HasSuffix(m.Source, "NOTES.txt") || strings.TrimSpace(m.Content) == "" {
			t.Errorf("manifest %d (%s) should have been left out", i, m.Source)
		}
		if _, ok := first[m.Kind]; !ok {
			first[m.Kind] = i
		}
	}
	for _, pair := range [][2]string{{"ServiceAccount", "Service"}, {"ConfigMap", "Service"}, {"Service", "Deployment"}} {
		if first[pair[0]] > first[pair[1]] {
			t.Errorf("%s comes after %s", pair[0], pair[1])
		}
	}
	out := string(render.Join("# header\n", ms[:2]))
	if !strings.HasPrefix(out, "# header\n---\n# Source: toolmesh/templates/") || strings.Count(out, "\n---\n") != 2 {
		t.Errorf("Join output:\n%s", out)
	}
}
