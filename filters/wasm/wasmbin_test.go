package wasm

// A hand-assembled module lets tests reach ABI corners a Go guest cannot:
// a wrong ABI version, wrong signatures, a missing _initialize.

type fn struct {
	name            string
	params, results []byte // value types: 0x7f i32, 0x7e i64
	body            []byte // instructions, without the final end
}

const (
	i32 = 0x7f
	i64 = 0x7e
)

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func section(id byte, body []byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(body)))...), body...)
}

func vec(n int, items ...[]byte) []byte {
	b := uleb(uint64(n))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

// assemble builds a module with one page of memory (exported as "memory"),
// data placed at offset 0, and the given exported functions.
func assemble(data string, fns ...fn) []byte {
	var types, funcs, exports, codes [][]byte
	for i, f := range fns {
		types = append(types, append(append([]byte{0x60}, vec(len(f.params), f.params)...), vec(len(f.results), f.results)...))
		funcs = append(funcs, uleb(uint64(i)))
		exports = append(exports, append(name(f.name), append([]byte{0x00}, uleb(uint64(i))...)...))
		body := append(append([]byte{0x00}, f.body...), 0x0b) // no locals
		codes = append(codes, append(uleb(uint64(len(body))), body...))
	}
	exports = append(exports, append(name("memory"), 0x02, 0x00))
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, vec(len(types), types...))...)
	m = append(m, section(3, vec(len(funcs), funcs...))...)
	m = append(m, section(5, vec(1, []byte{0x00, 0x01}))...)
	m = append(m, section(7, vec(len(exports), exports...))...)
	m = append(m, section(10, vec(len(codes), codes...))...)
	seg := append([]byte{0x00, 0x41}, sleb(0)...)
	seg = append(append(seg, 0x0b), name(data)...)
	m = append(m, section(11, vec(1, seg))...)
	return m
}

func i32Const(v int64) []byte { return append([]byte{0x41}, sleb(v)...) }
func i64Const(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }

// abiModule is a complete, well-behaved mcpfilter/v1 module that answers
// pass, with knobs to break it.
func abiModule(version int64, filterResults []byte, withInitialize bool) []byte {
	const decision = `{"action":"pass"}`
	fns := []fn{
		{name: "abi_version", results: []byte{i32}, body: i32Const(version)},
		{name: "alloc", params: []byte{i32}, results: []byte{i32}, body: i32Const(1024)},
		{name: "filter", params: []byte{i32, i32}, results: filterResults, body: i64Const(int64(len(decision)))},
	}
	if len(filterResults) == 1 && filterResults[0] == i32 {
		fns[2].body = i32Const(0)
	}
	if withInitialize {
		fns = append(fns, fn{name: "_initialize"})
	}
	return assemble(decision, fns...)
}
