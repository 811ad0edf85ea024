package guest

import (
	"errors"
	"fmt"
	"strconv"
	"unsafe"
)

// Every byte a guest touches costs: with the host's time limit on, wazero
// checks for interruption on each loop back-edge, which makes a byte-wise
// scan about ten times slower than native code. So the decoder copies the
// envelope once and hands out strings and raw values that point into that
// copy, scans each member once, and does not scan the payload at all: the
// ABI puts "arguments" or "result" last, so its value is simply the rest of
// the envelope.

var errVersion = errors.New("unsupported envelope version")

func decodeEnvelope(src []byte) (Request, error) {
	var r Request
	// One copy; every string and raw value below is a view into it, so
	// filters may keep them after the call.
	b := make([]byte, len(src))
	copy(b, src)
	v := -1
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return r, fmt.Errorf("decode envelope: %w", errSyntax)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i = len(b) // empty object: fall through to the version check
	}
	for i < len(b) {
		key, vi, err := memberKey(b, i)
		if err != nil {
			return Request{}, fmt.Errorf("decode envelope: %w", err)
		}
		i = vi
		if key == "arguments" || key == "result" {
			if raw, ok := lastValue(b, i); ok {
				r.setRaw(key, raw)
				break
			}
		}
		vend, err := r.decodeMember(b, i, key, &v)
		if err != nil {
			return Request{}, err
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return Request{}, fmt.Errorf("decode envelope: %w", errSyntax)
		}
		if b[i] == '}' {
			break
		}
		if b[i] != ',' {
			return Request{}, fmt.Errorf("decode envelope: %w", errSyntax)
		}
		i = skipSpace(b, i+1)
	}
	if v != ABIVersion {
		return Request{}, fmt.Errorf("%w %d (this SDK speaks %d)", errVersion, v, ABIVersion)
	}
	return r, nil
}

// memberKey reads the key of the member at b[i] and its colon; it returns
// the index of the value.
func memberKey(b []byte, i int) (key string, value int, err error) {
	if b[i] != '"' {
		return "", 0, errSyntax
	}
	kend, kesc, err := scanString(b, i)
	if err != nil {
		return "", 0, err
	}
	key = view(b[i+1 : kend-1])
	if kesc {
		key, _ = String(b[i:kend])
	}
	i = skipSpace(b, kend)
	if i >= len(b) || b[i] != ':' {
		return "", 0, errSyntax
	}
	return key, skipSpace(b, i+1), nil
}

// decodeMember decodes the value at b[i] of the member key into r (or v,
// the ABI version) and returns the index after it.
func (r *Request) decodeMember(b []byte, i int, key string, v *int) (int, error) {
	if i < len(b) && b[i] == '"' {
		end, esc, err := scanString(b, i)
		if err != nil {
			return 0, fmt.Errorf("decode envelope: %w", err)
		}
		s := view(b[i+1 : end-1])
		if esc {
			s, _ = String(b[i:end])
		}
		r.setString(key, s)
		return end, nil
	}
	end, err := skipValue(b, i)
	if err != nil {
		return 0, fmt.Errorf("decode envelope: %w", err)
	}
	raw := b[i:end:end] // capped: an append by the filter must not overwrite what follows
	if key == "v" {
		n, err := strconv.Atoi(view(raw))
		if err != nil {
			return 0, fmt.Errorf("decode envelope: bad version %q", raw)
		}
		*v = n
		return end, nil
	}
	r.setRaw(key, raw)
	return end, nil
}

// setString sets the string member key; unknown keys are ignored.
func (r *Request) setString(key, s string) {
	switch key {
	case "stage":
		r.Stage = Stage(s)
	case "filter":
		r.Filter = s
	case "route":
		r.Route = s
	case "era":
		r.Era = s
	case "version":
		r.Version = s
	case "method":
		r.Method = s
	case "tool":
		r.Tool = s
	case "toolVersion":
		r.ToolVersion = s
	}
}

// setRaw sets the raw member key; unknown keys are ignored.
func (r *Request) setRaw(key string, raw []byte) {
	switch key {
	case "headers":
		r.headers = raw
	case "arguments":
		r.Arguments = raw
	case "result":
		r.Result = raw
	}
}

// lastValue returns the value starting at b[i] when it is an object that
// runs to the envelope's closing brace, without scanning it: the host
// always writes the payload member last. ok is false when the shape is not
// that, and the caller then scans the value normally.
func lastValue(b []byte, i int) (raw []byte, ok bool) {
	end := len(b)
	for end > i && isSpace(b[end-1]) {
		end--
	}
	// b[end-1] is the envelope's '}', b[end-2] (after spaces) the value's.
	if end < i+2 || b[end-1] != '}' || i >= len(b) || b[i] != '{' {
		return nil, false
	}
	vend := end - 1
	for vend > i && isSpace(b[vend-1]) {
		vend--
	}
	if vend <= i || b[vend-1] != '}' {
		return nil, false
	}
	return b[i:vend:vend], true
}

// scanString returns the end of the string starting at b[i]=='"' and
// whether it contains escapes.
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped, nil
		}
	}
	return 0, false, errSyntax
}

// view returns b as a string without copying. b must never change again;
// decodeEnvelope's private copy never does.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func appendFailure(dst []byte, reason string) []byte {
	dst = append(dst, `{"action":"error","reason":`...)
	dst = appendString(dst, reason)
	return append(dst, '}')
}

func appendDecision(dst []byte, d Decision) []byte {
	action := d.Action
	if action == "" {
		action = ActionPass
	}
	dst = append(dst, `{"action":"`...)
	dst = append(dst, action...) // one of the Action constants: no escaping needed
	dst = append(dst, '"')
	if d.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = appendString(dst, d.Reason)
	}
	if d.RPCError {
		dst = append(dst, `,"as":"rpc_error"`...)
	}
	if d.Code != 0 {
		dst = append(dst, `,"code":`...)
		dst = strconv.AppendInt(dst, int64(d.Code), 10)
	}
	if len(d.Arguments) > 0 {
		dst = append(dst, `,"arguments":`...)
		dst = append(dst, d.Arguments...)
	}
	if len(d.Result) > 0 {
		dst = append(dst, `,"result":`...)
		dst = append(dst, d.Result...)
	}
	if len(d.Headers) > 0 {
		dst = append(dst, `,"headers":{`...)
		for i, h := range d.Headers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, h.Name)
			dst = append(dst, ':')
			dst = appendString(dst, h.Value)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}
