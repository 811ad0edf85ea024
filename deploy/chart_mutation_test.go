package deploy_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestChartChecksCatch breaks one thing at a time in a good rendering and
// requires the chart checks to report it, so that a check that cannot fail
// does not pass for one that works.
func TestChartChecksCatch(t *testing.T) {
	info := loadCmdInfo(t)
	version := envoyVersion(t)
	for _, tc := range []struct {
		name    string
		sidecar bool
		breakIt func(t *testing.T, o *objects)
		want    string // a substring of one reported failure
	}{
		{"readiness probe on an endpoint toolmesh lacks", false, func(t *testing.T, o *objects) {
			container(t, o, "mcp-toolmesh-extproc", "extproc").ReadinessProbe.HTTPGet.Path = "/ready"
		}, "readiness probe on /ready, want /readyz"},
		{"probe on another container's port", false, func(t *testing.T, o *objects) {
			container(t, o, "mcp-toolmesh-xds", "xds").LivenessProbe.HTTPGet.Port = intstr.FromString("grpc-xds")
		}, "is not the admin port"},
		{"unknown toolmesh flag", false, func(t *testing.T, o *objects) {
			c := container(t, o, "mcp-toolmesh-xds", "xds")
			c.Args = append(c.Args, "--listen-all=true")
		}, "toolmesh has no flag --listen-all"},
		{"unknown config field", false, func(t *testing.T, o *objects) {
			o.configMaps["mcp-toolmesh-config"].Data["config.yaml"] += "refreshIntervall: 10s\n"
		}, `"refreshIntervall" is not a toolmesh config field`},
		{"invalid Portal document", false, func(t *testing.T, o *objects) {
			o.configMaps["mcp-toolmesh-portal"].Data["portal.yaml"] = "routes:\n- key: Not_A_Key\n"
		}, "not a valid listing"},
		{"Service port to a missing container port", false, func(t *testing.T, o *objects) {
			o.services["mcp-toolmesh-xds"].Spec.Ports[0].TargetPort = intstr.FromString("grpc")
		}, "targets grpc, which Deployment mcp-toolmesh-xds lacks"},
		{"bootstrap xDS port off by one", false, func(t *testing.T, o *objects) {
			cm := o.configMaps["mcp-toolmesh-envoy"]
			cm.Data["envoy.yaml"] = strings.Replace(cm.Data["envoy.yaml"], "port_value: 18000", "port_value: 18001", 1)
		}, "goes to port 18001 of Service mcp-toolmesh-xds"},
		{"bootstrap not valid for Envoy", false, func(t *testing.T, o *objects) {
			cm := o.configMaps["mcp-toolmesh-envoy"]
			cm.Data["envoy.yaml"] = strings.Replace(cm.Data["envoy.yaml"], "connect_timeout: 1s", "connect_timeout: -1s", 1)
		}, "ValidateDeep"},
		{"extproc Service with a cluster IP", false, func(t *testing.T, o *objects) {
			o.services["mcp-toolmesh-extproc"].Spec.ClusterIP = ""
		}, "is not headless"},
		{"missing ConfigMap volume", false, func(t *testing.T, o *objects) {
			delete(o.configMaps, "mcp-toolmesh-portal")
		}, "ConfigMap mcp-toolmesh-portal is not rendered"},
		{"shared node id", false, func(t *testing.T, o *objects) {
			c := container(t, o, "mcp-toolmesh-envoy", "envoy")
			for i, a := range c.Args {
				if strings.HasPrefix(a, "--service-node=") {
					c.Args[i] = "--service-node=gateway"
				}
			}
		}, "want the pod name"},
		{"writable root file system", false, func(t *testing.T, o *objects) {
			f := false
			container(t, o, "mcp-toolmesh-envoy", "envoy").SecurityContext.ReadOnlyRootFilesystem = &f
		}, "root file system is writable"},
		{"stats port not the probe listener", false, func(t *testing.T, o *objects) {
			c := container(t, o, "mcp-toolmesh-envoy", "envoy")
			for i := range c.Ports {
				if c.Ports[i].Name == "stats" {
					c.Ports[i].ContainerPort = 9903
				}
			}
		}, "envoy_stats listens on 9902"},
		{"budget selecting nothing", false, func(t *testing.T, o *objects) {
			o.pdbs["mcp-toolmesh-xds"].Spec.Selector.MatchLabels["app.kubernetes.io/component"] = "xDS"
		}, "does not select exactly one Deployment"},
		{"undefined variable in args", false, func(t *testing.T, o *objects) {
			c := container(t, o, "mcp-toolmesh-extproc", "extproc")
			c.Args = append(c.Args, "--redis=$(REDIS_URL)")
		}, "names $(REDIS_URL)"},
		{"sidecar extproc on another port than the bootstrap", true, func(t *testing.T, o *objects) {
			c := container(t, o, "mcp-toolmesh", "extproc")
			for i, a := range c.Args {
				if strings.HasPrefix(a, "--extproc-listen=") {
					c.Args[i] = "--extproc-listen=127.0.0.1:9003"
				}
			}
		}, "want STATIC 127.0.0.1:9003 in the same pod"},
		{"sidecar gRPC server on every interface", true, func(t *testing.T, o *objects) {
			c := container(t, o, "mcp-toolmesh", "xds")
			for i, a := range c.Args {
				if strings.HasPrefix(a, "--xds-listen=") {
					c.Args[i] = "--xds-listen=0.0.0.0:18000"
				}
			}
		}, "want 127.0.0.1"},
		{"extproc port open to every pod", false, func(t *testing.T, o *objects) {
			o.netPolicies["mcp-toolmesh-extproc"].Spec.Ingress[0].From = nil
		}, "control port grpc-extproc admits [], want only the Envoy pods"},
		{"xDS port not admitted", false, func(t *testing.T, o *objects) {
			o.netPolicies["mcp-toolmesh-xds"].Spec.Ingress = o.netPolicies["mcp-toolmesh-xds"].Spec.Ingress[1:]
		}, "port grpc-xds is not admitted"},
		{"NetworkPolicy on a port the pods lack", false, func(t *testing.T, o *objects) {
			p := intstr.FromString("grpc")
			o.netPolicies["mcp-toolmesh-envoy"].Spec.Ingress[0].Ports[0].Port = &p
		}, "port grpc is not a port of Deployment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var files []string
			if tc.sidecar {
				files = []string{"ci/sidecar-values.yaml"}
			}
			requireCaught(t, files, info, version, tc.breakIt, tc.want)
		})
	}
}

// requireCaught renders the chart with the value files, requires the chart
// checks to pass on it, breaks it with breakIt and requires one reported
// failure to contain want.
func requireCaught(t *testing.T, files []string, info cmdInfo, version string, breakIt func(*testing.T, *objects), want string) {
	t.Helper()
	o := renderChart(t, files, nil)
	if errs := record(func(r reporter) { checkChart(r, o, info, version) }); len(errs) > 0 {
		t.Fatalf("the unbroken rendering fails: %q", errs)
	}
	breakIt(t, o)
	errs := record(func(r reporter) { checkChart(r, o, info, version) })
	for _, e := range errs {
		if strings.Contains(e, want) {
			return
		}
	}
	t.Errorf("no failure mentions %q; got %q", want, errs)
}

// container finds a container of a rendered Deployment.
func container(t *testing.T, o *objects, deployment, name string) *corev1.Container {
	t.Helper()
	d := o.deployments[deployment]
	if d == nil {
		t.Fatalf("no Deployment %s", deployment)
	}
	return findContainer(t, d, name)
}

func findContainer(t *testing.T, d *appsv1.Deployment, name string) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return nil
}
