package mcp

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// A small, allocation-free JSON scanner. Request bodies are validated once
// (syntax, UTF-8, nesting depth) and then only the few members the protocol
// rules need are located; nothing is decoded into maps or reflected structs,
// and raw values (ids, arguments, schemas) are passed on byte for byte.

var (
	errSyntax = errors.New("invalid JSON")
	errDepth  = errors.New("JSON nested too deeply")
)

// isSpace reports whether c is JSON whitespace; one comparison for the
// bytes above the space, nearly all of them.
func isSpace(c byte) bool { return c <= ' ' && (c == ' ' || c == '\t' || c == '\n' || c == '\r') }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// trimSpace drops JSON whitespace around data.
func trimSpace(data []byte) []byte {
	i, j := 0, len(data)
	for i < j && isSpace(data[i]) {
		i++
	}
	for j > i && isSpace(data[j-1]) {
		j--
	}
	return data[i:j]
}

// validJSON reports whether data is exactly one JSON value, optionally
// surrounded by whitespace, in valid UTF-8 (RFC 8259 requires it; invalid
// UTF-8 would otherwise be silently replaced by one reader and kept by
// another), nested at most maxDepth containers deep (maxDepth <= 0:
// unbounded).
func validJSON(data []byte, maxDepth int) error { return scanJSON(data, maxDepth, nil) }

// scanJSON is validJSON that, when m is not nil and data is an object,
// also reads its members into m as the JSON-RPC envelope (see
// message.member), in the same pass. It is iterative, so hostile nesting
// costs no stack. A depth error is reported only for valid UTF-8: invalid
// UTF-8 anywhere is a syntax error, even after the depth limit.
func scanJSON(data []byte, maxDepth int, m *message) error {
	var err error
	if i := skipSpace(data, 0); m != nil && i < len(data) && data[i] == '{' {
		i, err = scanMessage(data, i, maxDepth, m)
		err = scanEnd(data, i, err)
		if err == nil {
			m.response = m.result != nil || m.errv != nil
		}
	} else {
		i, err = scanValue(data, i, 0, maxDepth)
		err = scanEnd(data, i, err)
	}
	if err == errDepth && !utf8.Valid(data) {
		return errSyntax
	}
	return err
}

// scanEnd is err, or a syntax error when anything but space follows the
// value that ended at i.
func scanEnd(data []byte, i int, err error) error {
	if err == nil && skipSpace(data, i) != len(data) {
		return errSyntax
	}
	return err
}

// scanMessage scans the object at i, as scanValue does, reading its
// members into m, and returns the index after it. Its members' values that
// are containers are scanned by scanValue; the rest here, which is all of
// nearly every request's envelope.
func scanMessage(data []byte, i, maxDepth int, m *message) (int, error) {
	n := len(data)
	if i = skipSpace(data, i+1); i < n && data[i] == '}' {
		return i + 1, nil
	}
	for {
		// A member's key starts at i.
		if i >= n || data[i] != '"' {
			return i, errSyntax
		}
		k, esc, ok := i, false, false
		if j := skipPlain(data, i+1); j < n && data[j] == '"' {
			i = j + 1
		} else if i, esc, ok = scanString(data, i); !ok {
			return i, errSyntax
		}
		slot := m.member(data[k:i], esc)
		if i = skipSpace(data, i); i >= n || data[i] != ':' {
			return i, errSyntax
		}
		i = skipSpace(data, i+1)
		v := i
		if i >= n {
			return i, errSyntax
		}
		var err error
		switch data[i] {
		case '"':
			if j := skipPlain(data, i+1); j < n && data[j] == '"' {
				i = j + 1
			} else if i, _, ok = scanString(data, i); !ok {
				err = errSyntax
			}
		case '{', '[':
			i, err = scanValue(data, i, 1, maxDepth)
		case 't', 'f', 'n':
			if i, ok = scanLiteral(data, i); !ok {
				err = errSyntax
			}
		default:
			if i, ok = ScanNumber(data, i); !ok {
				err = errSyntax
			}
		}
		if err != nil {
			return i, err
		}
		if slot != nil {
			*slot = data[v:i]
		}
		if i = skipSpace(data, i); i >= n {
			return i, errSyntax
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, errSyntax
		}
	}
}

// scanValue scans the value at i, inside depth open containers, and
// returns the index after it; the first error in input order stops it.
// UTF-8 is checked inside strings only (outside them every accepted byte
// is ASCII).
func scanValue(data []byte, i, depth, maxDepth int) (int, error) {
	var buf [64]byte
	stack := buf[:0] // open containers, '{' or '['
	n := len(data)
	for {
		// A value starts at i.
		if i >= n {
			return i, errSyntax
		}
		switch c := data[i]; c {
		case '{', '[':
			if maxDepth > 0 && depth+len(stack) >= maxDepth {
				return i, errDepth
			}
			stack = append(stack, c)
			i = skipSpace(data, i+1)
			if i < n && data[i] == c+2 { // '}' or ']'
				i++
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				goto key
			}
			continue
		case '"':
			if j := skipPlain(data, i+1); j < n && data[j] == '"' {
				i = j + 1
				break
			}
			var ok bool
			if i, _, ok = scanString(data, i); !ok {
				return i, errSyntax
			}
		case 't', 'f', 'n':
			var ok bool
			if i, ok = scanLiteral(data, i); !ok {
				return i, errSyntax
			}
		default:
			var ok bool
			if i, ok = ScanNumber(data, i); !ok {
				return i, errSyntax
			}
		}
		// A value ended at i: close containers or move to the next element.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			if i = skipSpace(data, i); i >= n {
				return i, errSyntax
			}
			top := stack[len(stack)-1]
			if data[i] == top+2 {
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			if data[i] != ',' {
				return i, errSyntax
			}
			i = skipSpace(data, i+1)
			if top == '{' {
				goto key
			}
			break
		}
		continue

	key:
		// An object's key starts at i; its value follows.
		if i >= n || data[i] != '"' {
			return i, errSyntax
		}
		if j := skipPlain(data, i+1); j < n && data[j] == '"' {
			i = j + 1
		} else {
			var ok bool
			if i, _, ok = scanString(data, i); !ok {
				return i, errSyntax
			}
		}
		if i = skipSpace(data, i); i >= n || data[i] != ':' {
			return i, errSyntax
		}
		i = skipSpace(data, i+1)
	}
}

// scanLiteral scans the true, false or null that starts at i and returns
// the index after it.
func scanLiteral(data []byte, i int) (int, bool) {
	switch data[i] {
	case 't':
		return i + 4, hasPrefix(data[i:], "true")
	case 'f':
		return i + 5, hasPrefix(data[i:], "false")
	}
	return i + 4, hasPrefix(data[i:], "null")
}

func hasPrefix(b []byte, s string) bool { return len(b) >= len(s) && string(b[:len(s)]) == s }

// plainByte marks the bytes that stand for themselves inside a JSON string:
// printable ASCII but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipPlain returns the index of the first byte from i on that does not
// stand for itself in a string.
func skipPlain(data []byte, i int) int {
	for i < len(data) && plainByte[data[i]] {
		i++
	}
	return i
}

// scanString scans a string starting at the quote at i and returns the
// index after its closing quote, and whether it holds an escape. Its bytes
// must be valid UTF-8.
func scanString(data []byte, i int) (int, bool, bool) {
	esc := false
	for i++; i < len(data); i++ {
		c := data[i]
		if plainByte[c] {
			continue
		}
		switch {
		case c == '"':
			return i + 1, esc, true
		case c == '\\':
			esc = true
			i++
			if i >= len(data) {
				return i, esc, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(data) {
					return i, esc, false
				}
				for _, h := range data[i+1 : i+5] {
					if !isHex(h) {
						return i, esc, false
					}
				}
				i += 4
			default:
				return i, esc, false
			}
		case c < 0x20:
			return i, esc, false
		default: // the first byte of a multi-byte sequence
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return i, esc, false
			}
			i += size - 1
		}
	}
	return i, esc, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// ScanNumber scans a JSON number, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?,
// at i and returns the index after it; ok is false when none is there.
func ScanNumber(data []byte, i int) (end int, ok bool) {
	n := len(data)
	if i < n && data[i] == '-' {
		i++
	}
	switch {
	case i < n && data[i] == '0':
		i++
	case i < n && '1' <= data[i] && data[i] <= '9':
		for i++; i < n && isDigit(data[i]); i++ {
		}
	default:
		return i, false
	}
	if i < n && data[i] == '.' {
		i++
		if i >= n || !isDigit(data[i]) {
			return i, false
		}
		for i++; i < n && isDigit(data[i]); i++ {
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= n || !isDigit(data[i]) {
			return i, false
		}
		for i++; i < n && isDigit(data[i]); i++ {
		}
	}
	return i, true
}

// The functions below assume input that validJSON accepted.

// endOfString returns the index after the string whose quote is at i.
func endOfString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

// endOfValue returns the index after the value that starts at i.
func endOfValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return endOfString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				j = endOfString(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(data)
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

// EachMember calls fn with the raw key (quotes included) and raw value of
// each member of obj, a JSON object (its first byte '{') that json.Valid
// accepted, in order, until fn returns false.
func EachMember(obj []byte, fn func(key, val []byte) bool) { members(obj, fn) }

// members calls fn with the raw key (quotes included) and raw value of each
// member of the object obj, in order, until fn returns false.
func members(obj []byte, fn func(key, val []byte) bool) {
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		k := endOfString(obj, i)
		key := obj[i:k]
		v := skipSpace(obj, k)
		v = skipSpace(obj, v+1) // past ':'
		e := endOfValue(obj, v)
		if !fn(key, obj[v:e]) {
			return
		}
		i = skipSpace(obj, e)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
			continue
		}
		return
	}
}

// keyName returns the decoded name of a raw member key; it allocates only
// for keys written with escapes.
func keyName(raw []byte) string {
	s, _ := stringValue(raw)
	return s
}

// stringValue decodes a raw JSON value that must be a string.
func stringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return "", false
			}
			return s, true
		}
	}
	return commonValue(inner), true
}

// commonValue is s as a string, shared rather than allocated for the values
// nearly every request carries (the JSON-RPC version, the method, the
// protocol version): a switch, which compares lengths before bytes, rather
// than a map's hash.
func commonValue(s []byte) string {
	switch string(s) {
	case "2.0":
		return "2.0"
	case "initialize":
		return "initialize"
	case "notifications/initialized":
		return "notifications/initialized"
	case "ping":
		return "ping"
	case "tools/list":
		return "tools/list"
	case "tools/call":
		return "tools/call"
	case "server/discover":
		return "server/discover"
	case "subscriptions/listen":
		return "subscriptions/listen"
	case Version20260728:
		return Version20260728
	case Version20251125:
		return Version20251125
	case Version20250618:
		return Version20250618
	case Version20250326:
		return Version20250326
	}
	return string(s)
}

// Kinds of raw JSON values, by their first byte.
func isObject(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }
func isArray(raw []byte) bool  { return len(raw) > 0 && raw[0] == '[' }
func isNull(raw []byte) bool   { return len(raw) > 0 && raw[0] == 'n' }
func isString(raw []byte) bool { return len(raw) > 0 && raw[0] == '"' }
func isNumber(raw []byte) bool { return len(raw) > 0 && (raw[0] == '-' || isDigit(raw[0])) }

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// U+2028 and U+2029 are escaped so the output is also safe JavaScript.
func appendString[T ~string | ~[]byte](dst []byte, s T) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:min(i+utf8.UTFMax, len(s))])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// decodeRune decodes the first rune of a short prefix (at most UTFMax
// bytes, so the conversion stays on the stack).
func decodeRune[T ~string | ~[]byte](p T) (rune, int) {
	var buf [utf8.UTFMax]byte
	n := copy(buf[:], p)
	return utf8.DecodeRune(buf[:n])
}
