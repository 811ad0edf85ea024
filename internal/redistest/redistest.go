// Package redistest starts a real redis-server on 127.0.0.1 for a test.
package redistest

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolmesh/toolmesh/internal/testport"
)

// Start starts redis-server on a free loopback port, with no persistence,
// stopped in t.Cleanup, and returns a client on it. A machine without
// redis-server fails the test: the stores' tests need the real thing.
func Start(t testing.TB) *redis.Client {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (%v): install redis-server (Debian: apt-get install redis-server), or run make test, which does", err)
	}
	port := testport.FreePort(t)
	var out bytes.Buffer
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))})
	t.Cleanup(func() { _ = c.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return c
		}
		select {
		case <-done:
			t.Fatalf("redis-server exited: %s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer within 30s: %v\n%s", port, err, out.String())
		}
	}
}
