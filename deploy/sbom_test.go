package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sbomDeps are dependencies toolmesh chose on purpose; the SBOM must list
// each with the version go.mod selects.
var sbomDeps = []string{
	"github.com/envoyproxy/go-control-plane",
	"github.com/envoyproxy/go-control-plane/envoy",
	"google.golang.org/grpc",
	"github.com/tetratelabs/wazero",
	"github.com/redis/go-redis/v9",
	"github.com/prometheus/client_golang",
	"github.com/santhosh-tekuri/jsonschema/v6",
	"sigs.k8s.io/yaml",
	"github.com/spf13/cobra",
}

// cycloneDX is the part of a CycloneDX JSON document the test reads.
type cycloneDX struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component sbomComponent `json:"component"`
	} `json:"metadata"`
	Components []sbomComponent `json:"components"`
}

type sbomComponent struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
	Hashes  []struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	} `json:"hashes"`
	// Evidence holds the licenses the generator detected (-licenses
	// reports them as evidence, not as asserted licenses).
	Evidence *struct {
		Licenses []json.RawMessage `json:"licenses"`
	} `json:"evidence,omitempty"`
}

// TestSBOM builds toolmesh, generates its SBOM with scripts/sbom.sh (what
// `make sbom` and the image build run) and checks it against the module
// versions `go list -m` reports for the main module.
func TestSBOM(t *testing.T) {
	bin := buildToolmesh(t)
	out := filepath.Join(t.TempDir(), "toolmesh.cdx.json")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(repoRoot, "scripts", "sbom.sh"), bin, out, "v0.0.0-sbomtest")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/sbom.sh: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var bom cycloneDX
	if err := json.Unmarshal(raw, &bom); err != nil {
		t.Fatalf("SBOM is not JSON: %v", err)
	}
	if errs := record(func(r reporter) { checkSBOM(r, bom, goListModules(t)) }); len(errs) > 0 {
		t.Errorf("SBOM:\n%s", strings.Join(errs, "\n"))
	}
	if bom.Metadata.Component.Version != "v0.0.0-sbomtest" {
		t.Errorf("main component version %q, want the version passed to scripts/sbom.sh", bom.Metadata.Component.Version)
	}
}

// checkSBOM checks a CycloneDX SBOM of toolmesh: the main component is
// toolmesh's module, every chosen dependency is listed, and every listed
// module has the version of modules (go list -m), a matching package URL,
// a hash and a license.
func checkSBOM(t reporter, bom cycloneDX, modules map[string]string) {
	t.Helper()
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion == "" {
		t.Errorf("bomFormat %q specVersion %q, want CycloneDX", bom.BOMFormat, bom.SpecVersion)
	}
	if mc := bom.Metadata.Component; mc.Name != "github.com/toolmesh/toolmesh" || mc.Type != "application" {
		t.Errorf("main component %s (%s), want the application github.com/toolmesh/toolmesh", mc.Name, mc.Type)
	}
	listed := map[string]string{}
	for _, c := range bom.Components {
		listed[c.Name] = c.Version
		want, ok := modules[c.Name]
		switch {
		case !ok:
			t.Errorf("component %s is not a module of the build (go list -m all)", c.Name)
		case c.Version != want:
			t.Errorf("component %s version %s, go.mod selects %s", c.Name, c.Version, want)
		}
		if !strings.HasPrefix(c.PURL, "pkg:golang/"+c.Name+"@"+c.Version) {
			t.Errorf("component %s: purl %q does not name %s@%s", c.Name, c.PURL, c.Name, c.Version)
		}
		if len(c.Hashes) == 0 {
			t.Errorf("component %s has no hash", c.Name)
		}
		if c.Evidence == nil || len(c.Evidence.Licenses) == 0 {
			t.Errorf("component %s has no license", c.Name)
		}
	}
	for _, dep := range sbomDeps {
		if _, ok := listed[dep]; !ok {
			t.Errorf("dependency %s (go.mod %s) is not in the SBOM", dep, modules[dep])
		}
	}
}

// goListModules returns the version of every module in the main module's
// build list, as `go list -m all` reports it.
func goListModules(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	mods := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, version, _ := strings.Cut(line, " ")
		mods[path] = version
	}
	for _, dep := range sbomDeps {
		if mods[dep] == "" {
			t.Fatalf("go list -m all has no version for %s: is it still a dependency?", dep)
		}
	}
	return mods
}

// TestSBOMCheckFails shows checkSBOM rejecting an SBOM with a stale
// version, a missing dependency and a module the build does not have.
func TestSBOMCheckFails(t *testing.T) {
	modules := map[string]string{"github.com/spf13/cobra": "v1.10.2"}
	for _, dep := range sbomDeps {
		if modules[dep] == "" {
			modules[dep] = "v1.0.0"
		}
	}
	good := cycloneDX{BOMFormat: "CycloneDX", SpecVersion: "1.6"}
	good.Metadata.Component = sbomComponent{Type: "application", Name: "github.com/toolmesh/toolmesh"}
	for _, dep := range sbomDeps {
		c := sbomComponent{Type: "library", Name: dep, Version: modules[dep], PURL: "pkg:golang/" + dep + "@" + modules[dep] + "?type=module"}
		c.Hashes = append(c.Hashes, struct {
			Alg     string `json:"alg"`
			Content string `json:"content"`
		}{"SHA-256", "00"})
		c.Evidence = &struct {
			Licenses []json.RawMessage `json:"licenses"`
		}{[]json.RawMessage{json.RawMessage(`{"license":{"id":"Apache-2.0"}}`)}}
		good.Components = append(good.Components, c)
	}
	if errs := record(func(r reporter) { checkSBOM(r, good, modules) }); len(errs) > 0 {
		t.Fatalf("a good SBOM fails: %v", errs)
	}
	bad := good
	bad.Components = append([]sbomComponent(nil), good.Components[1:]...) // go-control-plane left out
	for i := range bad.Components {
		if bad.Components[i].Name == "github.com/spf13/cobra" {
			bad.Components[i].Version = "v1.9.0"
		}
	}
	bad.Components = append(bad.Components, sbomComponent{Name: "example.com/extra", Version: "v1.0.0", PURL: "pkg:golang/example.com/extra@v1.0.0"})
	errs := strings.Join(record(func(r reporter) { checkSBOM(r, bad, modules) }), "\n")
	for _, want := range []string{
		"dependency github.com/envoyproxy/go-control-plane (go.mod v1.0.0) is not in the SBOM",
		"component github.com/spf13/cobra version v1.9.0, go.mod selects v1.10.2",
		"component example.com/extra is not a module of the build",
		"component example.com/extra has no hash",
		"component example.com/extra has no license",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors do not say %q:\n%s", want, errs)
		}
	}
}

// TestDockerfileShipsSBOM checks that the image build generates the SBOM
// of its own binary with scripts/sbom.sh and copies it into the image,
// and that .dockerignore keeps the script in the build context.
func TestDockerfileShipsSBOM(t *testing.T) {
	df := parseDockerfile(t, "Dockerfile")
	if len(df.stages) != 2 {
		t.Fatalf("%d stages", len(df.stages))
	}
	build := strings.Join(df.stages[0].lines, "\n")
	if !strings.Contains(build, "sh scripts/sbom.sh /out/toolmesh /out/sbom.cdx.json") {
		t.Error("the build stage does not run scripts/sbom.sh on /out/toolmesh")
	}
	copied := false
	for _, l := range df.stages[1].lines {
		if fmt.Sprint(strings.Fields(l)) == "[COPY --from=build /out/sbom.cdx.json /usr/share/toolmesh/sbom.cdx.json]" {
			copied = true
		}
	}
	if !copied {
		t.Error("the runtime stage does not copy the SBOM to /usr/share/toolmesh/sbom.cdx.json")
	}
	if p := dockerignore(t).excludes("scripts/sbom.sh"); p != "" {
		t.Errorf(".dockerignore pattern %q leaves scripts/sbom.sh out of the build context", p)
	}
}
