//go:build unix

package envoy

import "syscall"

// socketIdle reports whether a connected socket has nothing to read: one
// recv with MSG_PEEK|MSG_DONTWAIT, which neither blocks nor consumes.
// EAGAIN means nothing arrived; 0 bytes means the peer closed (FIN); data
// or any other error means the connection cannot take a new request.
func socketIdle(rc syscall.RawConn, buf []byte) bool {
	idle := false
	err := rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		idle = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true // done: never wait for readability
	})
	return err == nil && idle
}
