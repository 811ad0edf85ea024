package guest

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// The host always sends well-formed JSON, so this scanner checks structure
// only as far as it needs to find values; it never panics and always makes
// progress, which the fuzz test holds it to.

var errSyntax = errors.New("guest: malformed JSON")

// maxDepth bounds nesting so a hostile document cannot run the scanner
// through deep recursion (it is iterative, but the bound keeps it honest).
const maxDepth = 512

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at b[i]=='"'.
func skipString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errSyntax
}

// skipValue returns the end of the JSON value that starts at b[i] (no
// leading space).
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
				if depth > maxDepth {
					return 0, errSyntax
				}
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errSyntax
	default:
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isSpace(b[i]) {
			i++
		}
		if i == start {
			return 0, errSyntax
		}
		return i, nil
	}
}

// eachField calls fn with the raw key (quotes included) and the raw value of
// every member of the JSON object in b. fn returns false to stop early.
func eachField(b []byte, fn func(key, value []byte) bool) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errSyntax
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errSyntax
		}
		kend, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i:kend]
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return errSyntax
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return err
		}
		if !fn(key, b[i:vend]) {
			return nil
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return errSyntax
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return nil
		default:
			return errSyntax
		}
	}
}

// keyIs reports whether the raw quoted key equals name. Keys with escapes
// are decoded first; the common case compares bytes without allocating.
func keyIs(raw []byte, name string) bool {
	if len(raw) == len(name)+2 && string(raw[1:len(raw)-1]) == name {
		return true
	}
	for _, c := range raw {
		if c == '\\' {
			s, ok := String(raw)
			return ok && s == name
		}
	}
	return false
}

// Field returns the raw JSON value of the member key of the JSON object obj.
func Field(obj []byte, key string) (value []byte, ok bool) {
	_ = eachField(obj, func(k, v []byte) bool {
		if keyIs(k, key) {
			value, ok = v, true
			return false
		}
		return true
	})
	return value, ok
}

// String decodes a raw JSON string value. ok is false when raw is not a
// JSON string.
func String(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	plain := true
	for _, c := range body {
		if c == '\\' || c == '"' {
			plain = false
			break
		}
	}
	if plain {
		return string(body), true
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '"' {
			return "", false
		}
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(body) {
			return "", false
		}
		switch body[i] {
		case '"', '\\', '/':
			out = append(out, body[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := decodeU(body[i+1:])
			if n == 0 {
				return "", false
			}
			i += n
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return string(out), true
}

// decodeU decodes the hex digits after `\u` (and a following low surrogate
// escape when the first is a high surrogate). n is the number of bytes used.
func decodeU(b []byte) (r rune, n int) {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 4 {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[:4]), 16, 32)
		return rune(v), err == nil
	}
	r, ok := hex4(b)
	if !ok {
		return 0, 0
	}
	if r >= 0xD800 && r < 0xDC00 && len(b) >= 10 && b[4] == '\\' && b[5] == 'u' {
		if lo, ok := hex4(b[6:]); ok && lo >= 0xDC00 && lo < 0xE000 {
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 10
		}
	}
	if r >= 0xD800 && r < 0xE000 {
		return utf8.RuneError, 4
	}
	return r, 4
}

// Quote returns s as a JSON string literal.
func Quote(s string) []byte { return appendString(nil, s) }

const hexDigits = "0123456789abcdef"

func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
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
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
