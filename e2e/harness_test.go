// Package e2e drives the whole request path the way a user meets it: the real
// toolmesh binary (`toolmesh run`: registry, extproc server, xDS server and the
// local data plane, which gets its configuration over ADS and talks to the
// extproc server over the ext_proc protocol) in front of Tool Services on
// loopback, with real MCP clients and raw HTTP on the other side.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/testport"
)

// toolmeshBin is the binary under test, built once by TestMain.
var toolmeshBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toolmesh-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	toolmeshBin = filepath.Join(dir, "toolmesh")
	args := []string{"build", "-o", toolmeshBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	// Built in the main module (the repository root), with its go.mod's
	// versions: e2e is a module of its own whose MCP SDKs could otherwise
	// raise the versions of shared dependencies in the binary under test.
	args = append(args, "./cmd/toolmesh")
	build := exec.Command("go", args...)
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build toolmesh:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// gateway is one running `toolmesh run` process.
type gateway struct {
	URL   string // the local data plane, http://127.0.0.1:port
	Admin string // the admin endpoint, http://127.0.0.1:port
	cmd   *exec.Cmd
	logs  *syncBuffer
	done  chan error
	// exited is set once done has been received from.
	exited bool
}

// syncBuffer collects the process output for the test log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort reserves a loopback port for a process the test starts
// (internal/testport: below the ephemeral range, so nothing else takes it
// before the process binds it).
func freePort(t testing.TB) string { return testport.Free(t) }

// startGateway runs `toolmesh run` on the Portal file at portal and waits
// until it is ready. extra flags are appended.
func startGateway(t testing.TB, portal string, extra ...string) *gateway {
	t.Helper()
	listen, extproc, xdsAddr, admin := freePort(t), freePort(t), freePort(t), freePort(t)
	args := []string{"run",
		"--listen", listen,
		"--extproc-listen", extproc,
		"--xds-listen", xdsAddr,
		"--admin-listen", admin,
		"--log-level", "debug",
	}
	if portal != "" {
		args = append(args, "--portal", portal)
	}
	args = append(args, extra...)
	g := &gateway{URL: "http://" + listen, Admin: "http://" + admin, logs: &syncBuffer{}, done: make(chan error, 1)}
	g.cmd = exec.Command(toolmeshBin, args...)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("start toolmesh: %v", err)
	}
	go func() { g.done <- g.cmd.Wait() }()
	t.Cleanup(func() {
		g.stop(t)
		if t.Failed() {
			t.Logf("toolmesh output:\n%s", tail(g.logs.String(), 200))
		}
	})
	g.waitReady(t, 60*time.Second)
	return g
}

// waitReady polls /readyz until it answers 200.
func (g *gateway) waitReady(t testing.TB, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-g.done:
			g.exited = true
			t.Fatalf("toolmesh exited before ready: %v\n%s", err, tail(g.logs.String(), 100))
		default:
		}
		resp, err := http.Get(g.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("toolmesh not ready after %s\n%s", limit, tail(g.logs.String(), 100))
}

// stop sends SIGTERM and waits for a graceful exit, killing it after 15 s.
func (g *gateway) stop(t testing.TB) {
	if g.exited {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-g.done:
		g.exited = true
		if err != nil {
			t.Errorf("toolmesh exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
		g.exited = true
		t.Errorf("toolmesh did not stop within 15s of SIGTERM")
	}
}

// get fetches an admin path and returns status and body.
func (g *gateway) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(g.Admin + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// eventually polls cond every 50 ms until it holds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		if cond() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
