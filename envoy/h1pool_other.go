//go:build !unix

package envoy

import "syscall"

// socketIdle cannot peek at a socket on this platform: an idle connection
// the upstream closed is found out by the request sent on it.
func socketIdle(syscall.RawConn, []byte) bool { return true }
