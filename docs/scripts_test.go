package docs_test

import (
	"os/exec"
	"path/filepath"
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
	for _, s := range []string{"scripts/test.sh", "scripts/test-deps.sh", "scripts/build.sh", ".ci/run"} {
		scripts = append(scripts, filepath.Join(root, s))
	}
	if out, err := exec.Command(sc, scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}
