// Command rawabi is a test-only WebAssembly filter written against the
// mcpfilter/v1 ABI directly, without the guest SDK. It shows the ABI is
// small enough to implement by hand, gives benchmarks the host's own cost
// (it answers without reading its input), and breaks the ABI on demand: the
// configuration (a JSON string) picks the misbehaviour.
package main

import "unsafe"

func main() {}

var (
	in, out []byte
	mode    string
)

//go:wasmexport abi_version
func abiVersion() uint32 { return 1 }

//go:wasmexport alloc
func alloc(size uint32) uint32 {
	if mode == `"badalloc"` {
		return 0xfffffff0 // past the end of memory
	}
	if uint32(cap(in)) < size || cap(in) == 0 {
		in = make([]byte, max(size, 1))
	}
	in = in[:cap(in)]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

//go:wasmexport configure
func configure(ptr unsafe.Pointer, size uint32) uint64 {
	mode = string(unsafe.Slice((*byte)(ptr), size))
	if mode == `"refuse"` {
		return pack([]byte(`{"action":"error","reason":"refusing this configuration"}`))
	}
	return pack([]byte(`{"action":"pass"}`))
}

//go:wasmexport filter
func filter(ptr unsafe.Pointer, size uint32) uint64 {
	switch mode {
	case `"badjson"`:
		return pack([]byte(`{"action":`))
	case `"badaction"`:
		return pack([]byte(`{"action":"allow"}`))
	case `"badptr"`:
		return uint64(0xfffffff0)<<32 | 64
	case `"notobject"`:
		return pack([]byte(`{"action":"rewrite","arguments":[1,2]}`))
	}
	return pack([]byte(`{"action":"pass"}`))
}

func pack(b []byte) uint64 {
	out = b
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | uint64(len(b))
}
