package deploy_test

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// valueSets are the renderings of the chart the tests check: the defaults,
// every ci/*-values.yaml, and a few overrides on top.
var valueSets = []struct {
	name      string
	files     []string
	overrides map[string]any
	kinds     map[string]int // how many objects of each kind
}{
	{
		name:  "gateway defaults",
		kinds: map[string]int{"Deployment": 3, "Service": 3, "ConfigMap": 3, "PodDisruptionBudget": 3, "ServiceAccount": 1, "NetworkPolicy": 3},
	},
	{
		name:  "gateway production",
		files: []string{"ci/gateway-production-values.yaml"},
		kinds: map[string]int{"Deployment": 3, "Service": 4, "ConfigMap": 3, "PodDisruptionBudget": 3, "ServiceAccount": 1, "HorizontalPodAutoscaler": 2, "ServiceMonitor": 1, "PrometheusRule": 1, "NetworkPolicy": 3},
	},
	{
		name:  "gateway redis url",
		files: []string{"ci/gateway-redis-url-values.yaml"},
		kinds: map[string]int{"Deployment": 3, "Service": 3, "ConfigMap": 2, "ServiceAccount": 1, "NetworkPolicy": 3},
	},
	{
		name:  "sidecar",
		files: []string{"ci/sidecar-values.yaml"},
		kinds: map[string]int{"Deployment": 1, "Service": 1, "ConfigMap": 3, "PodDisruptionBudget": 1, "ServiceAccount": 1, "NetworkPolicy": 1},
	},
	{
		name:  "sidecar monitored, own service account, Portal URL",
		files: []string{"ci/sidecar-values.yaml"},
		overrides: map[string]any{
			"serviceMonitor": map[string]any{"enabled": true},
			"serviceAccount": map[string]any{"create": false, "name": "mcp-runner"},
			"portal":         map[string]any{"url": "http://portal.tools.svc:8080"},
			"redis":          map[string]any{"url": "rediss://cache.tools.svc:6380"},
			"envoy":          map[string]any{"nodeCluster": "billing-sidecar", "extraArgs": []any{"--drain-time-s=10"}},
		},
		kinds: map[string]int{"Deployment": 1, "Service": 2, "ConfigMap": 2, "PodDisruptionBudget": 1, "ServiceMonitor": 1, "NetworkPolicy": 1},
	},
	{
		name:  "sidecar identity",
		files: []string{identityValues},
		kinds: map[string]int{"Deployment": 1, "Service": 1, "ConfigMap": 3, "PodDisruptionBudget": 1, "ServiceAccount": 1, "NetworkPolicy": 1},
	},
	{
		name:      "gateway identity, notifications tuned",
		files:     []string{identityValues},
		overrides: map[string]any{"mode": "gateway", "notifications": map[string]any{"maxStreams": 500, "maxStreamsPerClient": 5}},
		kinds:     map[string]int{"Deployment": 3, "Service": 3, "ConfigMap": 3, "PodDisruptionBudget": 3, "ServiceAccount": 1, "NetworkPolicy": 3},
	},
	{
		name: "gateway, control mTLS",
		overrides: map[string]any{"controlTLS": map[string]any{
			"existingSecret": "toolmesh-control-tls", "envoyExistingSecret": "envoy-control-tls",
			"clientSANs": []any{"spiffe://cluster.local/ns/mcp/sa/envoy"},
			"serverSANs": []any{"spiffe://cluster.local/ns/mcp/sa/toolmesh", "toolmesh-extproc.mcp.svc"},
		}},
		kinds: map[string]int{"Deployment": 3, "Service": 3, "ConfigMap": 3, "PodDisruptionBudget": 3, "ServiceAccount": 1, "NetworkPolicy": 3},
	},
	{
		name:      "gateway, notifications off",
		overrides: map[string]any{"notifications": map[string]any{"enabled": false}},
		kinds:     map[string]int{"Deployment": 3, "Service": 3, "ConfigMap": 3, "PodDisruptionBudget": 3, "ServiceAccount": 1, "NetworkPolicy": 3},
	},
}

func TestChart(t *testing.T) {
	info := loadCmdInfo(t)
	version := envoyVersion(t)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			o := renderChart(t, vs.files, vs.overrides)
			kinds := map[string]int{}
			for _, h := range o.all {
				kinds[h.Kind]++
			}
			if fmt.Sprint(kinds) != fmt.Sprint(vs.kinds) {
				t.Errorf("objects = %v, want %v", kinds, vs.kinds)
			}
			checkChart(t, o, info, version)
		})
	}
}

// checkChart runs every check of one rendering.
func checkChart(r reporter, o *objects, info cmdInfo, envoyVersion string) {
	c := &chartCheck{t: r, o: o, info: info, envoyVersion: envoyVersion}
	c.metadata()
	c.deployments()
	c.services()
	c.budgetsAndAutoscalers()
	c.serviceMonitors()
	c.monitoring()
	c.bootstrap()
	c.identityWiring()
	c.networkPolicies()
	c.controlTLS()
}

// chartCheck checks one rendering.
type chartCheck struct {
	t            reporter
	o            *objects
	info         cmdInfo
	envoyVersion string
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// metadata: every object is namespaced to the release, has a DNS-label
// name and the standard labels.
func (c *chartCheck) metadata() {
	for _, h := range c.o.all {
		where := h.Kind + " " + h.Metadata.Name
		if !dnsLabel.MatchString(h.Metadata.Name) || len(h.Metadata.Name) > 63 {
			c.t.Errorf("%s: name is not a DNS label", where)
		}
		if h.Metadata.Namespace != c.o.rel.Namespace {
			c.t.Errorf("%s: namespace %q, want %q", where, h.Metadata.Namespace, c.o.rel.Namespace)
		}
		for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
			"app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if h.Metadata.Labels[l] == "" {
				c.t.Errorf("%s: no label %s", where, l)
			}
		}
		if h.Metadata.Labels["app.kubernetes.io/instance"] != c.o.rel.Name {
			c.t.Errorf("%s: instance label %q", where, h.Metadata.Labels["app.kubernetes.io/instance"])
		}
	}
}

func (c *chartCheck) toolmeshImage() string {
	return c.o.str("image.repository") + ":"
}

// deployments checks every pod: security, resources, volumes, and each
// container's command line, ports and probes against what it runs.
func (c *chartCheck) deployments() {
	t := c.t
	if len(c.o.deployments) == 0 {
		t.Fatal("no Deployments")
	}
	for name, d := range c.o.deployments {
		where := "Deployment " + name
		spec := &d.Spec.Template.Spec
		if d.Spec.Selector == nil || !subset(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("%s: selector does not match its pod labels", where)
		}
		c.podSecurity(where, spec)
		for _, tsc := range spec.TopologySpreadConstraints {
			if tsc.LabelSelector == nil || !subset(tsc.LabelSelector.MatchLabels, d.Spec.Template.Labels) {
				t.Errorf("%s: a topology spread constraint does not select the Deployment's own pods", where)
			}
		}
		c.volumes(where, spec)
		ports := map[int32]string{}
		names := map[string]bool{}
		for i := range spec.Containers {
			ct := &spec.Containers[i]
			cw := where + " container " + ct.Name
			c.containerBasics(cw, ct)
			for _, p := range ct.Ports {
				if other, dup := ports[p.ContainerPort]; dup {
					t.Errorf("%s: port %d is also %s's: the containers share the pod's network", cw, p.ContainerPort, other)
				}
				ports[p.ContainerPort] = ct.Name
				if p.Name != "" && names[p.Name] {
					t.Errorf("%s: port name %s used twice in the pod", cw, p.Name)
				}
				names[p.Name] = true
			}
			switch {
			case ct.Name == "envoy":
				c.envoyContainer(cw, d, ct)
			case strings.HasPrefix(ct.Image, c.toolmeshImage()):
				c.toolmeshContainer(cw, d, ct)
			}
		}
		if hpa := c.hpaFor(name); hpa == nil && d.Spec.Replicas == nil {
			t.Errorf("%s: no replicas and no autoscaler", where)
		} else if hpa != nil && d.Spec.Replicas != nil {
			t.Errorf("%s: sets replicas although an autoscaler owns them", where)
		}
	}
}

func (c *chartCheck) podSecurity(where string, spec *corev1.PodSpec) {
	t := c.t
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: pod must run as a non-root user id", where)
	}
	if psc != nil && (psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault) {
		t.Errorf("%s: no RuntimeDefault seccomp profile", where)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service account token it does not need", where)
	}
	sa := spec.ServiceAccountName
	if c.o.value("serviceAccount.create") == true {
		if _, ok := c.o.serviceAccounts[sa]; !ok {
			t.Errorf("%s: service account %q is not rendered", where, sa)
		}
	} else if want := c.o.str("serviceAccount.name"); sa != want {
		t.Errorf("%s: service account %q, want %q", where, sa, want)
	}
}

func (c *chartCheck) containerBasics(where string, ct *corev1.Container) {
	t := c.t
	sc := ct.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s: no securityContext", where)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation is not false", where)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: root file system is writable", where)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Errorf("%s: runAsNonRoot is not true", where)
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("%s: capabilities are not all dropped", where)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := ct.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("%s: no %s request", where, r)
		}
	}
	if q, ok := ct.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Errorf("%s: no memory limit", where)
	}
	env := map[string]bool{}
	for _, e := range ct.Env {
		env[e.Name] = true
	}
	for _, a := range append(append([]string{}, ct.Command...), ct.Args...) {
		for _, m := range varRef.FindAllStringSubmatch(a, -1) {
			if !env[m[1]] {
				t.Errorf("%s: argument %q names $(%s), which the container does not define", where, a, m[1])
			}
		}
	}
}

// varRef is a Kubernetes $(VAR) reference in a command line.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// volumes: every mount has a volume, every ConfigMap volume a rendered
// ConfigMap (or one the operator named), every subPath a key.
func (c *chartCheck) volumes(where string, spec *corev1.PodSpec) {
	t := c.t
	vols := map[string]*corev1.Volume{}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		vols[v.Name] = v
		if v.ConfigMap == nil {
			continue
		}
		if _, ok := c.o.configMaps[v.ConfigMap.Name]; !ok && v.ConfigMap.Name != c.o.str("portal.existingConfigMap") {
			t.Errorf("%s: volume %s: ConfigMap %s is not rendered", where, v.Name, v.ConfigMap.Name)
		}
	}
	for _, ct := range spec.Containers {
		for _, m := range ct.VolumeMounts {
			v, ok := vols[m.Name]
			if !ok {
				t.Errorf("%s: %s mounts volume %s, which the pod lacks", where, ct.Name, m.Name)
				continue
			}
			if !m.ReadOnly && v.ConfigMap != nil {
				t.Errorf("%s: %s mounts ConfigMap volume %s writable", where, ct.Name, m.Name)
			}
			if m.SubPath != "" && v.ConfigMap != nil {
				if cm := c.o.configMaps[v.ConfigMap.Name]; cm != nil {
					if _, ok := cm.Data[m.SubPath]; !ok {
						t.Errorf("%s: %s mounts key %s of ConfigMap %s, which has no such key", where, ct.Name, m.SubPath, cm.Name)
					}
				}
			}
		}
	}
}

// mountedFile finds the ConfigMap key a container sees at file: the
// ConfigMap's name (empty when the file is not mounted from one) and key.
func mountedFile(spec *corev1.PodSpec, ct *corev1.Container, file string) (configMap, key string) {
	for _, m := range ct.VolumeMounts {
		var k string
		switch {
		case m.SubPath != "" && m.MountPath == file:
			k = m.SubPath
		case m.SubPath == "" && path.Dir(file) == m.MountPath:
			k = path.Base(file)
		default:
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				return v.ConfigMap.Name, k
			}
		}
	}
	return "", ""
}

// toolmeshContainer checks a toolmesh container's command line against
// internal/app and its ports, probes and files against the command line.
func (c *chartCheck) toolmeshContainer(where string, d *appsv1.Deployment, ct *corev1.Container) {
	t := c.t
	spec := &d.Spec.Template.Spec
	if len(ct.Command) != 0 {
		t.Errorf("%s: overrides the image's entrypoint", where)
	}
	sub, flags := c.info.checkArgs(t, where, ct.Args)
	if sub != "extproc" && sub != "xds" {
		t.Errorf("%s: runs %q; deployments run extproc and xds (run is for development)", where, sub)
		return
	}

	// The config file: mounted from the chart's ConfigMap, and holding only
	// fields toolmesh knows.
	cmName, key := mountedFile(spec, ct, flags["config"])
	cm := c.o.configMaps[cmName]
	if cm == nil || cm.Data[key] == "" {
		t.Errorf("%s: --config=%s is not a mounted ConfigMap key", where, flags["config"])
	} else {
		c.toolmeshConfig(where, spec, ct, cm.Data[key])
	}

	// Admin: probes go to the admin port, on the endpoints toolmesh serves.
	_, adminPort := splitHostPort(t, where+" --admin-listen", flags["admin-listen"])
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"liveness", ct.LivenessProbe, "/healthz"}, {"readiness", ct.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", where, p.kind)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: %s probe on %s, want %s", where, p.kind, p.probe.HTTPGet.Path, p.path)
		}
		cp, owner, ok := containerPort(spec, p.probe.HTTPGet.Port.String())
		if !ok || owner.Name != ct.Name || int(cp.ContainerPort) != adminPort {
			t.Errorf("%s: %s probe port %s is not the admin port %d", where, p.kind, p.probe.HTTPGet.Port.String(), adminPort)
		}
	}

	// The gRPC server: declared as the container's grpc port.
	listenFlag := sub + "-listen"
	host, grpcPort := splitHostPort(t, where+" --"+listenFlag, flags[listenFlag])
	cp, owner, ok := containerPort(spec, "grpc-"+sub)
	if !ok || owner.Name != ct.Name || int(cp.ContainerPort) != grpcPort {
		t.Errorf("%s: --%s port %d is not its grpc-%s container port", where, listenFlag, grpcPort, sub)
	}
	wantHost := "0.0.0.0"
	if c.o.mode() == "sidecar" {
		wantHost = "127.0.0.1" // only the pod's Envoy calls it
	}
	if host != wantHost {
		t.Errorf("%s: --%s on %s, want %s", where, listenFlag, host, wantHost)
	}

	// xds programs Envoy's MCP listener where the Envoy container listens.
	if sub == "xds" {
		_, port := splitHostPort(t, where+" --envoy-listen", flags["envoy-listen"])
		envoy := c.envoyPod()
		if envoy == nil {
			t.Errorf("%s: no Envoy pod", where)
		} else if cp, owner, ok := containerPort(&envoy.Spec.Template.Spec, "mcp"); !ok || owner.Name != "envoy" || int(cp.ContainerPort) != port {
			t.Errorf("%s: --envoy-listen port %d is not the Envoy container's mcp port", where, port)
		}
	}

	// GOMEMLIMIT: below the container's memory limit, so the Go runtime
	// collects garbage before the kernel kills it.
	limit := ct.Resources.Limits[corev1.ResourceMemory]
	for _, e := range ct.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		switch {
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			if e.ValueFrom.ResourceFieldRef.ContainerName != ct.Name || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
				t.Errorf("%s: GOMEMLIMIT from %+v", where, e.ValueFrom.ResourceFieldRef)
			}
		default:
			n, err := strconv.ParseInt(e.Value, 10, 64)
			if err != nil || n <= 0 || n > limit.Value()*9/10 {
				t.Errorf("%s: GOMEMLIMIT %q is not at most 90%% of the %s limit", where, e.Value, limit.String())
			}
		}
	}

	// Redis: given when configured, from the Secret when there is one.
	redisURL, secret := c.o.str("redis.url"), c.o.str("redis.existingSecret")
	if (redisURL != "" || secret != "") != (flags["redis"] != "") {
		t.Errorf("%s: --redis=%q with redis.url %q and redis.existingSecret %q", where, flags["redis"], redisURL, secret)
	}
	for _, e := range ct.Env {
		if e.Name != "TOOLMESH_REDIS_URL" {
			continue
		}
		switch {
		case secret != "":
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret ||
				e.ValueFrom.SecretKeyRef.Key != c.o.str("redis.existingSecretKey") {
				t.Errorf("%s: the Redis URL does not come from Secret %s", where, secret)
			}
		case e.Value != redisURL:
			t.Errorf("%s: Redis URL %q, want %q", where, e.Value, redisURL)
		}
	}
}

// toolmeshConfig checks the config file a toolmesh container reads.
func (c *chartCheck) toolmeshConfig(where string, spec *corev1.PodSpec, ct *corev1.Container, doc string) {
	t := c.t
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(doc), &cfg); err != nil {
		t.Errorf("%s: config file: %v", where, err)
		return
	}
	for k := range cfg {
		if !c.info.configKeys[k] {
			t.Errorf("%s: config file field %q is not a toolmesh config field", where, k)
		}
	}
	portal, _ := cfg["portal"].(string)
	if u := c.o.str("portal.url"); u != "" {
		if portal != u {
			t.Errorf("%s: portal %q, want %q", where, portal, u)
		}
		return
	}
	cmName, key := mountedFile(spec, ct, portal)
	if cmName == "" {
		t.Errorf("%s: Portal file %q is not mounted", where, portal)
		return
	}
	if ext := c.o.str("portal.existingConfigMap"); ext != "" {
		if cmName != ext || key != c.o.str("portal.key") {
			t.Errorf("%s: Portal file from %s key %s, want %s key %s", where, cmName, key, ext, c.o.str("portal.key"))
		}
		return
	}
	cm := c.o.configMaps[cmName]
	if cm == nil {
		t.Errorf("%s: Portal ConfigMap %s is not rendered", where, cmName)
		return
	}
	if _, err := (registry.ListingDecoder{Strict: true}).Decode([]byte(cm.Data[key])); err != nil {
		t.Errorf("%s: the Portal document is not a valid listing: %v", where, err)
	}
}

// envoyContainer checks Envoy's image, bootstrap mount, node identity and
// probes.
func (c *chartCheck) envoyContainer(where string, d *appsv1.Deployment, ct *corev1.Container) {
	t := c.t
	spec := &d.Spec.Template.Spec
	if !strings.HasSuffix(ct.Image, ":distroless-"+c.envoyVersion) {
		t.Errorf("%s: image %s is not the distroless Envoy %s", where, ct.Image, c.envoyVersion)
	}
	args := map[string]string{}
	for _, a := range ct.Args {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	cmName, key := mountedFile(spec, ct, args["--config-path"])
	if cm := c.o.configMaps[cmName]; cm == nil || key != "envoy.yaml" || cm.Data[key] == "" {
		t.Errorf("%s: --config-path=%s is not the mounted bootstrap", where, args["--config-path"])
	}
	if args["--service-node"] != "$(POD_NAME)" {
		t.Errorf("%s: --service-node=%q, want the pod name", where, args["--service-node"])
	}
	if want := c.o.str("envoy.nodeCluster"); want != "" && args["--service-cluster"] != want {
		t.Errorf("%s: --service-cluster=%q, want %q", where, args["--service-cluster"], want)
	}
	for _, e := range ct.Env {
		if e.Name == "POD_NAME" && (e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name") {
			t.Errorf("%s: POD_NAME is not the pod's name", where)
		}
	}
	if p := ct.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" {
		t.Errorf("%s: readiness probe is not Envoy's /ready", where)
	}
	if p := ct.LivenessProbe; p == nil || p.TCPSocket == nil {
		t.Errorf("%s: no liveness probe on the stats listener", where)
	}
	// The probes' ports are checked against the bootstrap in bootstrap().
}

// envoyPod is the Deployment running Envoy.
func (c *chartCheck) envoyPod() *appsv1.Deployment {
	for _, d := range c.o.deployments {
		for _, ct := range d.Spec.Template.Spec.Containers {
			if ct.Name == "envoy" {
				return d
			}
		}
	}
	return nil
}

// toolmeshPod is the Deployment running the toolmesh subcommand sub, and
// its flags.
func (c *chartCheck) toolmeshPod(sub string) (*appsv1.Deployment, map[string]string) {
	for _, d := range c.o.deployments {
		for _, ct := range d.Spec.Template.Spec.Containers {
			if strings.HasPrefix(ct.Image, c.toolmeshImage()) && len(ct.Args) > 0 && ct.Args[0] == sub {
				_, flags := c.info.checkArgs(c.t, d.Name, ct.Args)
				return d, flags
			}
		}
	}
	return nil, nil
}

// services: each selects pods, and each port targets a port they have.
func (c *chartCheck) services() {
	t := c.t
	for name, s := range c.o.services {
		where := "Service " + name
		pods := c.o.podsOf(s.Spec.Selector)
		if len(pods) != 1 {
			t.Errorf("%s: selects %d Deployments, want 1", where, len(pods))
			continue
		}
		for _, p := range s.Spec.Ports {
			if _, _, ok := containerPort(&pods[0].Spec.Template.Spec, p.TargetPort.String()); !ok {
				t.Errorf("%s: port %s targets %s, which Deployment %s lacks", where, p.Name, p.TargetPort.String(), pods[0].Name)
			}
		}
	}
	mcp, ok := c.o.services[c.fullname()]
	if !ok {
		t.Errorf("no MCP Service %s", c.fullname())
	} else if pods := c.o.podsOf(mcp.Spec.Selector); len(pods) != 1 || pods[0] != c.envoyPod() {
		t.Errorf("Service %s does not front Envoy", mcp.Name)
	}
}

// fullname is the object name prefix of the rendering.
func (c *chartCheck) fullname() string {
	if f := c.o.str("fullnameOverride"); f != "" {
		return f
	}
	if strings.Contains(c.o.rel.Name, "toolmesh") {
		return c.o.rel.Name
	}
	return c.o.rel.Name + "-toolmesh"
}

func (c *chartCheck) budgetsAndAutoscalers() {
	t := c.t
	for name, p := range c.o.pdbs {
		if p.Spec.Selector == nil || len(c.o.podsOf(p.Spec.Selector.MatchLabels)) != 1 {
			t.Errorf("PodDisruptionBudget %s does not select exactly one Deployment", name)
		}
		if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
			t.Errorf("PodDisruptionBudget %s has no budget", name)
		}
	}
	for name, h := range c.o.hpas {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || c.o.deployments[ref.Name] == nil {
			t.Errorf("HorizontalPodAutoscaler %s scales %s %s, which is not rendered", name, ref.Kind, ref.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			t.Errorf("HorizontalPodAutoscaler %s: replicas %v..%d", name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
	}
}

func (c *chartCheck) hpaFor(deployment string) *autoscalingv2.HorizontalPodAutoscaler {
	for _, h := range c.o.hpas {
		if h.Spec.ScaleTargetRef.Name == deployment {
			return h
		}
	}
	return nil
}

// serviceMonitors: every endpoint is a port of a selected Service, scraped
// on the path the process behind it serves metrics on.
func (c *chartCheck) serviceMonitors() {
	t := c.t
	metricsPath := map[string]string{"admin": "/metrics", "admin-xds": "/metrics", "stats": "/stats/prometheus"}
	for name, sm := range c.o.serviceMonitors {
		where := "ServiceMonitor " + name
		var selected []*corev1.Service
		for _, s := range c.o.services {
			if subset(sm.Spec.Selector.MatchLabels, s.Labels) {
				selected = append(selected, s)
			}
		}
		if len(selected) == 0 {
			t.Errorf("%s selects no Service", where)
		}
		if len(sm.Spec.NamespaceSelector.MatchNames) != 1 || sm.Spec.NamespaceSelector.MatchNames[0] != c.o.rel.Namespace {
			t.Errorf("%s: namespaceSelector %v", where, sm.Spec.NamespaceSelector.MatchNames)
		}
		scraped := map[string]bool{}
		for _, ep := range sm.Spec.Endpoints {
			if want, ok := metricsPath[ep.Port]; !ok || ep.Path != want {
				t.Errorf("%s: endpoint port %s path %s, want %s", where, ep.Port, ep.Path, want)
			}
			for _, s := range selected {
				for _, p := range s.Spec.Ports {
					if p.Name == ep.Port {
						scraped[ep.Port] = true
					}
				}
			}
		}
		// Every process is scraped: toolmesh on its admin port(s), Envoy on stats.
		for _, port := range []string{"admin", "stats"} {
			if !scraped[port] {
				t.Errorf("%s: no selected Service has port %s", where, port)
			}
		}
		if c.o.mode() == "sidecar" && !scraped["admin-xds"] {
			t.Errorf("%s: the xds container's metrics are not scraped", where)
		}
	}
}

// bootstrap checks the Envoy bootstrap the Envoy pod mounts: valid, and its
// clusters, probe listener and heap sized for the objects around it.
func (c *chartCheck) bootstrap() {
	t := c.t
	envoy := c.envoyPod()
	if envoy == nil {
		t.Fatal("no Envoy pod")
	}
	spec := &envoy.Spec.Template.Spec
	var ct *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == "envoy" {
			ct = &spec.Containers[i]
		}
	}
	cmName, key := mountedFile(spec, ct, "/etc/envoy/envoy.yaml")
	cm := c.o.configMaps[cmName]
	if cm == nil {
		t.Fatalf("bootstrap ConfigMap %q not rendered", cmName)
	}
	where := "ConfigMap " + cmName + " " + key
	b := decodeBootstrap(t, where, []byte(cm.Data[key]))
	f := checkBootstrap(t, where, b)

	// The stats listener serves Envoy's probes and metrics.
	statsPort, _, ok := containerPort(spec, "stats")
	if !ok || uint32(statsPort.ContainerPort) != f.statsPort {
		t.Errorf("%s: envoy_stats listens on %d, the stats container port is %d", where, f.statsPort, statsPort.ContainerPort)
	}
	if !f.statsPaths["/ready"] || !f.statsPaths["/stats/prometheus"] || len(f.statsPaths) != 2 {
		t.Errorf("%s: envoy_stats routes %v, want exactly /ready and /stats/prometheus", where, f.statsPaths)
	}
	for _, p := range []*corev1.Probe{ct.ReadinessProbe, ct.LivenessProbe} {
		port := ""
		switch {
		case p == nil:
			continue
		case p.HTTPGet != nil:
			port = p.HTTPGet.Port.String()
		case p.TCPSocket != nil:
			port = p.TCPSocket.Port.String()
		}
		if cp, _, ok := containerPort(spec, port); !ok || uint32(cp.ContainerPort) != f.statsPort {
			t.Errorf("%s: an Envoy probe goes to port %q, not the envoy_stats listener", where, port)
		}
	}

	// The heap ceiling fits the container.
	limit := ct.Resources.Limits[corev1.ResourceMemory]
	want := uint64(c.o.num("envoy.overload.maxHeapBytes"))
	if want == 0 {
		want = uint64(limit.Value()) * 4 / 5
	}
	if f.heapBytes != want || f.heapBytes >= uint64(limit.Value()) {
		t.Errorf("%s: max_heap_size_bytes %d, want %d under the %s limit", where, f.heapBytes, want, limit.String())
	}

	// The ext_proc buffer holds the largest reply toolmesh lets through.
	maxResp := c.o.num("config.maxResponseBytes")
	if maxResp == 0 {
		maxResp = 4 << 20
	}
	if lim := f.clusters[wire.ExtProcCluster].GetPerConnectionBufferLimitBytes().GetValue(); int64(lim) < 2*maxResp {
		t.Errorf("%s: ext_proc buffer %d < twice maxResponseBytes %d", where, lim, maxResp)
	}

	// The two toolmesh clusters reach the toolmesh gRPC servers.
	for _, tc := range []struct{ cluster, sub string }{
		{wire.XDSCluster, "xds"}, {wire.ExtProcCluster, "extproc"},
	} {
		c.toolmeshCluster(where, f, tc.cluster, tc.sub, envoy)
	}
	c.notificationsWiring(where, f, envoy)
}

// toolmeshCluster checks that a bootstrap cluster reaches the toolmesh
// server sub: over loopback in sidecar mode, through its Service otherwise.
func (c *chartCheck) toolmeshCluster(where string, f bootstrapFacts, cluster, sub string, envoy *appsv1.Deployment) {
	t := c.t
	cl, ep := f.clusters[cluster], f.endpoints[cluster]
	if cl == nil || ep == nil {
		return // reported by checkBootstrap
	}
	pod, flags := c.toolmeshPod(sub)
	if pod == nil {
		t.Errorf("%s: no toolmesh %s container", where, sub)
		return
	}
	host, port := splitHostPort(t, where, flags[sub+"-listen"])
	if c.o.mode() == "sidecar" {
		if pod != envoy || cl.GetType() != clusterv3.Cluster_STATIC || ep.GetAddress() != host || int(ep.GetPortValue()) != port {
			t.Errorf("%s: %s goes to %s:%d (%v), want STATIC %s:%d in the same pod", where, cluster, ep.GetAddress(), ep.GetPortValue(), cl.GetType(), host, port)
		}
		return
	}
	if !isStrictDNS(t, cl) {
		t.Errorf("%s: %s is %v, want strict DNS (cluster_type envoy.cluster.dns)", where, cluster, cl.GetClusterDiscoveryType())
	}
	svcName, ok := strings.CutSuffix(ep.GetAddress(), fmt.Sprintf(".%s.svc.%s", c.o.rel.Namespace, c.o.str("clusterDomain")))
	svc := c.o.services[svcName]
	if !ok || svc == nil {
		t.Errorf("%s: %s goes to %s, which is not a rendered Service's name", where, cluster, ep.GetAddress())
		return
	}
	if pods := c.o.podsOf(svc.Spec.Selector); len(pods) != 1 || pods[0] != pod {
		t.Errorf("%s: %s goes to Service %s, which does not select the %s pods", where, cluster, svcName, sub)
	}
	found := false
	for _, p := range svc.Spec.Ports {
		if int(p.Port) != int(ep.GetPortValue()) {
			continue
		}
		cp, _, ok := containerPort(&pod.Spec.Template.Spec, p.TargetPort.String())
		found = ok && int(cp.ContainerPort) == port
	}
	if !found {
		t.Errorf("%s: %s goes to port %d of Service %s, which does not reach the %s server on %d", where, cluster, ep.GetPortValue(), svcName, sub, port)
	}
	if sub == "extproc" {
		// Headless, so Envoy balances streams over every pod, and health
		// checked with the gRPC health service toolmesh serves.
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("%s: Service %s is not headless", where, svcName)
		}
		hcs := cl.GetHealthChecks()
		if len(hcs) != 1 || hcs[0].GetGrpcHealthCheck().GetServiceName() != extProcHealthService {
			t.Errorf("%s: %s is not health checked with gRPC service %s", where, cluster, extProcHealthService)
		}
	}
}

// quantity parses a Kubernetes quantity, failing the test on error.
func quantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
