// Package render renders the toolmesh Helm chart with Helm's Go library,
// the way `helm template` does, for the deploy tests and for the plain
// manifests in deploy/k8s that `make manifests` writes.
package render

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// Release names the release a chart is rendered for.
type Release struct {
	Name      string
	Namespace string
	// APIVersions are the API versions the cluster serves besides Helm's
	// defaults, as `helm template --api-versions` takes them (e.g.
	// "monitoring.coreos.com/v1/PrometheusRule").
	APIVersions []string
}

// Manifest is one rendered template document.
type Manifest struct {
	// Source is the template it came from, e.g. "toolmesh/templates/envoy.yaml".
	Source string
	// Kind is the object's kind as Helm's manifest splitter reads it.
	Kind string
	// Content is the YAML document, without the leading "---".
	Content string
}

// Load loads the chart in dir.
func Load(dir string) (*chart.Chart, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	return ch, nil
}

// ReadValues reads Helm value files and merges them, later files winning,
// as `helm template -f a.yaml -f b.yaml` does.
func ReadValues(files ...string) (map[string]any, error) {
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("read values %s: %w", f, err)
		}
		vals = chartutil.MergeTables(v.AsMap(), vals)
	}
	return vals, nil
}

// Render renders ch with vals (merged over the chart's values.yaml and
// checked against its values.schema.json) for an install of rel. It
// returns the manifests in Helm's install order, as `helm template` prints
// them; NOTES.txt and empty documents are left out.
func Render(ch *chart.Chart, rel Release, vals map[string]any) ([]Manifest, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.APIVersions = append(caps.APIVersions, rel.APIVersions...)
	// The check `helm template` makes before rendering (pkg/action
	// renderResources), against the same default capabilities: a chart
	// kubeVersion they do not meet fails the command without --kube-version.
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kv, caps.KubeVersion.String())
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name:      rel.Name,
		Namespace: rel.Namespace,
		Revision:  1,
		IsInstall: true,
	}, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sort manifests: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has %d hooks; the plain manifests cannot express them", len(hooks))
	}
	out := make([]Manifest, 0, len(manifests))
	for _, m := range manifests {
		content := strings.TrimSpace(m.Content)
		if content == "" {
			continue
		}
		kind := ""
		if m.Head != nil {
			kind = m.Head.Kind
		}
		out = append(out, Manifest{Source: m.Name, Kind: kind, Content: content + "\n"})
	}
	return out, nil
}

// Join writes manifests as one multi-document YAML stream, each document
// headed by its template, as `helm template` prints them.
func Join(header string, manifests []Manifest) []byte {
	var b bytes.Buffer
	b.WriteString(header)
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s", m.Source, m.Content)
	}
	return b.Bytes()
}

// Plain is one file of deploy/k8s: the chart rendered with the chart's
// defaults and the value files listed.
type Plain struct {
	// File is the name of the file in deploy/k8s.
	File string
	// ValueFiles are paths relative to the chart directory.
	ValueFiles []string
	// Title says what the file deploys, in its header comment.
	Title string
}

// PlainRelease is the release the plain manifests are rendered for: they
// name the namespace toolmesh, and the Envoy bootstrap's DNS names depend
// on it.
var PlainRelease = Release{Name: "toolmesh", Namespace: "toolmesh"}

// Plains are the plain manifest files, in the order make manifests writes
// them.
var Plains = []Plain{
	{File: "gateway.yaml", Title: "gateway mode: Envoy, toolmesh extproc and toolmesh xds as separate Deployments"},
	{File: "sidecar.yaml", ValueFiles: []string{"ci/sidecar-values.yaml"}, Title: "sidecar mode: Envoy and toolmesh as containers of one pod"},
}

// PlainManifests renders every plain manifest file of the chart in
// chartDir; the result maps each file name to its contents.
func PlainManifests(chartDir string) (map[string][]byte, error) {
	ch, err := Load(chartDir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, p := range Plains {
		files := make([]string, len(p.ValueFiles))
		for i, f := range p.ValueFiles {
			files[i] = filepath.Join(chartDir, f)
		}
		vals, err := ReadValues(files...)
		if err != nil {
			return nil, err
		}
		ms, err := Render(ch, PlainRelease, vals)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.File, err)
		}
		header := fmt.Sprintf("# toolmesh %s (chart %s), %s.\n"+
			"# Generated by `make manifests` from deploy/helm/toolmesh; do not edit.\n"+
			"# Namespace %s: kubectl create namespace %s && kubectl apply -f deploy/k8s/%s\n",
			ch.Metadata.AppVersion, ch.Metadata.Version, p.Title,
			PlainRelease.Namespace, PlainRelease.Namespace, p.File)
		if len(p.ValueFiles) > 0 {
			header += fmt.Sprintf("# Values: the chart defaults and %s.\n", strings.Join(p.ValueFiles, ", "))
		} else {
			header += "# Values: the chart defaults.\n"
		}
		out[p.File] = Join(header, ms)
	}
	return out, nil
}

// WritePlainManifests writes PlainManifests into dir and removes any other
// .yaml file there, so a renamed output cannot linger.
func WritePlainManifests(chartDir, dir string) error {
	files, err := PlainManifests(chartDir)
	if err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, ok := files[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), files[n], 0o644); err != nil {
			return fmt.Errorf("write %s: %w", n, err)
		}
	}
	return nil
}
