//go:build wasip1

package guest

import "unsafe"

// The host writes each input into the buffer alloc hands out and reads each
// output from out. Both live in package variables so the guest's garbage
// collector keeps them alive until the next call, as the ABI promises.
var in, out []byte

//go:wasmexport abi_version
func abiVersion() uint32 { return ABIVersion }

// alloc returns a buffer of at least size bytes. It stays valid, and the
// host may write inputs of up to size bytes into it for any number of calls,
// until the next alloc.
//
//go:wasmexport alloc
func alloc(size uint32) unsafe.Pointer {
	if uint32(cap(in)) < size || cap(in) == 0 {
		in = make([]byte, max(size, 1))
	}
	in = in[:cap(in)]
	return unsafe.Pointer(unsafe.SliceData(in))
}

//go:wasmexport configure
func configure(ptr unsafe.Pointer, size uint32) uint64 {
	out = Setup(unsafe.Slice((*byte)(ptr), size))
	return pack(out)
}

//go:wasmexport filter
func filter(ptr unsafe.Pointer, size uint32) uint64 {
	out = process(out[:0], unsafe.Slice((*byte)(ptr), size))
	return pack(out)
}

func pack(b []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | uint64(len(b))
}
