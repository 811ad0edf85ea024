package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/toolmesh/toolmesh/deploy/render"
)

// TestPlainManifestsUpToDate fails when deploy/k8s is not what `make
// manifests` renders from the chart now.
func TestPlainManifestsUpToDate(t *testing.T) {
	want, err := render.PlainManifests(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	have, err := filepath.Glob(filepath.Join("k8s", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range have {
		names = append(names, filepath.Base(f))
	}
	var wantNames []string
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(names)
	sort.Strings(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Fatalf("deploy/k8s has %v, want %v: run `make manifests`", names, wantNames)
	}
	for name, content := range want {
		got, err := os.ReadFile(filepath.Join("k8s", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content) {
			t.Errorf("deploy/k8s/%s is stale: run `make manifests`", name)
		}
	}
}

// TestPlainManifests checks the plain manifests as objects, as they are
// applied: rendered for the release and namespace the files name.
func TestPlainManifests(t *testing.T) {
	info := loadCmdInfo(t)
	version := envoyVersion(t)
	ch, err := render.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range render.Plains {
		t.Run(p.File, func(t *testing.T) {
			files := make([]string, len(p.ValueFiles))
			for i, f := range p.ValueFiles {
				files[i] = filepath.Join(chartDir, f)
			}
			vals, err := render.ReadValues(files...)
			if err != nil {
				t.Fatal(err)
			}
			ms, err := render.Render(ch, render.PlainRelease, vals)
			if err != nil {
				t.Fatal(err)
			}
			_, effective, err := renderManifests(p.ValueFiles, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := decodeObjects(t, ms, effective)
			o.rel = render.PlainRelease
			checkChart(t, o, info, version)
		})
	}
}
