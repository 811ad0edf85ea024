package app

import (
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestListenFailures runs `toolmesh run` with one of its addresses taken or
// malformed: the message names the flag and config key to change and what
// went wrong, and the exit code says whether it was the configuration.
func TestListenFailures(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().String()
	free := map[string]string{
		"--listen": "127.0.0.1:0", "--extproc-listen": "127.0.0.1:0",
		"--xds-listen": "127.0.0.1:0", "--admin-listen": "127.0.0.1:0",
	}
	tests := []struct {
		flag, value string
		wantCode    int
		want        []string
	}{
		{"--admin-listen", taken, exitError, []string{"admin server cannot listen on " + taken, "--admin-listen", "adminListen", "address already in use"}},
		{"--extproc-listen", taken, exitError, []string{"extproc server cannot listen on " + taken, "--extproc-listen", "extprocListen", "address already in use"}},
		{"--xds-listen", taken, exitError, []string{"xds server cannot listen on " + taken, "--xds-listen", "xdsListen", "address already in use"}},
		{"--listen", taken, exitError, []string{"dataplane server cannot listen on " + taken, "--listen", "config key listen", "address already in use"}},
		{"--listen", "8380", exitUsage, []string{`listen (--listen): "8380": want host:port, e.g. 127.0.0.1:8380`}},
		{"--admin-listen", "9090", exitUsage, []string{`adminListen (--admin-listen): "9090": want host:port, e.g. 127.0.0.1:9090`}},
		{"--xds-listen", ":18000", exitUsage, []string{`xdsListen (--xds-listen): ":18000" has no host`}},
		{"--extproc-listen", "localhost", exitUsage, []string{`extprocListen (--extproc-listen): "localhost": want host:port`}},
	}
	for _, tt := range tests {
		t.Run(tt.flag+"="+tt.value, func(t *testing.T) {
			args := []string{"run"}
			for f, v := range free {
				if f == tt.flag {
					v = tt.value
				}
				args = append(args, f, v)
			}
			var stdout, stderr lockedBuffer
			if code := execute(t.Context(), args, &stdout, &stderr, hooks{}); code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// TestListenErrorHints covers the causes a test cannot provoke on loopback
// as any user (root may bind port 80; other hosts' addresses are not local).
func TestListenErrorHints(t *testing.T) {
	for _, tt := range []struct {
		errno syscall.Errno
		want  string
	}{
		{syscall.EACCES, "permission denied: ports below 1024 need root or CAP_NET_BIND_SERVICE"},
		{syscall.EADDRNOTAVAIL, "the host is not an address of this machine"},
		{syscall.EADDRINUSE, "address already in use"},
	} {
		err := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", tt.errno)}
		got := listenError("admin", "127.0.0.1:80", fmt.Errorf("wrapped: %w", err)).Error()
		if !strings.Contains(got, tt.want) || !strings.Contains(got, "--admin-listen, config key adminListen") {
			t.Errorf("%v: %s", tt.errno, got)
		}
	}
}
