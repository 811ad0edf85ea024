package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolmesh/toolmesh/extproc"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/registry"
)

type noRoutes struct{}

func (noRoutes) Lookup(string) (string, *registry.Snapshot, bool) { return "", nil, false }

// TestPolicyReloadKeepsLastGood: SIGHUP reads the configuration again; a
// policy that does not compile is logged with its route and name, and the
// policies in force stay; a good one replaces them.
func TestPolicyReloadKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolmesh.yaml")
	write := func(body string) {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("policies:\n  routes:\n    core:\n      - {name: no-deletes, effect: deny, when: 'tool.name.startsWith(\"delete_\")'}\n")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	bindFlags(fs, flagSet{portal: true, listen: true, extproc: true, xds: true})
	if err := fs.Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	cfg, err := commandConfig(fs, modeRun)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := extproc.New(extproc.Config{}, noRoutes{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	a := &app{cfg: cfg, log: slog.New(slog.NewTextHandler(logs, nil)), extprocServer: srv,
		reloadConfig: func() (Config, error) { return loadConfig(fs) }}
	rt, err := a.startRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetRuntime(rt); err != nil {
		t.Fatal(err)
	}
	first := srv.Runtime().Policies
	if first.Route("core") == nil {
		t.Fatal("the configured policies are not in force")
	}

	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.reloadOnHangup(ctx, hup)
	}()
	defer func() { cancel(); <-done }()
	reload := func(want string) {
		t.Helper()
		hup <- syscall.SIGHUP
		for i := 0; !strings.Contains(logs.String(), want); i++ {
			if i > 500 {
				t.Fatalf("no %q in the logs:\n%s", want, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	write("policies:\n  routes:\n    core:\n      - {name: typo, effect: deny, when: 'caller.claim.roles == []'}\n")
	reload("the configuration does not load")
	if !strings.Contains(logs.String(), `policies: routes.core policy \"typo\"`) {
		t.Errorf("the error does not name the key, route and policy:\n%s", logs.String())
	}
	if srv.Runtime().Policies != first {
		t.Error("a failed reload replaced the policies in force")
	}
	// A configuration that loads but whose policies do not compile (a
	// reload does not rely on Validate): the last good set stays too.
	a.reloadRuntime(Config{AccessConfig: AccessConfig{Policies: &authz.Config{Default: []authz.Policy{{Name: "bad", Effect: "allow", When: "1"}}}}})
	if !strings.Contains(logs.String(), `policy reload failed; the policies in force stay`) ||
		!strings.Contains(logs.String(), `default policy \"bad\": when is of type int, not bool`) {
		t.Errorf("no reload error naming the policy:\n%s", logs.String())
	}
	if srv.Runtime().Policies != first {
		t.Error("policies that do not compile replaced the policies in force")
	}

	write("policies:\n  routes:\n    other:\n      - {name: authenticated, effect: allow, when: 'caller.authenticated'}\n")
	reload("authorization policies reloaded")
	if p := srv.Runtime().Policies; p == first || p.Route("other") == nil || p.Route("core") != nil {
		t.Error("the good configuration was not put in force")
	}
}
