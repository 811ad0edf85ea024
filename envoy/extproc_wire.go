package envoy

import (
	"errors"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// headersRequest is a headers message whose header map extProcCodec writes
// straight into protobuf wire format: the bytes proto.Marshal gives for req
// with h.toProto(forward) as its HttpHeaders.headers, without first
// building a HeaderValue message per header (two HeaderMaps per routed
// call were a tenth of the bytes the data plane allocated). Only the
// stand-in's cost changes: the message on the wire is the same
// (TestHeadersRequestWire).
type headersRequest struct {
	req     *extprocv3.ProcessingRequest // request_ or response_headers, without headers
	h       *headerMap
	forward func(string) bool
}

// Field numbers, read from the descriptors.
var (
	fReqRequestHeaders  = wireField(&extprocv3.ProcessingRequest{}, "request_headers")
	fReqResponseHeaders = wireField(&extprocv3.ProcessingRequest{}, "response_headers")
	fHTTPHeaders        = wireField(&extprocv3.HttpHeaders{}, "headers")
	fHTTPEndOfStream    = wireField(&extprocv3.HttpHeaders{}, "end_of_stream")
	fHeaderMapHeaders   = wireField(&corev3.HeaderMap{}, "headers")
	fHeaderValueKey     = wireField(&corev3.HeaderValue{}, "key")
	fHeaderValueRaw     = wireField(&corev3.HeaderValue{}, "raw_value")
)

func wireField(m proto.Message, name protoreflect.Name) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil {
		panic("envoy: no field " + string(name) + " in " + string(m.ProtoReflect().Descriptor().FullName()))
	}
	return f.Number()
}

func sizeBytesField(n protowire.Number, l int) int {
	return protowire.SizeTag(n) + protowire.SizeBytes(l)
}

// headerValueSize is the size of a HeaderValue of key and raw_value v
// (proto3: an empty field is not written).
func headerValueSize(k, v string) int {
	n := 0
	if k != "" {
		n += sizeBytesField(fHeaderValueKey, len(k))
	}
	if v != "" {
		n += sizeBytesField(fHeaderValueRaw, len(v))
	}
	return n
}

// marshal writes the message: the rest of req, then the headers field,
// the order in which proto.Marshal writes them (the members of a oneof
// after the other fields).
func (r *headersRequest) marshal() ([]byte, error) {
	var num protowire.Number
	var hh *extprocv3.HttpHeaders
	switch x := r.req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		num, hh = fReqRequestHeaders, x.RequestHeaders
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		num, hh = fReqResponseHeaders, x.ResponseHeaders
	default:
		return nil, errors.New("envoy: headersRequest without headers")
	}
	if hh == nil || hh.Headers != nil || len(hh.Attributes) > 0 {
		return nil, errors.New("envoy: headersRequest with fields it does not write")
	}
	hm := 0
	for _, e := range r.h.h {
		if r.forward != nil && !r.forward(e.key) {
			continue
		}
		if !utf8.ValidString(e.key) {
			// proto.Marshal refuses it; let it say so.
			return r.generic()
		}
		hm += sizeBytesField(fHeaderMapHeaders, headerValueSize(e.key, e.value))
	}
	hhSize := sizeBytesField(fHTTPHeaders, hm)
	if hh.EndOfStream {
		hhSize += protowire.SizeTag(fHTTPEndOfStream) + 1
	}
	oneof := r.req.Request
	r.req.Request = nil
	defer func() { r.req.Request = oneof }()
	opts := proto.MarshalOptions{UseCachedSize: true}
	rest := opts.Size(r.req)
	b, err := opts.MarshalAppend(make([]byte, 0, rest+sizeBytesField(num, hhSize)), r.req)
	if err != nil {
		return nil, err
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(hhSize))
	b = protowire.AppendTag(b, fHTTPHeaders, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(hm))
	for _, e := range r.h.h {
		if r.forward != nil && !r.forward(e.key) {
			continue
		}
		b = protowire.AppendTag(b, fHeaderMapHeaders, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(headerValueSize(e.key, e.value)))
		if e.key != "" {
			b = protowire.AppendTag(b, fHeaderValueKey, protowire.BytesType)
			b = protowire.AppendString(b, e.key)
		}
		if e.value != "" {
			b = protowire.AppendTag(b, fHeaderValueRaw, protowire.BytesType)
			b = protowire.AppendString(b, e.value)
		}
	}
	if hh.EndOfStream {
		b = protowire.AppendTag(b, fHTTPEndOfStream, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b, nil
}

// generic is the message built as HeaderValue messages and encoded by
// proto.Marshal.
func (r *headersRequest) generic() ([]byte, error) {
	m := proto.Clone(r.req).(*extprocv3.ProcessingRequest)
	hm := r.h.toProto(r.forward)
	switch x := m.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		x.RequestHeaders.Headers = hm
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		x.ResponseHeaders.Headers = hm
	}
	return proto.Marshal(m)
}

// marshalHeaders is extProcCodec's Marshal of a headersRequest.
func marshalHeaders(r *headersRequest) (mem.BufferSlice, error) {
	b, err := r.marshal()
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}
