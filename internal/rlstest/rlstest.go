// Package rlstest runs the real global rate limit service for tests:
// envoyproxy/ratelimit, built from the Go module proxy at a pinned version
// into a cache directory, on 127.0.0.1 and stopped at the end of the test,
// on a real redis-server (internal/redistest). A machine that can build neither fails
// the test with what to install; nothing is mocked.
package rlstest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/testport"
)

// Version is the pinned envoyproxy/ratelimit module version (its main
// branch has no release tags after v1.4.0; this is a pseudo-version the
// module proxy serves). Its go.mod has no replace directives, so `go
// install` builds it as published.
const Version = "v1.4.1-0.20260122083618-3fb702589d36"

const pkg = "github.com/envoyproxy/ratelimit/src/service_cmd"

// BinEnv names a prebuilt service_cmd binary to use instead of building.
const BinEnv = "TOOLMESH_TEST_RATELIMIT_BIN"

var buildMu sync.Mutex

// Binary returns the path of envoyproxy/ratelimit's service_cmd: $BinEnv,
// else the cached build under the user cache directory, built first when
// missing (minutes the first time: the module and its dependencies are
// downloaded and compiled).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinEnv); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no user cache directory for the envoyproxy/ratelimit build (%v); set %s to a built service_cmd", err, BinEnv)
	}
	dir := filepath.Join(cache, "toolmesh-test", "envoy-ratelimit-"+Version)
	bin := filepath.Join(dir, "service_cmd")
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	t.Logf("building envoyproxy/ratelimit %s into %s (once; minutes)", Version, dir)
	cmd := exec.Command("go", "install", pkg+"@"+Version)
	// Built outside any module, at its own go.mod's versions.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build envoyproxy/ratelimit (go install %s@%s): %v\n%s\nthe global rate limit tests need it: "+
			"check that the Go module proxy is reachable, or set %s to a built service_cmd", pkg, Version, err, out, BinEnv)
	}
	// Rename is atomic: a test binary building at the same time wins or
	// loses whole.
	if err := os.Rename(filepath.Join(tmp, "service_cmd"), bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Service is a running envoyproxy/ratelimit.
type Service struct {
	// GRPC is the RLS gRPC address.
	GRPC string
}

// Start runs envoyproxy/ratelimit on redisAddr with config, the YAML of
// one domain's limits (domain: ..., descriptors: ...), and waits until its
// health check answers.
func Start(t testing.TB, redisAddr, config string) *Service {
	t.Helper()
	bin := Binary(t)
	root := t.TempDir()
	cfgDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "toolmesh.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcPort, httpPort, debugPort := freePort(t), freePort(t), freePort(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"HOST=127.0.0.1", "PORT="+strconv.Itoa(httpPort),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(grpcPort),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(debugPort),
		"USE_STATSD=false", "LOG_LEVEL=warn", "BACKEND_TYPE=redis",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true")
	start(t, "envoyproxy/ratelimit", cmd)
	health := fmt.Sprintf("http://127.0.0.1:%d/healthcheck", httpPort)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("envoyproxy/ratelimit not healthy at %s within 30s: %v", health, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline, not timing the test
	}
	return &Service{GRPC: net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort))}
}

// start runs cmd until the test ends; its output is logged when the test
// fails.
func start(t testing.TB, name string, cmd *exec.Cmd) {
	t.Helper()
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			mu.Lock()
			t.Logf("%s output:\n%s", name, out.String())
			mu.Unlock()
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func freePort(t testing.TB) int { return testport.FreePort(t) }

// PerCaller is the envoyproxy/ratelimit configuration of one toolmesh
// global limit named limit with by: [caller]: n calls per unit (second,
// minute, hour, day) for each caller on each route (docs/ratelimit.md).
func PerCaller(limit, unit string, n int) string {
	return fmt.Sprintf(`domain: toolmesh
descriptors:
  - key: toolmesh_limit
    value: %s
    descriptors:
      - key: route
        descriptors:
          - key: caller
            rate_limit: {unit: %s, requests_per_unit: %d}
`, limit, unit, n)
}
