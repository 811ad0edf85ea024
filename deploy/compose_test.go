package deploy_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

const composeDir = "compose"

// composeFile is the part of the Compose specification the compose file
// uses; decoding is strict, so a misspelt key fails the test.
type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
}

type composeService struct {
	Image string `json:"image"`
	Build *struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
	} `json:"build"`
	Command     []string                     `json:"command"`
	Ports       []string                     `json:"ports"`
	Volumes     []string                     `json:"volumes"`
	DependsOn   map[string]composeDependency `json:"depends_on"`
	NetworkMode string                       `json:"network_mode"`
	ReadOnly    bool                         `json:"read_only"`
	Restart     string                       `json:"restart"`
	Healthcheck *struct {
		Test     []string `json:"test"`
		Interval string   `json:"interval"`
		Timeout  string   `json:"timeout"`
		Retries  int      `json:"retries"`
	} `json:"healthcheck"`
}

type composeDependency struct {
	Condition string `json:"condition"`
}

// demoServiceFlags are the flags of deploy/cmd/demo-services, each a
// service's listen address.
var demoServiceFlags = map[string]string{"clock": "clock", "calc": "calc", "text": "text"}

// redisPort is the port redis-server listens on when not told otherwise.
const redisPort = 6379

// loadCompose reads compose/compose.yaml: YAML anchors and merge keys are
// resolved, top-level x- extensions set aside, the rest decoded strictly.
func loadCompose(t *testing.T) composeFile {
	t.Helper()
	y, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(j, &top); err != nil {
		t.Fatal(err)
	}
	for k := range top {
		if strings.HasPrefix(k, "x-") {
			delete(top, k)
		}
	}
	j, _ = json.Marshal(top)
	var cf composeFile
	if err := yaml.UnmarshalStrict(j, &cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return cf
}

// composeModel is the compose file with what its processes listen on,
// per network namespace.
type composeModel struct {
	cf composeFile
	// listens maps a network namespace (the service that owns it) to its
	// listening ports and what each is ("xds-listen", "clock", ...).
	listens map[string]map[int]string
	// flags of each toolmesh service.
	flags map[string]map[string]string
}

// netns is the service whose network namespace s runs in.
func (m *composeModel) netns(s string) string {
	if owner, ok := strings.CutPrefix(m.cf.Services[s].NetworkMode, "service:"); ok {
		return owner
	}
	return s
}

func (m *composeModel) listen(t *testing.T, service, what, addr string) {
	t.Helper()
	host, port := splitHostPort(t, service+" "+what, addr)
	if host != "" && host != "0.0.0.0" {
		t.Errorf("%s: %s listens on %s: other containers cannot reach it", service, what, addr)
	}
	ns := m.netns(service)
	if m.listens[ns] == nil {
		m.listens[ns] = map[int]string{}
	}
	if other, dup := m.listens[ns][port]; dup {
		t.Errorf("%s: %s and %s both listen on port %d in the network namespace of %s", service, what, other, port, ns)
	}
	m.listens[ns][port] = what
}

// volumeSource returns the host file mounted at target in service s, as a
// path relative to the deploy module, checking that the mount is read-only.
func (m *composeModel) volumeSource(t *testing.T, s, target string) string {
	t.Helper()
	for _, v := range m.cf.Services[s].Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			if len(parts) != 3 || parts[2] != "ro" {
				t.Errorf("%s: volume %s is not read-only", s, v)
			}
			return filepath.Join(composeDir, parts[0])
		}
	}
	t.Errorf("%s: nothing is mounted at %s", s, target)
	return ""
}

func TestCompose(t *testing.T) {
	info := loadCmdInfo(t)
	cf := loadCompose(t)
	m := &composeModel{cf: cf, listens: map[string]map[int]string{}, flags: map[string]map[string]string{}}

	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cf.Services {
			if !yield(n) {
				return
			}
		}
	})
	if want := []string{"envoy", "redis", "toolmesh", "toolmesh-extproc", "tools"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}

	// Every service: an image to run or build, dependencies and volumes
	// that exist.
	for _, name := range names {
		s := cf.Services[name]
		if s.Image == "" {
			t.Errorf("%s: no image", name)
		}
		if s.Build != nil {
			ctx := filepath.Join(composeDir, s.Build.Context)
			df := filepath.Join(ctx, s.Build.Dockerfile)
			if st, err := os.Stat(ctx); err != nil || !st.IsDir() {
				t.Errorf("%s: build context %s: %v", name, s.Build.Context, err)
			}
			if _, err := os.Stat(df); err != nil {
				t.Errorf("%s: Dockerfile: %v", name, err)
			}
		}
		for dep, d := range s.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("%s: depends on %s, which is not a service", name, dep)
			}
			if d.Condition == "service_healthy" && cf.Services[dep].Healthcheck == nil {
				t.Errorf("%s: waits for %s to be healthy, which has no health check", name, dep)
			}
		}
		if owner, ok := strings.CutPrefix(s.NetworkMode, "service:"); ok {
			if _, exists := cf.Services[owner]; !exists {
				t.Errorf("%s: network_mode names %s, which is not a service", name, owner)
			}
			if len(s.Ports) > 0 {
				t.Errorf("%s: publishes ports but shares %s's network namespace", name, owner)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if _, err := os.Stat(filepath.Join(composeDir, src)); err != nil {
				t.Errorf("%s: volume %s: %v", name, v, err)
			}
		}
		if name != "redis" && name != "envoy" && !s.ReadOnly {
			t.Errorf("%s: root file system is writable", name)
		}
	}

	// What listens where.
	for _, name := range []string{"toolmesh", "toolmesh-extproc"} {
		s := cf.Services[name]
		sub, flags := info.checkArgs(t, name, s.Command)
		m.flags[name] = flags
		if sub != "xds" && sub != "extproc" {
			t.Errorf("%s runs %s", name, sub)
		}
		for _, f := range []string{"xds-listen", "extproc-listen", "admin-listen", "notifications-listen"} {
			if a, ok := flags[f]; ok {
				m.listen(t, name, name+" "+f, a)
			}
		}
	}
	for _, a := range cf.Services["tools"].Command {
		k, v, ok := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if _, known := demoServiceFlags[k]; !ok || !known {
			t.Errorf("tools: argument %q is not a demo-services flag", a)
			continue
		}
		m.listen(t, "tools", k, v)
	}
	m.listen(t, "redis", "redis", ":"+strconv.Itoa(redisPort))

	// toolmesh's files: its config, and the Portal the config names.
	for _, name := range []string{"toolmesh", "toolmesh-extproc"} {
		m.checkToolmeshConfig(t, info, name)
	}

	// Envoy: the official image at .envoy-version, with the repository's
	// gateway bootstrap, reaching both toolmesh servers.
	m.checkEnvoy(t)

	// Published ports reach something that listens.
	for _, name := range names {
		for _, p := range m.published(t, name) {
			if m.listens[m.netns(name)][p.container] == "" && !(name == "envoy" && p.container == m.envoyListenPort(t)) {
				t.Errorf("%s: publishes container port %d, on which nothing listens", name, p.container)
			}
		}
	}
	m.checkReadme(t)
}

// checkToolmeshConfig checks the config file a toolmesh service reads and
// the Portal it names.
func (m *composeModel) checkToolmeshConfig(t *testing.T, info cmdInfo, name string) {
	t.Helper()
	src := m.volumeSource(t, name, m.flags[name]["config"])
	if src == "" {
		return
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	for k := range cfg {
		if !info.configKeys[k] {
			t.Errorf("%s: %q is not a toolmesh config field", src, k)
		}
	}
	// Redis is the redis service.
	u, err := url.Parse(cfg["redis"].(string))
	if err != nil || u.Scheme != "redis" || u.Hostname() != "redis" {
		t.Errorf("%s: redis %q is not the redis service", src, cfg["redis"])
	} else if port := u.Port(); port != "" && port != strconv.Itoa(redisPort) {
		t.Errorf("%s: redis port %s", src, port)
	}
	// Change notifications: Envoy reaches the notifications server of
	// toolmesh-extproc at the address xds programs (ADR 0012).
	addrs, _ := cfg["notificationsAddresses"].([]any)
	if len(addrs) != 1 {
		t.Errorf("%s: notificationsAddresses %v, want the toolmesh-extproc notifications server", src, cfg["notificationsAddresses"])
	}
	for _, a := range addrs {
		host, port := splitHostPort(t, src+" notificationsAddresses", fmt.Sprint(a))
		if _, ok := m.cf.Services[host]; !ok {
			t.Errorf("%s: notificationsAddresses %v: %s is not a service", src, a, host)
		} else if what := m.listens[m.netns(host)][port]; what != "toolmesh-extproc notifications-listen" {
			t.Errorf("%s: notificationsAddresses %v, where %q listens, not toolmesh-extproc --notifications-listen", src, a, what)
		}
	}
	// The Portal is mounted, valid, and its Tool Services are services.
	portal := m.volumeSource(t, name, cfg["portal"].(string))
	if portal == "" {
		return
	}
	doc, err := os.ReadFile(portal)
	if err != nil {
		t.Fatal(err)
	}
	l, err := registry.ListingDecoder{Strict: true}.Decode(doc)
	if err != nil {
		t.Fatalf("%s: %v", portal, err)
	}
	for _, r := range l.Routes {
		for _, ts := range r.ToolServices {
			u, err := url.Parse(ts.URL)
			if err != nil {
				t.Errorf("%s: %s: %v", portal, ts.Name, err)
				continue
			}
			port, _ := strconv.Atoi(u.Port())
			if _, ok := m.cf.Services[u.Hostname()]; !ok {
				t.Errorf("%s: Tool Service %s at %s, which is not a service", portal, ts.Name, u.Host)
			} else if what := m.listens[m.netns(u.Hostname())][port]; what != ts.Name {
				t.Errorf("%s: Tool Service %s at %s, where %q listens", portal, ts.Name, u.Host, what)
			}
		}
	}
}

// envoyListenPort is the port xds programs Envoy's MCP listener on.
func (m *composeModel) envoyListenPort(t *testing.T) int {
	t.Helper()
	_, port := splitHostPort(t, "toolmesh --envoy-listen", m.flags["toolmesh"]["envoy-listen"])
	return port
}

func (m *composeModel) checkEnvoy(t *testing.T) {
	t.Helper()
	s := m.cf.Services["envoy"]
	if want := "envoyproxy/envoy:" + envoyVersion(t); s.Image != want {
		t.Errorf("envoy: image %s, want %s", s.Image, want)
	}
	i := slices.Index(s.Command, "-c")
	if i < 0 || i+1 >= len(s.Command) {
		t.Fatalf("envoy: command %q names no bootstrap (-c)", s.Command)
	}
	src := m.volumeSource(t, "envoy", s.Command[i+1])
	if abs, _ := filepath.Abs(src); abs != mustAbs(t, filepath.Join(repoRoot, "envoy", "gateway.yaml")) {
		t.Errorf("envoy: bootstrap %s, want the repository's envoy/gateway.yaml", src)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f := checkBootstrap(t, src, decodeBootstrap(t, src, raw))
	for cluster, flag := range map[string]string{wire.XDSCluster: "xds-listen", wire.ExtProcCluster: "extproc-listen"} {
		ep := f.endpoints[cluster]
		if ep == nil {
			continue // reported
		}
		host := ep.GetAddress()
		if _, ok := m.cf.Services[host]; !ok {
			t.Errorf("%s: %s goes to %s, which is not a service", src, cluster, host)
			continue
		}
		if what := m.listens[m.netns(host)][int(ep.GetPortValue())]; !strings.HasSuffix(what, " "+flag) {
			t.Errorf("%s: %s goes to %s:%d, where %q listens, not a toolmesh --%s", src, cluster, host, ep.GetPortValue(), what, flag)
		}
	}
	mcp := m.envoyListenPort(t)
	found := false
	for _, p := range m.published(t, "envoy") {
		found = found || p.container == mcp
	}
	if !found {
		t.Errorf("envoy: the MCP listener port %d (toolmesh --envoy-listen) is not published", mcp)
	}
}

type publishedPort struct {
	host, container int
}

// published parses a service's "[ip:]host:container" port mappings.
func (m *composeModel) published(t *testing.T, service string) []publishedPort {
	t.Helper()
	var out []publishedPort
	for _, p := range m.cf.Services[service].Ports {
		parts := strings.Split(p, ":")
		if len(parts) != 3 || net.ParseIP(parts[0]) == nil || !net.ParseIP(parts[0]).IsLoopback() {
			t.Errorf("%s: port %q is not published on a loopback address", service, p)
			continue
		}
		h, err1 := strconv.Atoi(parts[1])
		c, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil {
			t.Errorf("%s: port %q", service, p)
			continue
		}
		out = append(out, publishedPort{h, c})
	}
	return out
}

// readmeURL is a localhost URL in a command of the README.
var readmeURL = regexp.MustCompile(`(?:http://)?localhost:(\d+)(/[A-Za-z0-9/_-]*)?`)

// checkReadme checks that every localhost URL in compose/README.md goes to
// a published port, to MCP routes the Portal has and to the admin
// endpoints toolmesh serves.
func (m *composeModel) checkReadme(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(composeDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(composeDir, "portal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := registry.ListingDecoder{Strict: true}.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, r := range l.Routes {
		routes[r.PublicPath] = true
	}
	hostPorts := map[int]string{} // host port → "service container-port"
	for name := range m.cf.Services {
		for _, p := range m.published(t, name) {
			hostPorts[p.host] = name + " " + strconv.Itoa(p.container)
		}
	}
	admin := map[string]bool{"/healthz": true, "/readyz": true, "/health": true, "/metrics": true}
	matches := readmeURL.FindAllStringSubmatch(string(raw), -1)
	if len(matches) < 5 {
		t.Fatalf("README names only %d localhost URLs", len(matches))
	}
	for _, mt := range matches {
		port, _ := strconv.Atoi(mt[1])
		path := mt[2]
		target, ok := hostPorts[port]
		if !ok {
			t.Errorf("README: %s: port %d is not published", mt[0], port)
			continue
		}
		service, cport, _ := strings.Cut(target, " ")
		cp, _ := strconv.Atoi(cport)
		switch {
		case service == "envoy":
			if path != "" && path != "/" && !routes[path] {
				t.Errorf("README: %s: %s is not a route of portal.yaml", mt[0], path)
			}
		case strings.HasSuffix(m.listens[m.netns(service)][cp], "admin-listen"):
			if path != "" && !admin[path] {
				t.Errorf("README: %s: toolmesh's admin server has no %s", mt[0], path)
			}
		default:
			t.Errorf("README: %s goes to %s", mt[0], target)
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
