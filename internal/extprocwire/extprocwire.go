// Package extprocwire decodes ext_proc messages the way a data plane that
// parses from its own receive buffers does: a large ImmediateResponse body
// stays in the buffer it arrived in instead of being copied out of it.
package extprocwire

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Field numbers, read from the descriptors.
var (
	fieldImmediate = (&extprocv3.ProcessingResponse{}).ProtoReflect().Descriptor().
			Fields().ByName("immediate_response").Number()
	fieldBody = (&extprocv3.ImmediateResponse{}).ProtoReflect().Descriptor().
			Fields().ByName("body").Number()
)

// UnmarshalAliasingBody is proto.Unmarshal(b, resp), except that when b
// holds one immediate_response with one body field, the body is a slice of
// b. Anything else (no body, fields repeated, which protobuf merges or
// overrides) is decoded by proto.Unmarshal alone.
func UnmarshalAliasingBody(b []byte, resp *extprocv3.ProcessingResponse) error {
	imStart, imVal, imEnd, ok := soleField(b, fieldImmediate)
	if !ok {
		return proto.Unmarshal(b, resp)
	}
	inner := b[imVal:imEnd]
	bodyStart, bodyVal, bodyEnd, ok := soleField(inner, fieldBody)
	if !ok {
		return proto.Unmarshal(b, resp)
	}
	// b without the body field: the immediate_response field rewritten
	// with its new length.
	innerLen := len(inner) - (bodyEnd - bodyStart)
	rest := make([]byte, 0, len(b)-(bodyEnd-bodyStart))
	rest = append(rest, b[:imStart]...)
	rest = protowire.AppendTag(rest, fieldImmediate, protowire.BytesType)
	rest = protowire.AppendVarint(rest, uint64(innerLen))
	rest = append(rest, inner[:bodyStart]...)
	rest = append(rest, inner[bodyEnd:]...)
	rest = append(rest, b[imEnd:]...)
	if err := proto.Unmarshal(rest, resp); err != nil {
		return err
	}
	ir := resp.GetImmediateResponse()
	if ir == nil { // a later member of the response oneof replaced it
		return proto.Unmarshal(b, resp)
	}
	ir.Body = inner[bodyVal:bodyEnd:bodyEnd]
	return nil
}

// soleField finds the one occurrence of field num, of wire type bytes, in
// the message b: where its tag starts, where its value starts and where it
// ends. ok is false when b does not parse, or the field is absent, present
// more than once, or of another wire type.
func soleField(b []byte, num protowire.Number) (start, val, end int, ok bool) {
	found := false
	for off := 0; off < len(b); {
		n, typ, tagLen := protowire.ConsumeTag(b[off:])
		if tagLen < 0 {
			return 0, 0, 0, false
		}
		fieldLen := protowire.ConsumeFieldValue(n, typ, b[off+tagLen:])
		if fieldLen < 0 {
			return 0, 0, 0, false
		}
		if n == num {
			if found || typ != protowire.BytesType {
				return 0, 0, 0, false
			}
			_, lenLen := protowire.ConsumeVarint(b[off+tagLen:])
			start, val, end, found = off, off+tagLen+lenLen, off+tagLen+fieldLen, true
		}
		off += tagLen + fieldLen
	}
	return start, val, end, found
}
