package docs_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScriptsShellcheck lints the scripts behind the commands the README
// and CONTRIBUTING.md tell a reader to run (make test, make test-quick,
// make build, CI), with shellcheck, which `make test` installs or locates.
func TestScriptsShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck not found (%v): install Debian's shellcheck package (make test-deps does)", err)
	}
	var scripts []string
	for _, s := range []string{"scripts/test.sh", "scripts/test-deps.sh", "scripts/build.sh", "scripts/vulncheck.sh", ".ci/run"} {
		scripts = append(scripts, filepath.Join(root, s))
	}
	if out, err := exec.Command(sc, scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// TestVulncheckUnreachableDatabase: when govulncheck cannot fetch the
// vulnerability database, `make vulncheck` (scripts/vulncheck.sh) says
// so, naming the database, and exits 2, rather than failing with only
// govulncheck's network error. A .invalid host never resolves (RFC 2606).
func TestVulncheckUnreachableDatabase(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GOVULNCHECK_VERSION\s*:?=\s*(\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no GOVULNCHECK_VERSION in the Makefile")
	}
	const db = "https://vulndb.invalid"
	cmd := exec.Command("sh", "scripts/vulncheck.sh", string(m[1]), db, "internal/idletest")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2:\n%s", err, out)
	}
	if want := "the vulnerability database " + db + " cannot be reached or read"; !strings.Contains(string(out), want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
}
