package h2grpc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// referenceMessages parses a whole stream of length-prefixed messages at
// once: the messages, and the code of the error that stops it (OK if none;
// a trailing partial message is not an error).
func referenceMessages(wire []byte, max int) ([][]byte, codes.Code) {
	var msgs [][]byte
	for len(wire) >= prefixLen {
		if wire[0] > 1 {
			return msgs, codes.Internal
		}
		n := binary.BigEndian.Uint32(wire[1:])
		if uint64(n) > uint64(max) {
			return msgs, codes.ResourceExhausted
		}
		if wire[0] == 1 && n > 0 {
			return msgs, codes.Internal
		}
		if uint64(len(wire)-prefixLen) < uint64(n) {
			break
		}
		msgs = append(msgs, wire[prefixLen:prefixLen+int(n)])
		wire = wire[prefixLen+int(n):]
	}
	return msgs, codes.OK
}

// FuzzAssembler feeds a stream of gRPC messages split at arbitrary points
// (as DATA frames may split it): the assembler yields the messages the
// whole stream holds, and fails where it does.
func FuzzAssembler(f *testing.F) {
	msg := func(flag byte, body string) []byte {
		b := []byte{flag, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[1:], uint32(len(body)))
		return append(b, body...)
	}
	f.Add(msg(0, "hello"), []byte{1, 2, 3}, uint16(100))
	f.Add(append(msg(0, ""), msg(0, "abc")...), []byte{0, 5, 1}, uint16(3))
	f.Add(append(msg(0, "abc"), msg(1, "x")...), []byte{7}, uint16(10))
	f.Add(append(msg(1, ""), msg(2, "")...), []byte{3}, uint16(10))
	f.Add(msg(1, "too long"), []byte{}, uint16(2))
	f.Add(msg(0, string(make([]byte, 3000))), []byte{200, 255, 17}, uint16(2000))
	f.Fuzz(func(t *testing.T, wire, splits []byte, max uint16) {
		want, wantCode := referenceMessages(wire, int(max))
		a := assembler{max: int(max)}
		defer a.release()
		var got []*[]byte
		var err error
		rest := wire
		for i := 0; len(rest) > 0 && err == nil; i++ {
			k := len(rest)
			if i < len(splits) {
				k = min(int(splits[i]), len(rest))
			}
			got, err = a.feed(rest[:k], got)
			rest = rest[k:]
		}
		if status.Code(err) != wantCode {
			t.Fatalf("error %v, want code %v", err, wantCode)
		}
		if len(got) != len(want) {
			t.Fatalf("%d messages, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(*got[i], want[i]) {
				t.Fatalf("message %d: %q, want %q", i, *got[i], want[i])
			}
			putBuf(got[i])
		}
	})
}

// TestBufPool: buffers come back with the length asked and are reused by
// size class; odd capacities are never pooled.
func TestBufPool(t *testing.T) {
	for _, n := range []int{0, 1, 1024, 1025, 64 << 10, 64 << 20, 64<<20 + 1} {
		b := getBuf(n)
		if len(*b) != n {
			t.Fatalf("getBuf(%d) has length %d", n, len(*b))
		}
		if c := sizeClass(n); c >= 0 && cap(*b) != 1<<(c+minClassBits) {
			t.Errorf("getBuf(%d) capacity %d, not its class's", n, cap(*b))
		}
		putBuf(b)
	}
	odd := make([]byte, 3000)
	putBuf(&odd) // not a class capacity: dropped, not pooled
	if b := getBuf(3000); cap(*b) != 4096 {
		t.Errorf("getBuf(3000) capacity %d, want 4096", cap(*b))
	}
}
