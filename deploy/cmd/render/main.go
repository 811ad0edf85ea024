// Command render writes the plain Kubernetes manifests of deploy/k8s from
// the Helm chart in deploy/helm/toolmesh, for operators without Helm. `make
// manifests` runs it from the deploy module:
//
//	go run ./cmd/render [-chart helm/toolmesh] [-out k8s]
//
// With -print it writes one rendering of the chart to stdout instead, like
// `helm template`, e.g. -print -f helm/toolmesh/ci/sidecar-values.yaml.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/toolmesh/toolmesh/deploy/render"
)

// valueFiles collects repeated -f flags.
type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

func main() {
	chartDir := flag.String("chart", "helm/toolmesh", "chart `directory`")
	out := flag.String("out", "k8s", "`directory` the plain manifests are written to")
	print := flag.Bool("print", false, "print one rendering to stdout instead of writing -out")
	name := flag.String("name", render.PlainRelease.Name, "release `name` (with -print)")
	namespace := flag.String("namespace", render.PlainRelease.Namespace, "release `namespace` (with -print)")
	var files valueFiles
	flag.Var(&files, "f", "value `file` (with -print; repeatable)")
	flag.Parse()

	if err := run(*chartDir, *out, *print, render.Release{Name: *name, Namespace: *namespace}, files); err != nil {
		fmt.Fprintf(os.Stderr, "render: %v\n", err)
		os.Exit(1)
	}
}

func run(chartDir, out string, print bool, rel render.Release, files []string) error {
	if !print {
		return render.WritePlainManifests(chartDir, out)
	}
	ch, err := render.Load(chartDir)
	if err != nil {
		return err
	}
	vals, err := render.ReadValues(files...)
	if err != nil {
		return err
	}
	ms, err := render.Render(ch, rel, vals)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(render.Join("", ms))
	return err
}
