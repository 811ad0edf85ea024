// Package testport picks loopback ports for processes that tests start
// (toolmesh run, redis-server, the rate limit service), which must be told
// a port before they bind it.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var handedOut sync.Map // port → true: every port Free tried in this process

// Free returns 127.0.0.1:PORT, a port that could be listened on a moment
// ago. It comes from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), so no outgoing connection and no
// listener on port 0 can take it in the window before the process binds
// it: on a loaded machine running many tests at once, ports from that range
// were taken in between (bind: address already in use). Only another Free
// caller can collide, and it picks at random among thousands of ports; in
// one test process it never hands out a port twice, so the ports one test
// asks for at once (toolmesh's listener, extproc, xDS and admin) differ
// (two of four once came out equal, and toolmesh could not bind the second).
func Free(t testing.TB) string {
	t.Helper()
	low := ephemeralLow()
	for range 100 {
		port := 10000 + rand.IntN(low-10000)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Fatalf("no free loopback port among 100 tried below %d", low)
	return ""
}

// FreePort is Free's port number.
func FreePort(t testing.TB) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(Free(t))
	n, _ := strconv.Atoi(p)
	return n
}

// ephemeralLow is the low end of the kernel's ephemeral port range
// (Linux's default 32768 where it cannot be read).
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				return n
			}
		}
	}
	return 32768
}
