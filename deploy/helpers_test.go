package deploy_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/toolmesh/toolmesh/deploy/render"
)

// Paths, relative to the deploy module, where go test runs.
const (
	repoRoot = ".."
	chartDir = "helm/toolmesh"
)

// testRelease is the release the chart is rendered for in tests; it differs
// from render.PlainRelease so that nothing can depend on the defaults.
var testRelease = render.Release{Name: "mcp", Namespace: "tools"}

// objects is one rendering of the chart, decoded strictly into the
// Kubernetes API types, so that a misspelt field fails the test.
type objects struct {
	rel    render.Release
	values map[string]any // the effective values: chart defaults and overrides

	all             []header
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	serviceAccounts map[string]*corev1.ServiceAccount
	pdbs            map[string]*policyv1.PodDisruptionBudget
	hpas            map[string]*autoscalingv2.HorizontalPodAutoscaler
	serviceMonitors map[string]*serviceMonitor
	prometheusRules map[string]*prometheusRule
	netPolicies     map[string]*networkingv1.NetworkPolicy
}

// header is what every object has.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	source string
}

// serviceMonitor is the part of a monitoring.coreos.com/v1 ServiceMonitor
// the tests read; the CRD has no Go type here.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// prometheusRule is a monitoring.coreos.com/v1 PrometheusRule: its spec is
// a Prometheus rule file.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec ruleFile `json:"spec"`
}

// renderChart renders the chart with the value files (relative to the
// chart) and then overrides, and decodes every object.
func renderChart(t *testing.T, valueFiles []string, overrides map[string]any) *objects {
	t.Helper()
	ms, vals, err := renderManifests(valueFiles, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, ms, vals)
}

func renderManifests(valueFiles []string, overrides map[string]any) ([]render.Manifest, map[string]any, error) {
	ch, err := render.Load(chartDir)
	if err != nil {
		return nil, nil, err
	}
	paths := make([]string, len(valueFiles))
	for i, f := range valueFiles {
		paths[i] = filepath.Join(chartDir, f)
	}
	vals, err := render.ReadValues(paths...)
	if err != nil {
		return nil, nil, err
	}
	vals = chartutil.MergeTables(overrides, vals)
	ms, err := render.Render(ch, testRelease, vals)
	if err != nil {
		return nil, nil, err
	}
	effective, err := chartutil.CoalesceValues(ch, vals)
	if err != nil {
		return nil, nil, err
	}
	return ms, effective.AsMap(), nil
}

func decodeObjects(t *testing.T, ms []render.Manifest, vals map[string]any) *objects {
	t.Helper()
	o := &objects{
		rel:             testRelease,
		values:          vals,
		deployments:     map[string]*appsv1.Deployment{},
		services:        map[string]*corev1.Service{},
		configMaps:      map[string]*corev1.ConfigMap{},
		serviceAccounts: map[string]*corev1.ServiceAccount{},
		pdbs:            map[string]*policyv1.PodDisruptionBudget{},
		hpas:            map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		serviceMonitors: map[string]*serviceMonitor{},
		prometheusRules: map[string]*prometheusRule{},
		netPolicies:     map[string]*networkingv1.NetworkPolicy{},
	}
	for _, m := range ms {
		var h header
		if err := yaml.Unmarshal([]byte(m.Content), &h); err != nil {
			t.Fatalf("%s: %v\n%s", m.Source, err, m.Content)
		}
		h.source = m.Source
		o.all = append(o.all, h)
		key := h.Metadata.Name
		var err error
		switch h.APIVersion + " " + h.Kind {
		case "apps/v1 Deployment":
			err = decodeInto(m.Content, key, o.deployments)
		case "v1 Service":
			err = decodeInto(m.Content, key, o.services)
		case "v1 ConfigMap":
			err = decodeInto(m.Content, key, o.configMaps)
		case "v1 ServiceAccount":
			err = decodeInto(m.Content, key, o.serviceAccounts)
		case "policy/v1 PodDisruptionBudget":
			err = decodeInto(m.Content, key, o.pdbs)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			err = decodeInto(m.Content, key, o.hpas)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			err = decodeInto(m.Content, key, o.serviceMonitors)
		case "monitoring.coreos.com/v1 PrometheusRule":
			err = decodeInto(m.Content, key, o.prometheusRules)
		case "networking.k8s.io/v1 NetworkPolicy":
			err = decodeInto(m.Content, key, o.netPolicies)
		default:
			t.Errorf("%s: unexpected object %s %s", m.Source, h.APIVersion, h.Kind)
		}
		if err != nil {
			t.Errorf("%s: %s %s: %v", m.Source, h.Kind, key, err)
		}
	}
	return o
}

// decodeInto decodes doc strictly (unknown and duplicate fields are
// errors) into a new T stored under name, refusing a second object of the
// same kind and name.
func decodeInto[T any](doc, name string, into map[string]*T) error {
	v := new(T)
	if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
		return err
	}
	if _, dup := into[name]; dup {
		return errDuplicate
	}
	into[name] = v
	return nil
}

var errDuplicate = errorString("two objects of the same kind have this name")

type errorString string

func (e errorString) Error() string { return string(e) }

// value reads a dotted path of the effective values ("envoy.overload.maxHeapBytes").
func (o *objects) value(path string) any {
	var v any = o.values
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func (o *objects) str(path string) string {
	s, _ := o.value(path).(string)
	return s
}

func (o *objects) num(path string) int64 {
	switch v := o.value(path).(type) {
	case float64:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	}
	return 0
}

func (o *objects) mode() string { return o.str("mode") }

// podsOf returns the Deployments whose pod template labels the selector
// matches.
func (o *objects) podsOf(selector map[string]string) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, d := range o.deployments {
		if len(selector) > 0 && subset(selector, d.Spec.Template.Labels) {
			out = append(out, d)
		}
	}
	return out
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a port by name or number among a pod's containers.
func containerPort(spec *corev1.PodSpec, port string) (corev1.ContainerPort, *corev1.Container, bool) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		for _, p := range c.Ports {
			if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
				return p, c, true
			}
		}
	}
	return corev1.ContainerPort{}, nil, false
}

// splitHostPort splits an address, failing the test when it is not one.
func splitHostPort(t reporter, where, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return "", 0
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Errorf("%s: port %q", where, port)
	}
	return host, n
}

// readRepoFile reads a file given relative to the repository root.
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// envoyVersion is the Envoy release toolmesh is tested against.
func envoyVersion(t *testing.T) string {
	t.Helper()
	v := string(bytes.TrimSpace(readRepoFile(t, ".envoy-version")))
	if !strings.HasPrefix(v, "v1.") {
		t.Fatalf(".envoy-version = %q", v)
	}
	return v
}

// reporter is the part of testing.T the checks use, so that a test can run
// them against broken objects and see them fail.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// recorder is a reporter that collects failures; Fatal ends the check
// through a panic that runChecks recovers.
type recorder struct{ errs []string }

type fatalCheck struct{}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) {
	r.errs = append(r.errs, fmt.Sprint(args...))
	panic(fatalCheck{})
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(fatalCheck{})
}

// record runs check with a recorder and returns what it reported.
func record(check func(r reporter)) (errs []string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(fatalCheck); !ok {
				panic(p)
			}
		}
		errs = r.errs
	}()
	check(r)
	return r.errs
}
