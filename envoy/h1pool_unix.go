//go:build unix

package envoy

import "syscall"

// check reports whether a connected socket has nothing to read: one recv
// with MSG_PEEK|MSG_DONTWAIT, which neither blocks nor consumes. EAGAIN
// means nothing arrived; 0 bytes means the peer closed (FIN); data or any
// other error means the connection cannot take a new request.
func (p *idlePeek) check(rc syscall.RawConn) bool {
	if p.fn == nil {
		p.fn = p.peek // made once per connection, not per check
	}
	p.idle = false
	err := rc.Read(p.fn)
	return err == nil && p.idle
}

func (p *idlePeek) peek(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	p.idle = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	return true // done: never wait for readability
}
