package eventstream

import (
	"bytes"
	"encoding/json"

	"github.com/toolmesh/toolmesh/mcp"
)

// Finding the response among a stream's events is asked of every event a
// federated server sends while the gateway waits for it, and a full decode
// of each (mcp.DecodeClientResponse) copied the whole result twice to
// answer yes or no. IsResponse answers from the message's top-level
// members instead, and falls back to that decode for anything unusual, so
// that it answers as the decode would on any input (FuzzIsResponse).

// Data returns an event's data, its data lines joined as Translator.Event
// joins them (ev without its blank line), and whether it has any. One data
// line is returned in place.
func Data(ev []byte) ([]byte, bool) {
	var data []byte
	n := 0
	for len(ev) > 0 {
		line, rest, _ := bytes.Cut(ev, []byte("\n"))
		ev = rest
		v, ok := dataLine(line)
		if !ok {
			continue
		}
		switch n++; n {
		case 1:
			data = v
		case 2:
			data = append(append(append([]byte(nil), data...), '\n'), v...)
		default:
			data = append(append(data, '\n'), v...)
		}
	}
	return data, n > 0
}

// dataLine returns the value of a data line (CR trimmed), if line is one.
func dataLine(line []byte) ([]byte, bool) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	v, ok := bytes.CutPrefix(line, []byte("data:"))
	return bytes.TrimPrefix(v, []byte(" ")), ok
}

// IsResponse reports whether data, one message of a server, is the
// JSON-RPC response to the request with id: what mcp.DecodeClientResponse
// and IsResponseTo say, without the decode when the message's top-level
// members are plain.
func IsResponse(data []byte, id json.RawMessage) bool {
	if is, sure := plainResponse(data, id); sure {
		return is
	}
	m, err := mcp.DecodeClientResponse(data)
	return err == nil && m.IsResponseTo(id)
}

// plainResponse is IsResponse for a message whose members the decode
// would read (jsonrpc, id, method, result, error) are spelled exactly, each
// once, with escape-free strings where a string is read, and no error
// object; sure is false for anything else. The decode matches member names
// regardless of case (and folds some non-ASCII letters), lets a later
// duplicate replace an earlier one and checks an error object's fields:
// those cases are left to it.
func plainResponse(b []byte, id json.RawMessage) (is, sure bool) {
	if !json.Valid(b) { // the decode fails on any syntax error
		return false, true
	}
	b = bytes.TrimSpace(b) // JSON whitespace only: b is valid
	if b[0] != '{' {
		return false, true // null decodes to nothing, anything else fails: not a response
	}
	var (
		jsonrpc, method, gotID []byte
		seen                   uint8 // the members read, one bit each
		result                 bool
	)
	sure = true
	mcp.EachMember(b, func(key, v []byte) bool {
		name := key[1 : len(key)-1]
		bit := memberBit(name)
		switch {
		case bit == 0:
			sure = bytes.IndexByte(name, '\\') < 0 && plainASCII(name) && !foldsToMember(name)
		case seen&bit != 0:
			sure = false // a duplicate: the last one counts
		case bit == bitJSONRPC || bit == bitMethod:
			switch {
			case v[0] == '"' && bytes.IndexByte(v, '\\') < 0:
				if bit == bitJSONRPC {
					jsonrpc = v[1 : len(v)-1]
				} else {
					method = v[1 : len(v)-1]
				}
			case string(v) == "null" && bit == bitMethod:
				// leaves the method empty
			default:
				sure = false
			}
		case bit == bitID:
			gotID = v
		case bit == bitResult:
			result = true // null included: the decode keeps it as raw "null"
		case bit == bitError:
			sure = string(v) == "null"
		}
		seen |= bit
		return sure
	})
	return sure && string(jsonrpc) == "2.0" && len(method) == 0 && string(gotID) == string(id) && result, sure
}

// The members of a JSON-RPC message the decode reads, one bit each.
const (
	bitJSONRPC uint8 = 1 << iota
	bitID
	bitMethod
	bitResult
	bitError
)

var memberNames = [...]string{"jsonrpc", "id", "method", "result", "error"}

func memberBit(name []byte) uint8 {
	for i, m := range memberNames {
		if string(name) == m {
			return 1 << i
		}
	}
	return 0
}

// foldsToMember reports whether name matches a member regardless of ASCII
// case, as the decode would match it.
func foldsToMember(name []byte) bool {
	for _, m := range memberNames {
		if bytes.EqualFold(name, []byte(m)) {
			return true
		}
	}
	return false
}

func plainASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
