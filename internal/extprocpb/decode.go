// Package extprocpb decodes the ext_proc request messages of the common
// shapes (headers and body messages) with fewer allocations than the
// generic, reflection-driven protobuf decoder: the oneof member, its
// message and the entries of a header map are allocated together, and
// common header names are not allocated at all. The result is the message
// proto.Unmarshal returns (proto.Equal; TestDecodeMatchesProto and
// FuzzDecode compare the two). A message with any field outside these
// shapes (or invalid UTF-8, a singular message field repeated, an unknown
// field) is decoded by proto.Unmarshal instead, so the fast path never has
// to be complete to be correct.
//
// Only the extproc server uses it, for what Envoy sends; replies are
// decoded by grpc-go's proto codec.
package extprocpb

import (
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// decoder decodes one message. Each string and bytes field is its own
// copy (or a constant, for a common header name), so a value kept longer
// keeps only itself alive.
type decoder struct{}

// UnmarshalRequest decodes b into m (reset first).
func UnmarshalRequest(b []byte, m *extprocv3.ProcessingRequest) error {
	proto.Reset(m)
	if len(b) > 0 && (decoder{}).decodeRequest(b, m) {
		return nil
	}
	return proto.Unmarshal(b, m)
}

// field is one field of a message: its number, wire type and, for a
// length-delimited field, its contents; for a varint or fixed64, v.
type field struct {
	num protowire.Number
	typ protowire.Type
	buf []byte
	v   uint64
}

// next reads the field at the start of b and returns the rest; ok is false
// on malformed input or a wire type other than varint, fixed64 and bytes.
func next(b []byte) (f field, rest []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return f, nil, false
	}
	b = b[n:]
	f.num, f.typ = num, typ
	switch typ {
	case protowire.VarintType:
		f.v, n = protowire.ConsumeVarint(b)
	case protowire.Fixed64Type:
		f.v, n = protowire.ConsumeFixed64(b)
	case protowire.BytesType:
		f.buf, n = protowire.ConsumeBytes(b)
	default:
		return f, nil, false
	}
	if n < 0 {
		return f, nil, false
	}
	return f, b[n:], true
}

// str is a string field; ok is false when it is not valid UTF-8
// (proto.Unmarshal then reports the error).
func (d decoder) str(f field) (string, bool) {
	if f.typ != protowire.BytesType || !utf8.Valid(f.buf) {
		return "", false
	}
	if s, ok := commonNames[string(f.buf)]; ok {
		return s, true
	}
	return string(f.buf), true
}

// bytes is a proto3 bytes field: nil when empty, as proto.Unmarshal leaves
// it.
func (d decoder) bytes(f field) []byte {
	if len(f.buf) == 0 {
		return nil
	}
	return append([]byte(nil), f.buf...)
}

// commonNames are header names Envoy sends on most requests, shared rather
// than allocated per message when strings are copied.
var commonNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		":authority", ":method", ":path", ":scheme", ":status", "accept", "accept-encoding",
		"authorization", "content-length", "content-type", "date", "host", "user-agent",
		"x-forwarded-for", "x-forwarded-proto", "x-request-id", "x-envoy-expected-rq-timeout-ms",
		"x-envoy-upstream-service-time", "traceparent", "tracestate", "mcp-protocol-version",
		"mcp-method", "mcp-name", "mcp-session-id", "server", "cache-control", "connection",
	} {
		m[n] = n
	}
	return m
}()

func (f field) isVarint() bool { return f.typ == protowire.VarintType }
func (f field) isBytes() bool  { return f.typ == protowire.BytesType }

// enum is an enum or int32 field as proto.Unmarshal stores it.
func (f field) enum() int32 { return int32(f.v) }

// ProcessingRequest: the headers and body messages, with protocol_config
// and observability_mode.
func (d decoder) decodeRequest(b []byte, m *extprocv3.ProcessingRequest) bool {
	var seen uint32
	// The protocol config is decoded last, into the request headers'
	// allocation when they came too: Envoy sends it after them, protobuf-go
	// before (non-oneof fields first).
	var rh *requestHeaders
	var pcBuf []byte
	havePC := false
	for len(b) > 0 {
		f, rest, ok := next(b)
		if !ok || f.num > 31 || seen&(1<<f.num) != 0 {
			return false
		}
		seen |= 1 << f.num
		b = rest
		switch {
		case f.num == 2 && f.isBytes() && m.Request == nil:
			r := &requestHeaders{}
			if !d.decodeHttpHeaders(f.buf, &r.h, &r.hm) {
				return false
			}
			r.w.RequestHeaders = &r.h
			m.Request, rh = &r.w, r
		case f.num == 3 && f.isBytes() && m.Request == nil:
			r := &responseHeaders{}
			if !d.decodeHttpHeaders(f.buf, &r.h, &r.hm) {
				return false
			}
			r.w.ResponseHeaders = &r.h
			m.Request = &r.w
		case f.num == 4 && f.isBytes() && m.Request == nil:
			r := &requestBody{}
			if !d.decodeHttpBody(f.buf, &r.b) {
				return false
			}
			r.w.RequestBody = &r.b
			m.Request = &r.w
		case f.num == 5 && f.isBytes() && m.Request == nil:
			r := &responseBody{}
			if !d.decodeHttpBody(f.buf, &r.b) {
				return false
			}
			r.w.ResponseBody = &r.b
			m.Request = &r.w
		case f.num == 10 && f.isVarint():
			m.ObservabilityMode = f.v != 0
		case f.num == 11 && f.isBytes():
			pcBuf, havePC = f.buf, true
		default:
			return false
		}
	}
	if havePC {
		var pc *extprocv3.ProtocolConfiguration
		if rh != nil {
			pc = &rh.pc
		} else {
			pc = &extprocv3.ProtocolConfiguration{}
		}
		if !d.decodeProtocolConfig(pcBuf, pc) {
			return false
		}
		m.ProtocolConfig = pc
	}
	return true
}

func (d decoder) decodeProtocolConfig(b []byte, m *extprocv3.ProtocolConfiguration) bool {
	for len(b) > 0 {
		f, rest, ok := next(b)
		if !ok || !f.isVarint() {
			return false
		}
		b = rest
		switch f.num {
		case 1:
			m.RequestBodyMode = extprocfilterv3.ProcessingMode_BodySendMode(f.enum())
		case 2:
			m.ResponseBodyMode = extprocfilterv3.ProcessingMode_BodySendMode(f.enum())
		case 3:
			m.SendBodyWithoutWaitingForHeaderResponse = f.v != 0
		default:
			return false
		}
	}
	return true
}

// A request message's oneof member, its message and (for headers) the
// header map and the protocol config are allocated together, in one of
// these: they are kept, or dropped, together anyway.
type (
	requestHeaders struct {
		w  extprocv3.ProcessingRequest_RequestHeaders
		h  extprocv3.HttpHeaders
		hm corev3.HeaderMap
		// pc: the protocol config comes with the request headers.
		pc extprocv3.ProtocolConfiguration
	}
	responseHeaders struct {
		w  extprocv3.ProcessingRequest_ResponseHeaders
		h  extprocv3.HttpHeaders
		hm corev3.HeaderMap
	}
	requestBody struct {
		w extprocv3.ProcessingRequest_RequestBody
		b extprocv3.HttpBody
	}
	responseBody struct {
		w extprocv3.ProcessingRequest_ResponseBody
		b extprocv3.HttpBody
	}
)

// decodeHttpHeaders decodes m; hm is where its headers go when present.
func (d decoder) decodeHttpHeaders(b []byte, m *extprocv3.HttpHeaders, hm *corev3.HeaderMap) bool {
	var seen uint32
	for len(b) > 0 {
		f, rest, ok := next(b)
		if !ok || f.num > 31 || seen&(1<<f.num) != 0 {
			return false
		}
		seen |= 1 << f.num
		b = rest
		switch {
		case f.num == 1 && f.isBytes():
			if !d.decodeHeaderMap(f.buf, hm) {
				return false
			}
			m.Headers = hm
		case f.num == 3 && f.isVarint():
			m.EndOfStream = f.v != 0
		default:
			return false
		}
	}
	return true
}

// decodeHeaderMap allocates the map's HeaderValues together.
func (d decoder) decodeHeaderMap(b []byte, m *corev3.HeaderMap) bool {
	n, ok := countOnly1(b)
	if !ok {
		return false
	}
	if n == 0 {
		return true
	}
	vals := make([]corev3.HeaderValue, n)
	m.Headers = make([]*corev3.HeaderValue, n)
	for i := range n {
		f, rest, _ := next(b)
		b = rest
		if !d.decodeHeaderValue(f.buf, &vals[i]) {
			return false
		}
		m.Headers[i] = &vals[i]
	}
	return true
}

func (d decoder) decodeHeaderValue(b []byte, m *corev3.HeaderValue) bool {
	for len(b) > 0 {
		f, rest, ok := next(b)
		if !ok || !f.isBytes() {
			return false
		}
		b = rest
		switch f.num {
		case 1:
			if m.Key, ok = d.str(f); !ok {
				return false
			}
		case 2:
			if m.Value, ok = d.str(f); !ok {
				return false
			}
		case 3:
			m.RawValue = d.bytes(f)
		default:
			return false
		}
	}
	return true
}

func (d decoder) decodeHttpBody(b []byte, m *extprocv3.HttpBody) bool {
	for len(b) > 0 {
		f, rest, ok := next(b)
		if !ok {
			return false
		}
		b = rest
		switch {
		case f.num == 1 && f.isBytes():
			m.Body = d.bytes(f)
		case f.num == 2 && f.isVarint():
			m.EndOfStream = f.v != 0
		default:
			return false
		}
	}
	return true
}

// countOnly1 counts the fields of b, a message whose only field is a
// repeated message field 1 (HeaderMap, Struct, ListValue): ok is false
// when b does not parse or holds anything else. The entries are then
// allocated together.
func countOnly1(b []byte) (n int, ok bool) {
	for rest := b; len(rest) > 0; n++ {
		f, r, ok := next(rest)
		if !ok || f.num != 1 || !f.isBytes() {
			return 0, false
		}
		rest = r
	}
	return n, true
}
