package mcp

import (
	"testing"
	"unicode/utf8"
)

// The body's checks as they were before scanJSON did them in one pass with
// the reading of the envelope: validation (validate, then UTF-8), then
// parseMessage over the validated object. Kept only as the oracle of
// FuzzScanJSON and of the tests that compare the scanner with
// encoding/json.

// validate reports whether data is exactly one JSON value, optionally
// surrounded by whitespace, nested at most maxDepth containers deep
// (maxDepth <= 0: unbounded). It does not check UTF-8; see validJSON. It is
// iterative, so hostile nesting costs no stack.
func validate(data []byte, maxDepth int) error {
	var buf [64]byte
	stack := buf[:0] // open containers, '{' or '['
	n := len(data)
	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= n {
			return errSyntax
		}
		switch c := data[i]; c {
		case '{', '[':
			if maxDepth > 0 && len(stack) >= maxDepth {
				return errDepth
			}
			stack = append(stack, c)
			i = skipSpace(data, i+1)
			if i < n && data[i] == c+2 { // '}' or ']'
				i++
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				var ok bool
				if i, ok = twoPassKey(data, i); !ok {
					return errSyntax
				}
			}
			continue
		default:
			var ok bool
			if i, ok = twoPassScalar(data, i); !ok {
				return errSyntax
			}
		}
		// A value ended at i: close containers or move to the next element.
		for {
			i = skipSpace(data, i)
			if len(stack) == 0 {
				if i != n {
					return errSyntax
				}
				return nil
			}
			if i >= n {
				return errSyntax
			}
			top := stack[len(stack)-1]
			if data[i] == top+2 {
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			if data[i] != ',' {
				return errSyntax
			}
			i = skipSpace(data, i+1)
			if top == '{' {
				var ok bool
				if i, ok = twoPassKey(data, i); !ok {
					return errSyntax
				}
			}
			break
		}
	}
}

// twoPassScalar scans the string, literal or number that starts at i and
// returns the index after it.
func twoPassScalar(data []byte, i int) (int, bool) {
	switch data[i] {
	case '"':
		return twoPassString(data, i)
	case 't':
		return i + 4, hasPrefix(data[i:], "true")
	case 'f':
		return i + 5, hasPrefix(data[i:], "false")
	case 'n':
		return i + 4, hasPrefix(data[i:], "null")
	}
	return ScanNumber(data, i)
}

// twoPassValidJSON is validate plus the UTF-8 check RFC 8259 requires; invalid
// UTF-8 would otherwise be silently replaced by one reader and kept by
// another.
func twoPassValidJSON(data []byte, maxDepth int) error {
	if !utf8.Valid(data) {
		return errSyntax
	}
	return validate(data, maxDepth)
}

// twoPassKey scans `"key" :` starting at i and returns the index of the value
// after it.
func twoPassKey(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '"' {
		return i, false
	}
	i, ok := twoPassString(data, i)
	if !ok {
		return i, false
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return i, false
	}
	return skipSpace(data, i+1), true
}

// twoPassString scans a string starting at the quote at i and returns the
// index after its closing quote.
func twoPassString(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(data) {
					return i, false
				}
				for _, h := range data[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func twoPassParseMessage(obj []byte) message {
	var m message
	var result, errv []byte
	members(obj, func(key, val []byte) bool {
		k := memberKey(key)
		switch string(k) {
		case "jsonrpc":
			set(&m.jsonrpc, val, k, &m.dup)
		case "id":
			set(&m.id, val, k, &m.dup)
		case "method":
			set(&m.method, val, k, &m.dup)
		case "params":
			set(&m.params, val, k, &m.dup)
		case "result":
			set(&result, val, k, &m.dup)
		case "error":
			set(&errv, val, k, &m.dup)
		}
		return true
	})
	m.result, m.errv = result, errv
	m.response = result != nil || errv != nil
	return m
}

// FuzzScanJSON checks the one-pass scanJSON against the two passes it
// replaced: the same verdict (nil, errSyntax or errDepth) at every depth
// limit, and for an object the same envelope members, duplicate and
// response flag.
func FuzzScanJSON(f *testing.F) {
	seeds := append([]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		` {"jsonrpc" : "2.0" , "id":"x","method":"tools/call","params":{"name":"a","arguments":{"id":2}}} `,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","\u0069d":1,"id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":5,"result":{},"error":null}`,
		`{"jsonrpc":"2.0","id":5,"error":{"code":1},"error":2}`,
		`{"\ud800":1,"\udbff":2,"method":"m"}`,
		`{"a":[[[[{"b":"` + "\xff" + `"}]]]]}`,
		`[[[[[[` + "\xff",
		`{"a":"é世` + "\xed\xa0\x80" + `"}`,
		`{"params":[1,{"params":2}],"method":{"method":[]}}`,
	}, jsonSeeds...)
	for _, s := range seeds {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8) {
		var got message
		err := scanJSON(data, int(depth), &got)
		want := twoPassValidJSON(data, int(depth))
		if err != want {
			t.Fatalf("scanJSON(%q, %d) = %v, the two passes %v", data, depth, err, want)
		}
		if v := validJSON(data, int(depth)); v != want {
			t.Fatalf("validJSON(%q, %d) = %v, the two passes %v", data, depth, v, want)
		}
		if err != nil || !isObject(trimSpace(data)) {
			return
		}
		w := twoPassParseMessage(trimSpace(data))
		for _, f := range []struct {
			name      string
			got, want []byte
		}{
			{"jsonrpc", got.jsonrpc, w.jsonrpc}, {"id", got.id, w.id}, {"method", got.method, w.method},
			{"params", got.params, w.params}, {"result", got.result, w.result}, {"error", got.errv, w.errv},
		} {
			if (f.got == nil) != (f.want == nil) || string(f.got) != string(f.want) {
				t.Fatalf("%q: %s = %q, the two passes %q", data, f.name, f.got, f.want)
			}
		}
		if got.dup != w.dup || got.response != w.response {
			t.Fatalf("%q: dup %q response %v, the two passes %q %v", data, got.dup, got.response, w.dup, w.response)
		}
	})
}
