package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolmesh/toolmesh/internal/testport"
)

// redisServer is a real redis-server on 127.0.0.1 for one test: no
// persistence, a port of its own, stopped in t.Cleanup. A test can stop and
// restart it on the same port. It can also be a replica, a cluster node or
// a sentinel (see redis_topology_test.go).
type redisServer struct {
	t        testing.TB
	bin      string
	port     int
	password string
	dir      string
	args     []string // more arguments: replica, cluster node
	conf     string   // a sentinel's configuration file (sentinels rewrite it)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  bytes.Buffer
}

// startRedis starts redis-server; password, when not empty, is required of
// clients. A machine without redis-server fails the test: the store's tests
// need the real thing.
func startRedis(t testing.TB, password string) *redisServer {
	t.Helper()
	return startRedisWith(t, password, nil, "")
}

// startRedisWith starts redis-server with more arguments, or, when conf is
// not empty, a sentinel that reads (and rewrites) the configuration conf.
func startRedisWith(t testing.TB, password string, args []string, conf string) *redisServer {
	t.Helper()
	s := newRedisServer(t, password)
	s.args, s.conf = args, conf
	s.start()
	t.Cleanup(s.stop)
	return s
}

// newRedisServer prepares a server with a free port and a directory of its
// own, not started.
func newRedisServer(t testing.TB, password string) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (%v): the Redis store tests need a real Redis; install redis-server (Debian: apt-get install redis-server)", err)
	}
	return &redisServer{t: t, bin: bin, port: freePort(t), password: password, dir: t.TempDir()}
}

func freePort(t testing.TB) int { return testport.FreePort(t) }

func (s *redisServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// url is the redis:// URL of the server, with its password.
func (s *redisServer) url() string {
	if s.password != "" {
		return fmt.Sprintf("redis://:%s@%s", s.password, s.addr())
	}
	return "redis://" + s.addr()
}

func (s *redisServer) start() {
	s.t.Helper()
	args := []string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--daemonize", "no", "--loglevel", "warning",
	}
	if s.conf != "" {
		args = []string{s.conf, "--sentinel", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
			"--dir", s.dir, "--daemonize", "no", "--loglevel", "warning"}
	}
	if s.password != "" {
		args = append(args, "--requirepass", s.password)
	}
	args = append(args, s.args...)
	s.mu.Lock()
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	if err := s.cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan struct{})
	s.done = done
	cmd := s.cmd
	s.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()

	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			s.t.Fatalf("redis-server exited: %s", s.output())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer: %v; output: %s", s.addr(), err, s.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *redisServer) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// stop ends the server (and waits for it); a stopped server stays stopped.
func (s *redisServer) stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// restart stops the server and starts a new, empty one on the same port.
func (s *redisServer) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

// client is a plain go-redis client for the test's own commands.
func (s *redisServer) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.addr(), Password: s.password, DisableIdentity: true, MaxRetries: -1})
}

// newRedisStore is a store on s with a short OpTimeout, closed in t.Cleanup.
func newRedisStore(t testing.TB, s *redisServer, opts RedisOptions) *RedisStore {
	t.Helper()
	if opts.URL == "" {
		opts.URL = s.url()
	}
	if opts.OpTimeout == 0 {
		opts.OpTimeout = 2 * time.Second
	}
	st, err := NewRedisStore(opts)
	if err != nil {
		t.Fatalf("NewRedisStore() = %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
