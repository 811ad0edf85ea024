//go:build !unix

package envoy

import "syscall"

// check cannot peek at a socket on this platform: an idle connection the
// upstream closed is found out by the request sent on it.
func (p *idlePeek) check(syscall.RawConn) bool { return true }
