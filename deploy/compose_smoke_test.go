package deploy_test

import (
	"errors"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
)

// smokeScript is the Compose smoke run against real Envoy. Docker cannot
// run where the tests run, so the tests check the script and everything it
// targets, and run its --dry-run; the smoke run itself is a manual step
// (compose/README.md).
var smokeScript = filepath.Join(composeDir, "smoke.sh")

// smokeVar is an upper-case assignment at the start of a line of the script.
var smokeVar = regexp.MustCompile(`(?m)^([A-Z_]+)=(\S+)`)

// smokeTargets reads the script's target assignments (MCP_ADDR, ...).
func smokeTargets(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(smokeScript)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range smokeVar.FindAllStringSubmatch(string(raw), -1) {
		vars[m[1]] = m[2]
	}
	for _, k := range []string{"MCP_ADDR", "XDS_ADMIN", "EXTPROC_ADMIN", "ENVOY_SERVICE", "ENVOY_ADMIN_PORT", "XDS_CLUSTER", "ROUTE", "TOOLS_SERVICE"} {
		if vars[k] == "" {
			t.Fatalf("%s: no %s=", smokeScript, k)
		}
	}
	return vars
}

// stringConst reads the string constant name declared in the Go file rel
// (relative to the repository root). The probes live in the e2e module,
// which this module does not require: its MCP SDKs would follow, and the
// demo-services image build, whose context leaves e2e/ out, would need its
// go.mod.
func stringConst(t *testing.T, rel, name string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), rel, readRepoFile(t, rel), parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if id.Name != name || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s: %s is not a string literal", rel, name)
				}
				return constant.StringVal(constant.MakeFromLiteral(lit.Value, lit.Kind, 0))
			}
		}
	}
	t.Fatalf("%s: no constant %s", rel, name)
	return ""
}

// flagValue is the value of --name=value in a command.
func flagValue(cmd []string, name string) string {
	for _, a := range cmd {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// TestSmokeTargets checks that what smoke.sh talks to exists in the
// Compose stack: published ports that reach Envoy's MCP listener and the two
// toolmesh admin servers, Envoy's admin port and ADS cluster in the
// bootstrap, the probes' route in the Portal, and the service that stopping
// makes the route's Tool Services unreachable.
func TestSmokeTargets(t *testing.T) {
	vars := smokeTargets(t)
	cf := loadCompose(t)
	m := &composeModel{cf: cf}

	// published reports whether service publishes addr (127.0.0.1:port) to
	// container port want.
	published := func(service, addr string, want int) {
		t.Helper()
		host, port := splitHostPort(t, addr, addr)
		for _, p := range m.published(t, service) {
			if p.host == port {
				if host != "127.0.0.1" || p.container != want {
					t.Errorf("smoke.sh targets %s; %s publishes host port %d to container port %d, want %d", addr, service, port, p.container, want)
				}
				return
			}
		}
		t.Errorf("smoke.sh targets %s, which service %s does not publish", addr, service)
	}
	_, envoyListen := splitHostPort(t, "toolmesh --envoy-listen", flagValue(cf.Services["toolmesh"].Command, "envoy-listen"))
	published(vars["ENVOY_SERVICE"], vars["MCP_ADDR"], envoyListen)
	_, xdsAdmin := splitHostPort(t, "toolmesh --admin-listen", flagValue(cf.Services["toolmesh"].Command, "admin-listen"))
	published("toolmesh", vars["XDS_ADMIN"], xdsAdmin)
	if cf.Services["toolmesh-extproc"].NetworkMode != "service:toolmesh" {
		t.Fatalf("toolmesh-extproc no longer shares toolmesh's network namespace: update smoke.sh's EXTPROC_ADMIN check")
	}
	_, extprocAdmin := splitHostPort(t, "toolmesh-extproc --admin-listen", flagValue(cf.Services["toolmesh-extproc"].Command, "admin-listen"))
	published("toolmesh", vars["EXTPROC_ADMIN"], extprocAdmin)

	// Envoy: the service runs the pinned image with the repository's
	// bootstrap, whose admin port and ADS cluster the script reads.
	envoy, ok := cf.Services[vars["ENVOY_SERVICE"]]
	if !ok || envoy.Image != "envoyproxy/envoy:"+envoyVersion(t) {
		t.Errorf("smoke.sh ENVOY_SERVICE=%s: image %q, want envoyproxy/envoy:%s", vars["ENVOY_SERVICE"], envoy.Image, envoyVersion(t))
	}
	src := "../envoy/gateway.yaml"
	b := decodeBootstrap(t, src, readRepoFile(t, "envoy/gateway.yaml"))
	admin := b.GetAdmin().GetAddress().GetSocketAddress()
	if strconv.Itoa(int(admin.GetPortValue())) != vars["ENVOY_ADMIN_PORT"] || admin.GetAddress() != "127.0.0.1" {
		t.Errorf("smoke.sh ENVOY_ADMIN_PORT=%s (on loopback in the container); %s's admin is %s:%d", vars["ENVOY_ADMIN_PORT"], src, admin.GetAddress(), admin.GetPortValue())
	}
	ads := b.GetDynamicResources().GetAdsConfig().GetGrpcServices()
	if len(ads) != 1 || ads[0].GetEnvoyGrpc().GetClusterName() != vars["XDS_CLUSTER"] || vars["XDS_CLUSTER"] != wire.XDSCluster {
		t.Errorf("smoke.sh XDS_CLUSTER=%s; %s's ADS goes to %v, wire.XDSCluster is %s", vars["XDS_CLUSTER"], src, ads, wire.XDSCluster)
	}

	// The probes' route, and the service that serves its Tool Services.
	if probeRoute := stringConst(t, "e2e/contract/probes.go", "ProbeRoute"); vars["ROUTE"] != probeRoute {
		t.Errorf("smoke.sh ROUTE=%s, but the probes call %s", vars["ROUTE"], probeRoute)
	}
	if _, ok := cf.Services[vars["TOOLS_SERVICE"]]; !ok {
		t.Errorf("smoke.sh TOOLS_SERVICE=%s is not a service", vars["TOOLS_SERVICE"])
	}
	doc, err := os.ReadFile(filepath.Join(composeDir, "portal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := registry.ListingDecoder{Strict: true}.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range l.Routes {
		if r.Key != vars["ROUTE"] {
			continue
		}
		found = true
		for _, ts := range r.ToolServices {
			if u, err := url.Parse(ts.URL); err != nil || u.Hostname() != vars["TOOLS_SERVICE"] {
				t.Errorf("portal.yaml: route %s: Tool Service %s at %s: stopping %s would not make it unreachable", r.Key, ts.Name, ts.URL, vars["TOOLS_SERVICE"])
			}
		}
	}
	if !found {
		t.Errorf("smoke.sh ROUTE=%s is not a route of portal.yaml", vars["ROUTE"])
	}
}

// TestSmokeScript checks the script's shell (bash -n and shellcheck, which
// `make test` installs or locates) and runs its --dry-run: the dry run must pass on the
// repository's files and fail on a compose file whose Envoy image is not
// .envoy-version and on a Portal the timeout probe cannot time out on.
func TestSmokeScript(t *testing.T) {
	if out, err := exec.Command("bash", "-n", smokeScript).CombinedOutput(); err != nil {
		t.Fatalf("bash -n %s: %v\n%s", smokeScript, err, out)
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck not found (%v): %s must be linted; install Debian's shellcheck package (make test-deps does)", err, smokeScript)
	}
	if out, err := exec.Command(sc, smokeScript).CombinedOutput(); err != nil {
		t.Errorf("shellcheck %s: %v\n%s", smokeScript, err, out)
	}

	vars := smokeTargets(t)
	composeYAML, err := os.ReadFile(filepath.Join(composeDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	oldTag := strings.ReplaceAll(string(composeYAML), "envoyproxy/envoy:"+envoyVersion(t), "envoyproxy/envoy:v1.0.0")
	if oldTag == string(composeYAML) {
		t.Fatalf("compose.yaml does not name envoyproxy/envoy:%s", envoyVersion(t))
	}
	dir := t.TempDir()
	badCompose := filepath.Join(dir, "compose.yaml")
	badPortal := filepath.Join(dir, "portal.yaml")
	if err := os.WriteFile(badCompose, []byte(oldTag), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badPortal, []byte("routes:\n  - key: core\n    toolServices:\n      - {name: clock, url: \"http://tools:8081\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		env  []string
		// wantErr is a substring of the output of a failing dry run; ""
		// when the dry run must pass.
		wantErr string
	}{
		{name: "repository files"},
		{name: "Envoy image other than .envoy-version", env: []string{"SMOKE_COMPOSE_FILE=" + badCompose}, wantErr: "the version in .envoy-version"},
		{name: "clock without a short requestTimeout", env: []string{"SMOKE_PORTAL=" + badPortal}, wantErr: "is not shorter than the timeout probe"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("bash", smokeScript, "--dry-run")
			cmd.Env = append(os.Environ(), tc.env...)
			outb, err := cmd.CombinedOutput()
			out := string(outb)
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatalf("run %s: %v", smokeScript, err)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(out, tc.wantErr) {
					t.Fatalf("dry run: %v, want a failure saying %q\n%s", err, tc.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("dry run: %v\n%s", err, out)
			}
			want := []string{
				"smoke: Envoy image envoyproxy/envoy:" + envoyVersion(t) + " (.envoy-version)",
				"examples selected",
				"WOULD PROBE timeout",
				"smoke: targets mcp=" + vars["MCP_ADDR"] + " xds-admin=" + vars["XDS_ADMIN"],
				"smoke: dry run passed; nothing started",
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("dry run output lacks %q:\n%s", w, out)
				}
			}
			// docker compose config ran, or its skip says why.
			if !strings.Contains(out, "smoke: docker compose config: ok") &&
				!regexp.MustCompile(`smoke: skip docker compose config: \S.*not installed`).MatchString(out) {
				t.Errorf("dry run neither ran docker compose config nor said why not:\n%s", out)
			}
			// Every skipped example says why.
			for _, line := range strings.Split(out, "\n") {
				if rest, ok := strings.CutPrefix(line, "SKIP "); ok {
					if _, reason, _ := strings.Cut(rest, ": "); strings.TrimSpace(reason) == "" {
						t.Errorf("skipped without a reason: %s", line)
					}
				}
			}
			t.Logf("dry run:\n%s", out)
		})
	}
}
