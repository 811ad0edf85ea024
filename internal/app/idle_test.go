package app

import (
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/idletest"
)

// TestIdleTimeouts: the admin and notifications servers close a keep-alive
// connection that stays without a request for their idle timeout (a short
// one here, through the test hook).
func TestIdleTimeouts(t *testing.T) {
	p := launch(t, hooks{idleTimeout: 50 * time.Millisecond}, "run", "--notifications-listen", "127.0.0.1:0")
	p.waitReady(t)
	for _, tc := range []struct{ server, path string }{{"admin", "/healthz"}, {"notifications", "/"}} {
		t.Run(tc.server, func(t *testing.T) { idletest.ExpectClose(t, p.addrs[tc.server], tc.path) })
	}
}
