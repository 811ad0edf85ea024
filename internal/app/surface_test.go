package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// routeTools is a legacy tools/list of route r through the data plane.
func routeTools(t *testing.T, p *process) []string {
	t.Helper()
	code, out := rpc(t, "http://"+p.addrs["dataplane"], "r", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		map[string]string{"MCP-Protocol-Version": "2025-11-25"})
	if code != 200 {
		t.Fatalf("tools/list: %d %v", code, out)
	}
	var names []string
	tools, _ := dig(out, "result", "tools").([]any)
	for _, tl := range tools {
		if m, ok := tl.(map[string]any); ok {
			names = append(names, m["name"].(string))
		}
	}
	slices.Sort(names)
	return names
}

// TestRunSurfaceReload: the surface block renames a tool; SIGHUP with a
// block that does not validate keeps it (logged, the entry named); one
// that does is applied at the next refresh.
func TestRunSurfaceReload(t *testing.T) {
	svc := startApprovalService(t)
	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	if err := os.WriteFile(portal, []byte(`{"routes":[{"key":"r","toolServices":[{"name":"db","url":"`+svc.url+`"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	write := func(surface string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte("refreshInterval: 200ms\nsurface:\n"+surface), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("  routes:\n    r:\n      tools:\n        drop: {name: drop_table}\n")
	p := startProcess(t, "run", "--portal", portal, "--config", cfg)
	if got := routeTools(t, p); !slices.Equal(got, []string{"drop_table"}) {
		t.Fatalf("tools = %q, want the virtual name only", got)
	}
	hangup := func(wantLog string) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(p.logs.String(), wantLog) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the logs after SIGHUP", wantLog)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	write("  routes:\n    r:\n      tools:\n        drop: {name: 'not a name'}\n")
	hangup("surface.routes.r.tools.drop.name")
	if got := routeTools(t, p); !slices.Equal(got, []string{"drop_table"}) {
		t.Fatalf("tools = %q after a bad reload, want the block in force", got)
	}
	write("  routes:\n    r:\n      tools:\n        drop: {name: remove_table}\n")
	hangup("surface reloaded")
	deadline := time.Now().Add(20 * time.Second)
	for got := routeTools(t, p); !slices.Equal(got, []string{"remove_table"}); got = routeTools(t, p) {
		if time.Now().After(deadline) {
			t.Fatalf("tools = %q, want the reloaded virtual name", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
