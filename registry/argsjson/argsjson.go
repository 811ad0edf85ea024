// Package argsjson decodes a tools/call's arguments for input-schema
// validation, into the values the jsonschema library reads, in one pass.
package argsjson

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/toolmesh/toolmesh/mcp"
)

// A call's arguments are decoded for validation on every tools/call.
// jsonschema.UnmarshalJSON does it through an encoding/json Decoder, which
// allocates the decoder, its read buffer and its scanner state and scans
// the text twice. decodeArgs decodes the common documents in one pass into
// the same values; anything it is not sure of (a malformed document, deep
// nesting) it leaves to jsonschema.UnmarshalJSON, so it never has to tell
// valid from invalid JSON itself. FuzzDecodeArgs compares the two.

// maxArgsDepth is the nesting decodeArgs handles itself; deeper documents
// go to the library, which has its own limit.
const maxArgsDepth = 64

// Value is arguments as input-schema validation reads them:
// decodeArgs, else the library's decoder.
func Value(args []byte) (any, error) {
	if v, ok := decodeArgs(args); ok {
		return v, nil
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(args))
}

// decodeArgs decodes b, a whole JSON document, as jsonschema.UnmarshalJSON
// does: objects as map[string]any (a repeated key keeps its last value),
// arrays as []any, numbers as json.Number, strings as encoding/json
// unquotes them. ok false means "ask the library", not "invalid".
func decodeArgs(b []byte) (v any, ok bool) {
	p := argsParser{b: b}
	p.space()
	if v, ok = p.value(0); !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(b)
}

type argsParser struct {
	b []byte
	i int
}

func (p *argsParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *argsParser) value(depth int) (any, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		return s, true
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *argsParser) literal(lit string) bool {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return false
	}
	p.i += len(lit)
	return true
}

func (p *argsParser) object(depth int) (any, bool) {
	if depth > maxArgsDepth {
		return nil, false
	}
	p.i++ // {
	m := map[string]any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		k, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.space()
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		if end, ok := p.next('}'); !ok {
			return nil, false
		} else if end {
			return m, true
		}
	}
}

func (p *argsParser) array(depth int) (any, bool) {
	if depth > maxArgsDepth {
		return nil, false
	}
	p.i++ // [
	// Never nil, as encoding/json decodes [].
	a := []any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, true
	}
	for {
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if end, ok := p.next(']'); !ok {
			return nil, false
		} else if end {
			return a, true
		}
	}
}

// next reads what follows a member or element: a comma (and the space
// after it), or the closing byte, which reports end.
func (p *argsParser) next(closing byte) (end, ok bool) {
	p.space()
	if p.i >= len(p.b) {
		return false, false
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		p.space()
		return false, true
	case closing:
		p.i++
		return true, true
	}
	return false, false
}

// str decodes the string at p.i. One without escapes that is valid UTF-8
// is copied as is; any other is left to encoding/json, whose unquoting
// (escapes, surrogates, invalid UTF-8 replaced) the library's is.
func (p *argsParser) str() (string, bool) {
	start := p.i
	p.i++ // "
	plain := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if plain {
				return string(p.b[start+1 : p.i-1]), true
			}
			var s string
			if json.Unmarshal(p.b[start:p.i], &s) != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			plain = false
			p.i += 2 // the escaped byte cannot end the string
		case c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, n := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && n == 1 {
				plain = false
			}
			p.i += n
		}
	}
	return "", false
}

// number scans a JSON number (mcp.ScanNumber) and keeps its text, as
// encoding/json's UseNumber does.
func (p *argsParser) number() (any, bool) {
	end, ok := mcp.ScanNumber(p.b, p.i)
	if !ok {
		return nil, false
	}
	n := json.Number(p.b[p.i:end])
	p.i = end
	return n, true
}
