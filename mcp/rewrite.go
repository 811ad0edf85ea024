package mcp

import "bytes"

// Byte-level edits of JSON-RPC messages passed to and from federated MCP
// servers: only the members that must change are touched, everything else
// (member order, spacing, numbers, escapes) stays byte for byte.

// memberSpan locates member key of the object obj: the offsets of the whole
// member (from its key to its value's end) and of its value. found is false
// when obj has no such member.
func memberSpan(obj []byte, key string) (start, valStart, valEnd int, found bool) {
	members(obj, func(k, v []byte) bool {
		if string(memberKey(k)) != key {
			return true
		}
		// k and v are subslices of obj: their offsets follow from capacities.
		start = cap(obj) - cap(k)
		valStart = cap(obj) - cap(v)
		valEnd = valStart + len(v)
		found = true
		return false
	})
	return
}

// SetMember returns obj with member key set to val (raw JSON): replaced in
// place when present, appended otherwise. obj must be a JSON object.
func SetMember(obj []byte, key string, val []byte) []byte {
	if !isObject(obj) {
		return obj
	}
	_, vs, ve, ok := memberSpan(obj, key)
	if ok {
		out := make([]byte, 0, len(obj)-(ve-vs)+len(val))
		out = append(out, obj[:vs]...)
		out = append(out, val...)
		return append(out, obj[ve:]...)
	}
	end := bytes.LastIndexByte(obj, '}')
	if end < 0 {
		return obj
	}
	empty := skipSpace(obj, 1) >= end
	out := make([]byte, 0, len(obj)+len(key)+len(val)+4)
	out = append(out, obj[:end]...)
	if !empty {
		out = append(out, ',')
	}
	out = appendString(out, key)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, obj[end:]...)
}

// prependMember returns obj with member key:val inserted first.
func prependMember(obj []byte, key string, val []byte) []byte {
	i := skipSpace(obj, 1)
	out := make([]byte, 0, len(obj)+len(key)+len(val)+4)
	out = append(out, obj[:1]...)
	out = appendString(out, key)
	out = append(out, ':')
	out = append(out, val...)
	if i < len(obj) && obj[i] != '}' {
		out = append(out, ',')
	}
	return append(out, obj[1:]...)
}

// DeleteMember returns obj without member key (unchanged when absent).
func DeleteMember(obj []byte, key string) []byte {
	if !isObject(obj) {
		return obj
	}
	start, _, ve, ok := memberSpan(obj, key)
	if !ok {
		return obj
	}
	// Take the following comma, or else the preceding one.
	end := skipSpace(obj, ve)
	if end < len(obj) && obj[end] == ',' {
		end = skipSpace(obj, end+1)
	} else {
		j := start - 1
		for j > 0 && isSpace(obj[j]) {
			j--
		}
		if obj[j] == ',' {
			start = j
		}
		end = ve
	}
	out := make([]byte, 0, len(obj)-(end-start))
	out = append(out, obj[:start]...)
	return append(out, obj[end:]...)
}

// Member returns the raw value of member key of obj, nil when absent.
func Member(obj []byte, key string) []byte {
	if !isObject(obj) {
		return nil
	}
	_, vs, ve, ok := memberSpan(obj, key)
	if !ok {
		return nil
	}
	return obj[vs:ve]
}

// editParams applies fn to params (nil when absent) and puts the result
// back into the message msg. A params of null, which toolmesh takes as
// absent, is left out: JSON-RPC 2.0 allows only an object or an array
// there, and servers built on the TypeScript SDK refuse null.
func editParams(msg []byte, fn func(params []byte) []byte) []byte {
	p := Member(msg, "params")
	if p != nil && !isObject(p) {
		if string(p) == "null" {
			msg = DeleteMember(msg, "params")
		}
		p = nil
	}
	np := fn(p)
	if np == nil || bytes.Equal(np, p) {
		return msg
	}
	return SetMember(msg, "params", np)
}

// UpstreamRequest says how a client's request body becomes the body sent
// to a federated MCP server.
type UpstreamRequest struct {
	// NamePath names the member to rename ({"name"}, or {"ref", "name"} for
	// completion/complete); nil renames nothing.
	NamePath []string
	Name     string // the upstream name
	// ClientEra and UpstreamEra are the eras of the client's request and
	// of the server.
	ClientEra, UpstreamEra Era
	// Client is the implementation named in _meta when a legacy request
	// goes to a 2026-07-28 server.
	Client Implementation
	// TraceMeta are the W3C trace-context keys (traceparent, tracestate,
	// baggage) of the gateway's span, set in params._meta so the server
	// continues the trace (2026-07-28 _meta trace context); they replace
	// the client's. Empty leaves _meta's trace keys as they are.
	TraceMeta map[string]string
}

// traceMetaKeys are the _meta members of W3C trace context, in the order
// they are written.
var traceMetaKeys = []string{"traceparent", "tracestate", "baggage"}

// statelessMetaKeys are the _meta members that carry the 2026-07-28
// protocol per request; a legacy server has no use for them.
var statelessMetaKeys = []string{MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo}

// UpstreamBody rewrites a request body for the server: the name member (only
// when it differs), and the era's _meta members.
func UpstreamBody(body []byte, u UpstreamRequest) []byte {
	body = trimSpace(body)
	return editParams(body, func(p []byte) []byte {
		if len(u.NamePath) > 0 && p != nil {
			p = setPath(p, u.NamePath, appendString(nil, u.Name))
		}
		switch {
		case u.ClientEra == EraStateless && u.UpstreamEra == EraLegacy && p != nil:
			meta := Member(p, "_meta")
			if isObject(meta) {
				for _, k := range statelessMetaKeys {
					meta = DeleteMember(meta, k)
				}
				if skipSpace(meta, 1) >= len(meta)-1 {
					p = DeleteMember(p, "_meta")
				} else {
					p = SetMember(p, "_meta", meta)
				}
			}
		case u.ClientEra == EraLegacy && u.UpstreamEra == EraStateless:
			if p == nil {
				p = []byte("{}")
			}
			meta := Member(p, "_meta")
			if !isObject(meta) {
				meta = []byte("{}")
			}
			meta = SetMember(meta, MetaProtocolVersion, appendString(nil, Version20260728))
			if Member(meta, MetaClientCapabilities) == nil {
				meta = SetMember(meta, MetaClientCapabilities, []byte("{}"))
			}
			if Member(meta, MetaClientInfo) == nil {
				info := appendString([]byte(`{"name":`), u.Client.Name)
				info = append(append(info, `,"version":`...), appendString(nil, u.Client.Version)...)
				meta = SetMember(meta, MetaClientInfo, append(info, '}'))
			}
			p = SetMember(p, "_meta", meta)
		}
		if len(u.TraceMeta) > 0 {
			p = setTraceMeta(p, u.TraceMeta)
		}
		return p
	})
}

// setTraceMeta writes the trace-context keys into params._meta, creating
// params and _meta when needed; a key the gateway has no value for is
// removed, so a client's stale tracestate cannot ride with a new parent.
func setTraceMeta(p []byte, tm map[string]string) []byte {
	if p == nil {
		p = []byte("{}")
	}
	meta := Member(p, "_meta")
	if !isObject(meta) {
		meta = []byte("{}")
	}
	for _, k := range traceMetaKeys {
		if v := tm[k]; v != "" {
			meta = SetMember(meta, k, appendString(nil, v))
		} else {
			meta = DeleteMember(meta, k)
		}
	}
	return SetMember(p, "_meta", meta)
}

// setPath sets the member at path (objects only) to val, when every object
// on the way exists.
func setPath(obj []byte, path []string, val []byte) []byte {
	if len(path) == 1 {
		if Member(obj, path[0]) == nil {
			return obj
		}
		return SetMember(obj, path[0], val)
	}
	inner := Member(obj, path[0])
	if !isObject(inner) {
		return obj
	}
	return SetMember(obj, path[0], setPath(inner, path[1:], val))
}

// ResultInputRequired is the resultType of an MRTR InputRequiredResult.
const ResultInputRequired = "input_required"

// ClientMessage translates one JSON-RPC message from a federated server
// (a response, or a notification or request on its event stream) for a
// client of clientEra: a 2026-07-28 client gets resultType "complete" on a
// legacy server's results; a legacy client loses resultType, and an
// input_required result, which it cannot answer, becomes a failure (an
// isError result for tools/call, -32603 otherwise). Anything that is not a
// JSON object passes unchanged.
func (s *Server) ClientMessage(msg []byte, clientEra, upstreamEra Era, method string) []byte {
	msg = trimSpace(msg)
	if clientEra == upstreamEra || !isObject(msg) {
		return msg
	}
	res := Member(msg, "result")
	if !isObject(res) {
		return msg
	}
	if clientEra == EraStateless {
		if Member(res, "resultType") != nil {
			return msg
		}
		return SetMember(msg, "result", prependMember(res, "resultType", []byte(`"complete"`)))
	}
	rt, _ := stringValue(Member(res, "resultType"))
	if rt == ResultInputRequired {
		id := Member(msg, "id")
		const why = "the MCP server needs more input from the client (resultType input_required), which protocol versions before 2026-07-28 cannot carry; call again with protocol version 2026-07-28"
		if method == "tools/call" {
			b := appendEnvelope(nil, id)
			b = append(b, `"result":`...)
			b = s.appendError(b, EraLegacy, why)
			return append(b, '}')
		}
		return errorBody(id, CodeInternalError, why, nil)
	}
	if rt != "" {
		return SetMember(msg, "result", DeleteMember(res, "resultType"))
	}
	return msg
}
