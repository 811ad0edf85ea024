package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/toolmesh/toolmesh/deploy/render"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/xds"
)

// identityValues turns on every identity feature of the chart.
const identityValues = "ci/sidecar-identity-values.yaml"

// identityKeys are the config file fields the chart's identity values
// write; none may appear while those values are unset.
var identityKeys = []string{"resourceBase", "auth", "policies", "upstreamAuth", "credentials", "approval", "downstreamTLS"}

// toolmeshConfigDoc is the config file the chart renders, decoded.
func (c *chartCheck) toolmeshConfigDoc() map[string]any {
	cm := c.o.configMaps[c.fullname()+"-config"]
	if cm == nil {
		c.t.Fatalf("no ConfigMap %s-config", c.fullname())
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		c.t.Fatalf("ConfigMap %s-config: %v", c.fullname(), err)
	}
	return cfg
}

// notificationsWiring checks that change-notification streams reach the
// extproc server's notifications listener through the address xds programs
// Envoy's toolmesh_notifications cluster with, and that the streams, each
// holding an ext_proc stream, have room in the toolmesh_extproc circuit
// breakers (ADR 0012).
func (c *chartCheck) notificationsWiring(where string, f bootstrapFacts, envoy *appsv1.Deployment) {
	t := c.t
	enabled, _ := c.o.value("notifications.enabled").(bool)
	cfg := c.toolmeshConfigDoc()
	pod, flags := c.toolmeshPod("extproc")
	if pod == nil {
		return // reported by toolmeshCluster
	}
	wantRequests := c.o.num("envoy.extprocMaxRequests")
	if enabled {
		wantRequests += c.o.num("notifications.maxStreams")
	}
	th := f.clusters[wire.ExtProcCluster].GetCircuitBreakers().GetThresholds()
	if len(th) != 1 || int64(th[0].GetMaxRequests().GetValue()) != wantRequests || int64(th[0].GetMaxPendingRequests().GetValue()) != wantRequests {
		t.Errorf("%s: toolmesh_extproc circuit breakers %v, want max_requests and max_pending_requests %d", where, th, wantRequests)
	}
	listen, hasFlag := flags["notifications-listen"]
	addrs, _ := cfg["notificationsAddresses"].([]any)
	if !enabled {
		if hasFlag || cfg["notificationsAddresses"] != nil {
			t.Errorf("%s: notifications are off, but extproc has --notifications-listen=%q and the config notificationsAddresses %v", where, listen, addrs)
		}
		return
	}
	if got, want := cfg["notificationsMaxStreams"], float64(c.o.num("notifications.maxStreams")); got != want {
		t.Errorf("config notificationsMaxStreams %v, want %v", got, want)
	}
	if got, want := cfg["notificationsMaxStreamsPerClient"], float64(c.o.num("notifications.maxStreamsPerClient")); got != want {
		t.Errorf("config notificationsMaxStreamsPerClient %v, want %v", got, want)
	}
	if !hasFlag || len(addrs) != 1 {
		t.Errorf("%s: extproc --notifications-listen=%q, config notificationsAddresses %v: want the flag and one address", where, listen, addrs)
		return
	}
	host, port := splitHostPort(t, "extproc --notifications-listen", listen)
	spec := &pod.Spec.Template.Spec
	if cp, owner, ok := containerPort(spec, "notifications"); !ok || owner.Args[0] != "extproc" || int(cp.ContainerPort) != port {
		t.Errorf("%s: --notifications-listen port %d is not the extproc container's notifications port", pod.Name, port)
	}
	addr, _ := addrs[0].(string)
	if err := (&xds.Notifications{Addresses: []string{addr}}).Check(); err != nil {
		t.Errorf("config notificationsAddresses %q: xds refuses it: %v", addr, err)
	}
	aHost, aPort := splitHostPort(t, "config notificationsAddresses", addr)
	if c.o.mode() == "sidecar" {
		if pod != envoy || host != "127.0.0.1" || aHost != "127.0.0.1" || aPort != port {
			t.Errorf("%s: notifications at %s, listening on %s: want loopback in Envoy's pod", where, addr, listen)
		}
		return
	}
	if host != "0.0.0.0" {
		t.Errorf("%s: --notifications-listen=%s, want 0.0.0.0 for Envoy's pods", pod.Name, listen)
	}
	svcName, ok := strings.CutSuffix(aHost, fmt.Sprintf(".%s.svc.%s", c.o.rel.Namespace, c.o.str("clusterDomain")))
	svc := c.o.services[svcName]
	if !ok || svc == nil {
		t.Errorf("config notificationsAddresses %s is not a rendered Service's name", addr)
		return
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s is not headless: its name would resolve to one address, not every extproc pod", svcName)
	}
	if pods := c.o.podsOf(svc.Spec.Selector); len(pods) != 1 || pods[0] != pod {
		t.Errorf("Service %s does not select the extproc pods", svcName)
	}
	found := false
	for _, p := range svc.Spec.Ports {
		if int(p.Port) == aPort {
			cp, _, ok := containerPort(spec, p.TargetPort.String())
			found = ok && int(cp.ContainerPort) == port
		}
	}
	if !found {
		t.Errorf("config notificationsAddresses %s: Service %s port %d does not reach the notifications server on %d", addr, svcName, aPort, port)
	}
}

// identityWiring checks the identity values: each config field is there
// exactly when its value is set, and every secret it needs is a file from
// a Secret volume of the container that reads it, never a value in the
// ConfigMap or the pod.
func (c *chartCheck) identityWiring() {
	t := c.t
	cfg := c.toolmeshConfigDoc()
	for _, k := range []struct{ field, value string }{
		{"resourceBase", "resourceBase"}, {"auth", "auth"}, {"policies", "policies"},
		{"upstreamAuth", "upstreamAuth.services"}, {"approval", "approval.keys"}, {"downstreamTLS", "downstreamTLS.existingSecret"},
	} {
		set := !isEmpty(c.o.value(k.value))
		if _, has := cfg[k.field]; has != set {
			t.Errorf("config %s present %v, but value %s set %v", k.field, has, k.value, set)
		}
	}
	// Files the config names, by the container that must see them.
	type need struct{ container, file, secret string }
	var needs []need
	for name, src := range asMap(cfg["credentials"]) {
		m := asMap(src)
		if len(m) != 1 || m["file"] == nil {
			t.Errorf("config credentials.%s = %v, want only a file", name, src)
			continue
		}
		for _, ct := range []string{"extproc", "xds"} {
			needs = append(needs, need{ct, m["file"].(string), c.o.str("upstreamAuth.existingSecret")})
		}
	}
	if ap := asMap(cfg["approval"]); ap != nil {
		keys, _ := ap["keys"].([]any)
		if len(keys) == 0 {
			t.Errorf("config approval without keys")
		}
		for i, k := range keys {
			m := asMap(k)
			if len(m) != 2 || m["id"] == nil || m["file"] == nil {
				t.Errorf("config approval.keys[%d] = %v, want only id and file", i, k)
				continue
			}
			for _, ct := range []string{"extproc", "xds"} {
				needs = append(needs, need{ct, m["file"].(string), c.o.str("approval.existingSecret")})
			}
		}
	}
	if tls := asMap(cfg["downstreamTLS"]); tls != nil {
		for _, k := range []string{"certFile", "keyFile", "clientCAFile"} {
			f, _ := tls[k].(string)
			needs = append(needs, need{"envoy", f, c.o.str("downstreamTLS.existingSecret")})
		}
	}
	for _, n := range needs {
		d, ct := c.containerNamed(n.container)
		if ct == nil {
			t.Errorf("no %s container", n.container)
			continue
		}
		secret, key := mountedSecret(&d.Spec.Template.Spec, ct, n.file)
		if secret == "" || secret != n.secret || key != filepath.Base(n.file) {
			t.Errorf("%s: %s is not key %s of Secret %q (got Secret %q key %q)", n.container, n.file, filepath.Base(n.file), n.secret, secret, key)
		}
	}
	// Nothing secret in env values or ConfigMaps: the chart has no secret
	// value to write, so a Secret volume is the only way in.
	for _, h := range c.o.all {
		if h.Kind == "Secret" {
			t.Errorf("the chart renders Secret %s; it must only reference the operator's", h.Metadata.Name)
		}
	}
}

// containerNamed finds a container by name (envoy, extproc, xds).
func (c *chartCheck) containerNamed(name string) (*appsv1.Deployment, *corev1.Container) {
	for _, d := range c.o.deployments {
		for i := range d.Spec.Template.Spec.Containers {
			if ct := &d.Spec.Template.Spec.Containers[i]; ct.Name == name {
				return d, ct
			}
		}
	}
	return nil, nil
}

// mountedSecret finds the Secret key a container sees at file.
func mountedSecret(spec *corev1.PodSpec, ct *corev1.Container, file string) (secret, key string) {
	for _, m := range ct.VolumeMounts {
		if m.SubPath != "" || filepath.Dir(file) != m.MountPath || !m.ReadOnly {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				if it.Path == filepath.Base(file) {
					return v.Secret.SecretName, it.Key
				}
			}
		}
	}
	return "", ""
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// identityUnset are the identity values at their defaults, written out; a
// new map each time, as rendering merges the value files into it.
func identityUnset() map[string]any {
	return map[string]any{
		"resourceBase": "", "auth": map[string]any{}, "policies": map[string]any{},
		"upstreamAuth":  map[string]any{"services": map[string]any{}, "existingSecret": "", "credentials": map[string]any{}},
		"approval":      map[string]any{"existingSecret": "", "keys": []any{}, "ttl": "", "routes": map[string]any{}, "default": map[string]any{}},
		"downstreamTLS": map[string]any{"existingSecret": ""},
	}
}

// TestChartIdentityOffByDefault: with the identity values unset, the
// renderings are those of values that never mention them, the config file
// has none of their fields and no pod mounts a Secret.
func TestChartIdentityOffByDefault(t *testing.T) {
	for _, files := range [][]string{nil, {"ci/sidecar-values.yaml"}, {"ci/gateway-production-values.yaml"}} {
		t.Run(fmt.Sprint(files), func(t *testing.T) {
			plain, _, err := renderManifests(files, nil)
			if err != nil {
				t.Fatal(err)
			}
			explicit, _, err := renderManifests(files, identityUnset())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(render.Join("", plain), render.Join("", explicit)) {
				t.Error("writing out the identity values' defaults changes the rendering")
			}
			o := renderChart(t, files, nil)
			c := &chartCheck{t: t, o: o}
			cfg := c.toolmeshConfigDoc()
			for _, k := range identityKeys {
				if _, ok := cfg[k]; ok {
					t.Errorf("config has %s with the identity values unset", k)
				}
			}
			for _, d := range o.deployments {
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.Secret != nil {
						t.Errorf("Deployment %s mounts Secret %s with the identity values unset", d.Name, v.Secret.SecretName)
					}
				}
			}
		})
	}
	// The check above sees a Secret when one is mounted.
	o := renderChart(t, []string{identityValues}, nil)
	n := 0
	for _, d := range o.deployments {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				n++
			}
		}
	}
	if n != 3 {
		t.Errorf("%s mounts %d Secret volumes, want 3", identityValues, n)
	}
}

// TestChartConfigPassesToolmeshValidation starts the toolmesh binary of
// this repository with each toolmesh container's command line and the
// config file the chart renders, on a copy of the files the pod would see
// (ConfigMap keys, and stand-ins for the Secret keys it projects): toolmesh
// validates its whole configuration at start, key files included, and
// exits on an error. Broken values must fail the same way.
func TestChartConfigPassesToolmeshValidation(t *testing.T) {
	bin := buildToolmesh(t)
	gateway := map[string]any{"mode": "gateway"}
	for _, tc := range []struct {
		name      string
		files     []string
		overrides map[string]any
		wantErr   string // in toolmesh's output; "" means it must serve
	}{
		{name: "gateway defaults"},
		{name: "sidecar identity", files: []string{identityValues}},
		{name: "gateway identity", files: []string{identityValues}, overrides: gateway},
		{name: "policy that does not compile", files: []string{identityValues}, overrides: map[string]any{
			"policies": map[string]any{"routes": map[string]any{"weather": []any{map[string]any{"name": "p", "effect": "allow", "when": "caller.("}}}}},
			wantErr: "policies"},
		{name: "issuer over plain http", files: []string{identityValues}, overrides: map[string]any{
			"auth": map[string]any{"default": map[string]any{"issuers": []any{map[string]any{"issuer": "http://login.example.com"}}}}},
			wantErr: "issuer"},
		{name: "upstreamAuth naming no credential", files: []string{identityValues}, overrides: map[string]any{
			"upstreamAuth": map[string]any{"services": map[string]any{"weather": map[string]any{"credential": "nope"}}}},
			wantErr: "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := renderChart(t, tc.files, tc.overrides)
			ran := 0
			for _, d := range o.deployments {
				for i := range d.Spec.Template.Spec.Containers {
					ct := &d.Spec.Template.Spec.Containers[i]
					if ct.Name != "extproc" && ct.Name != "xds" {
						continue
					}
					ran++
					out, err := startToolmesh(t, bin, o, d, ct)
					switch {
					case tc.wantErr == "" && err != nil:
						t.Errorf("%s/%s: %v\n%s", d.Name, ct.Name, err, out)
					case tc.wantErr != "" && err == nil:
						t.Errorf("%s/%s: toolmesh served; want it to refuse the config (%q)", d.Name, ct.Name, tc.wantErr)
					case tc.wantErr != "" && !strings.Contains(out, tc.wantErr):
						t.Errorf("%s/%s: toolmesh refused the config without naming %q:\n%s", d.Name, ct.Name, tc.wantErr, out)
					}
				}
			}
			if ran != 2 {
				t.Errorf("ran %d toolmesh containers, want extproc and xds", ran)
			}
		})
	}
}

// startToolmesh runs one toolmesh container of d on loopback: its files
// under a temporary root, its paths in the config file and flags moved
// there. It returns toolmesh's output and nil once /healthz answers, or
// the error it exited with.
func startToolmesh(t *testing.T, bin string, o *objects, d *appsv1.Deployment, ct *corev1.Container) (string, error) {
	t.Helper()
	root := t.TempDir()
	spec := &d.Spec.Template.Spec
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	var moves []string // old, new pairs for strings.NewReplacer
	for _, m := range ct.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Fatalf("%s: volume %s", ct.Name, m.Name)
		}
		files := map[string]string{}
		switch {
		case v.ConfigMap != nil:
			cm := o.configMaps[v.ConfigMap.Name]
			if cm == nil {
				t.Fatalf("%s: ConfigMap %s not rendered", ct.Name, v.ConfigMap.Name)
			}
			maps := cm.Data
			if m.SubPath != "" {
				maps = map[string]string{m.SubPath: cm.Data[m.SubPath]}
			}
			for k, s := range maps {
				files[k] = s
			}
		case v.Secret != nil:
			for _, it := range v.Secret.Items {
				files[it.Path] = standInSecret(t)
			}
		default:
			t.Fatalf("%s: volume %s is neither a ConfigMap nor a Secret", ct.Name, m.Name)
		}
		dir := filepath.Join(root, m.MountPath)
		if m.SubPath != "" {
			dir = filepath.Dir(dir)
			moves = append(moves, m.MountPath, filepath.Join(root, m.MountPath))
		} else {
			moves = append(moves, m.MountPath+"/", dir+"/")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, s := range files {
			if m.SubPath != "" {
				name = filepath.Base(m.MountPath)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	mover := strings.NewReplacer(moves...)
	cfgPath := filepath.Join(root, "etc/toolmesh/config.yaml")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatalf("%s: no config file at /etc/toolmesh/config.yaml: %v", ct.Name, err)
	}
	if err := os.WriteFile(cfgPath, []byte(mover.Replace(string(raw))), 0o600); err != nil {
		t.Fatal(err)
	}
	// The command line, with the listen addresses on free loopback ports.
	ports := loopbackPorts(t, 4)
	admin, next := "", 1
	args := []string{}
	for _, a := range ct.Args {
		name, val, ok := strings.Cut(a, "=")
		switch {
		case ok && name == "--admin-listen":
			admin = ports[0]
			a = name + "=" + admin
		case ok && strings.HasSuffix(name, "-listen") && name != "--envoy-listen":
			a = name + "=" + ports[next]
			next++
		case ok:
			a = name + "=" + mover.Replace(val)
		}
		args = append(args, a)
	}
	if admin == "" {
		t.Fatalf("%s: no --admin-listen", ct.Name)
	}
	args = append(args, "--drain-delay=0s")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	for {
		select {
		case err := <-done:
			if err == nil {
				err = fmt.Errorf("toolmesh %s exited without an error before serving", args[0])
			}
			return logs.String(), err
		case <-ctx.Done():
			stop()
			return logs.String(), fmt.Errorf("toolmesh %s did not answer /healthz in time", args[0])
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get("http://" + admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				stop()
				return logs.String(), nil
			}
		}
	}
}

// standInSecret is a random key of the size an operator would create.
func standInSecret(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestChartIdentityValuesListed keeps identityKeys in step with the config
// fields of internal/app.
func TestChartIdentityValuesListed(t *testing.T) {
	info := loadCmdInfo(t)
	for _, k := range identityKeys {
		if !info.configKeys[k] {
			t.Errorf("%s is not a toolmesh config field", k)
		}
	}
}

// TestChartWiringChecksCatch breaks the notifications and identity wiring
// of a good rendering one thing at a time; the chart checks must report it.
func TestChartWiringChecksCatch(t *testing.T) {
	info := loadCmdInfo(t)
	version := envoyVersion(t)
	replaceIn := func(t *testing.T, o *objects, cm, key, old, new string) {
		t.Helper()
		d := o.configMaps[cm].Data
		if !strings.Contains(d[key], old) {
			t.Fatalf("ConfigMap %s %s has no %q", cm, key, old)
		}
		d[key] = strings.Replace(d[key], old, new, 1)
	}
	for _, tc := range []struct {
		name    string
		files   []string
		breakIt func(t *testing.T, o *objects)
		want    string
	}{
		{"extproc Service without the notifications port", nil, func(t *testing.T, o *objects) {
			s := o.services["mcp-toolmesh-extproc"]
			s.Spec.Ports = slicesDelete(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "notifications" })
		}, "does not reach the notifications server"},
		{"circuit breakers without room for the streams", nil, func(t *testing.T, o *objects) {
			replaceIn(t, o, "mcp-toolmesh-envoy", "envoy.yaml", "max_requests: 26384", "max_requests: 16384")
		}, "toolmesh_extproc circuit breakers"},
		{"notifications addressed to the xds Service", nil, func(t *testing.T, o *objects) {
			replaceIn(t, o, "mcp-toolmesh-config", "config.yaml", "mcp-toolmesh-extproc.tools.svc.cluster.local:9003", "mcp-toolmesh-xds.tools.svc.cluster.local:9003")
		}, "does not select the extproc pods"},
		{"notifications flag without an address", nil, func(t *testing.T, o *objects) {
			replaceIn(t, o, "mcp-toolmesh-config", "config.yaml", "notificationsAddresses:\n- mcp-toolmesh-extproc.tools.svc.cluster.local:9003\n", "")
		}, "want the flag and one address"},
		{"sidecar notifications on every interface", []string{"ci/sidecar-values.yaml"}, func(t *testing.T, o *objects) {
			c := container(t, o, "mcp-toolmesh", "extproc")
			for i, a := range c.Args {
				if strings.HasPrefix(a, "--notifications-listen=") {
					c.Args[i] = "--notifications-listen=0.0.0.0:9003"
				}
			}
		}, "want loopback in Envoy's pod"},
		{"approval key not projected", []string{identityValues}, func(t *testing.T, o *objects) {
			for i := range o.deployments["mcp-toolmesh"].Spec.Template.Spec.Volumes {
				if v := &o.deployments["mcp-toolmesh"].Spec.Template.Spec.Volumes[i]; v.Name == "approval-keys" {
					v.Secret.Items = v.Secret.Items[:1]
				}
			}
		}, "/etc/toolmesh/approval/key-1 is not key key-1"},
		{"TLS files not mounted into Envoy", []string{identityValues}, func(t *testing.T, o *objects) {
			c := container(t, o, "mcp-toolmesh", "envoy")
			c.VolumeMounts = slicesDelete(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "downstream-tls" })
		}, "envoy: /etc/envoy-tls/tls.crt is not key"},
		{"approval key inline", []string{identityValues}, func(t *testing.T, o *objects) {
			replaceIn(t, o, "mcp-toolmesh-config", "config.yaml", "    id: k2\n", "    id: k2\n    env: APPROVAL_KEY\n")
		}, "want only id and file"},
		{"auth set by config but not by its value", nil, func(t *testing.T, o *objects) {
			o.configMaps["mcp-toolmesh-config"].Data["config.yaml"] += "auth: {default: {mode: off}}\n"
		}, "config auth present true, but value auth set false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireCaught(t, tc.files, info, version, tc.breakIt, tc.want)
		})
	}
}

func slicesDelete[T any](s []T, del func(T) bool) []T {
	out := s[:0:0]
	for _, v := range s {
		if !del(v) {
			out = append(out, v)
		}
	}
	return out
}
