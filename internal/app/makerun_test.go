package app

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestMakeRunStopsCleanly runs scripts/run_test.sh: `make run` on a
// pseudo-terminal, stopped by Ctrl-C, must exit 0 (not make's 130), and so
// must scripts/run.sh stopped by SIGINT without a terminal. Both scripts
// are linted with shellcheck, which `make test` installs or locates.
func TestMakeRunStopsCleanly(t *testing.T) {
	scripts := []string{"../../scripts/run.sh", "../../scripts/run_test.sh"}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck not found (%v): %v must be linted; install Debian's shellcheck package (make test-deps does)", err, scripts)
	}
	if out, err := exec.Command(sc, scripts...).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 7*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "bash", "../../scripts/run_test.sh").CombinedOutput(); err != nil {
		t.Fatalf("scripts/run_test.sh: %v\n%s", err, out)
	}
}
