package h2grpc

import (
	"encoding/binary"
	"math/bits"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gRPC length-prefixed messages (grpc/grpc doc/PROTOCOL-HTTP2.md,
// Length-Prefixed-Message): a compressed flag byte, a 4-byte big-endian
// length, the message.
const prefixLen = 5

// assembler reassembles the messages of one stream from its DATA frame
// payloads, however they are split, so that the receiver is woken once per
// whole message rather than per frame (Envoy's gRPC client hands its
// callbacks whole messages from Grpc::Decoder,
// source/common/grpc/codec.cc, via AsyncStreamImpl::onData in
// source/common/grpc/async_client_impl.cc). Used by the connection's reader
// goroutine only.
type assembler struct {
	max  int // largest message accepted
	hdr  [prefixLen]byte
	hdrN int
	cur  *[]byte // message being filled, from the pool
	n    int     // bytes of cur filled
}

// feed consumes p and appends each message it completes to out. An error
// is a status for the stream; the assembler is then unusable.
func (a *assembler) feed(p []byte, out []*[]byte) ([]*[]byte, error) {
	for len(p) > 0 {
		if a.cur == nil {
			k := copy(a.hdr[a.hdrN:], p)
			a.hdrN += k
			p = p[k:]
			if a.hdrN < prefixLen {
				break
			}
			a.hdrN = 0
			flag, size := a.hdr[0], binary.BigEndian.Uint32(a.hdr[1:])
			// Grpc::Decoder (source/common/grpc/codec.cc) fails on a
			// flag byte other than 0 and 1 and on a length over the
			// limit (ResourceExhausted); AsyncStreamImpl::onData then
			// fails a non-empty message with the compressed flag
			// (Internal): no grpc-encoding is negotiated, as Envoy's
			// client offers none. An empty one passes.
			if flag&^1 != 0 {
				return out, status.Errorf(codes.Internal, "grpc: unsupported flags 0x%02x on a received message", flag)
			}
			if uint64(size) > uint64(a.max) {
				return out, status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, a.max)
			}
			if flag != 0 && size > 0 {
				return out, status.Error(codes.Internal, "grpc: compressed flag set on a received message; compression is not supported")
			}
			a.cur, a.n = getBuf(int(size)), 0
		}
		b := *a.cur
		k := copy(b[a.n:], p)
		a.n += k
		p = p[k:]
		if a.n == len(b) {
			out = append(out, a.cur)
			a.cur = nil
		}
	}
	return out, nil
}

// release returns a message being filled to the pool.
func (a *assembler) release() {
	if a.cur != nil {
		putBuf(a.cur)
		a.cur = nil
	}
}

// Receive buffers come from pools by power-of-two capacity, from 1 KiB to
// 64 MiB; larger messages get a buffer of their own. Not grpc-go's
// exported pools (mem.DefaultBufferPool, mem.NewBinaryTieredBufferPool):
// they clear every buffer they hand out, megabytes for a large tools/list
// answer that the assembler overwrites at once.
const (
	minClassBits = 10
	maxClassBits = 26
)

var bufPools [maxClassBits - minClassBits + 1]sync.Pool // *[]byte

// sizeClass is the pool index for a buffer of n bytes, or -1.
func sizeClass(n int) int {
	if n <= 1<<minClassBits {
		return 0
	}
	c := bits.Len(uint(n-1)) - minClassBits
	if c >= len(bufPools) {
		return -1
	}
	return c
}

// getBuf returns a buffer of length n.
func getBuf(n int) *[]byte {
	c := sizeClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if bp, _ := bufPools[c].Get().(*[]byte); bp != nil {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<(c+minClassBits))
	return &b
}

// putBuf returns a buffer from getBuf to its pool.
func putBuf(bp *[]byte) {
	c := sizeClass(cap(*bp))
	if c < 0 || cap(*bp) != 1<<(c+minClassBits) {
		return
	}
	bufPools[c].Put(bp)
}
