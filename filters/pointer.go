package filters

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// pointer is a parsed RFC 6901 JSON pointer: its unescaped reference tokens.
type pointer []string

// parsePointer parses a JSON pointer. The empty pointer (the whole document)
// is refused: redacting a whole result is a deny, not a redaction.
func parsePointer(s string) (pointer, error) {
	if s == "" {
		return nil, errors.New(`pointer "" names the whole document`)
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("pointer %q does not start with /", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		if !strings.Contains(p, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] != '~' {
				b.WriteByte(p[j])
				continue
			}
			if j+1 >= len(p) || (p[j+1] != '0' && p[j+1] != '1') {
				return nil, fmt.Errorf("pointer %q: ~ must be followed by 0 or 1", s)
			}
			if p[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		parts[i] = b.String()
	}
	return pointer(parts), nil
}

// String returns the pointer in RFC 6901 form.
func (p pointer) String() string {
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// replace sets the value p points to in doc (decoded with UseNumber) to v,
// if that value exists. It reports whether it replaced anything.
func (p pointer) replace(doc any, v any) bool {
	cur := doc
	for i, tok := range p {
		last := i == len(p)-1
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return false
			}
			if last {
				node[tok] = v
				return true
			}
			cur = next
		case []any:
			idx, ok := arrayIndex(tok, len(node))
			if !ok {
				return false
			}
			if last {
				node[idx] = v
				return true
			}
			cur = node[idx]
		default:
			return false
		}
	}
	return false
}

// arrayIndex parses an RFC 6901 array index: decimal, no leading zeros, in
// range ("-", past the end, never names an existing element).
func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	idx, err := strconv.Atoi(tok)
	if err != nil || idx >= n {
		return 0, false
	}
	return idx, true
}
