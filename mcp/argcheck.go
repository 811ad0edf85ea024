package mcp

import "strconv"

// A call's arguments are read by several parts of the gateway that decode
// JSON each their own way: policies (CEL), input-schema validation, the
// approval canonicalisation, WASM filters through the guest SDK, and the
// Tool Service behind them. Two inputs make them disagree: a repeated
// member name (encoding/json keeps the last copy, the guest SDK the first)
// and an escaped lone surrogate (encoding/json turns every one into U+FFFD,
// so "\ud800" and "\udbff" read alike). Both are refused before anything
// reads the arguments, so every reader sees one value. Invalid UTF-8 never
// gets here: validJSON refuses the whole body.

// maxLinearMembers is the object size up to which repeated names are found
// by comparing pairs; a larger object uses a set.
const maxLinearMembers = 16

// ArgumentsProblem returns why raw, a JSON value that validJSON accepted,
// cannot be read the same way by every reader: a repeated member name at
// any depth, or a string (value or name) holding an escaped lone
// surrogate. It returns "" when there is none.
func ArgumentsProblem(raw []byte) string {
	return valueProblem(trimSpace(raw))
}

func valueProblem(v []byte) string {
	switch {
	case isString(v):
		if loneSurrogate(v) {
			return "a string holds a lone UTF-16 surrogate escape"
		}
	case isObject(v):
		return objectProblem(v)
	case isArray(v):
		return arrayProblem(v)
	}
	return ""
}

func objectProblem(obj []byte) string {
	var why string
	var names [maxLinearMembers][]byte
	var set map[string]struct{}
	n := 0
	members(obj, func(key, val []byte) bool {
		if loneSurrogate(key) {
			why = "a member name holds a lone UTF-16 surrogate escape"
			return false
		}
		k := memberKey(key)
		dup := false
		switch {
		case set != nil:
			_, dup = set[string(k)]
			set[string(k)] = struct{}{}
		case n < maxLinearMembers:
			for _, o := range names[:n] {
				if string(o) == string(k) {
					dup = true
					break
				}
			}
			names[n] = k
			n++
		default:
			set = make(map[string]struct{}, 2*maxLinearMembers)
			for _, o := range names[:n] {
				set[string(o)] = struct{}{}
			}
			_, dup = set[string(k)]
			set[string(k)] = struct{}{}
		}
		if dup {
			why = "duplicate member " + strconv.Quote(clip(string(k)))
			return false
		}
		why = valueProblem(val)
		return why == ""
	})
	return why
}

func arrayProblem(arr []byte) string {
	i := skipSpace(arr, 1)
	for i < len(arr) && arr[i] != ']' {
		e := endOfValue(arr, i)
		if why := valueProblem(arr[i:e]); why != "" {
			return why
		}
		i = skipSpace(arr, e)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return ""
}

// loneSurrogate reports whether the raw JSON string s (quotes included)
// has a \u escape of a high surrogate not followed by one of a low
// surrogate, or of a low surrogate not preceded by a high one.
func loneSurrogate(s []byte) bool {
	for i := 1; i < len(s)-1; i++ {
		if s[i] != '\\' {
			continue
		}
		i++
		if s[i] != 'u' {
			continue // a one-byte escape
		}
		r, ok := hex4(s, i+1)
		i += 4
		if !ok {
			continue // validJSON refused it already
		}
		switch {
		case 0xDC00 <= r && r <= 0xDFFF:
			return true
		case 0xD800 <= r && r <= 0xDBFF:
			if i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
				return true
			}
			lo, ok := hex4(s, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 decodes the four hex digits at s[i:i+4].
func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
