package extprocwire

import (
	"bytes"
	"testing"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func immediateWire(t testing.TB, body []byte) []byte {
	t.Helper()
	b, err := proto.Marshal(&extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_OK},
			Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
				Header: &corev3.HeaderValue{Key: "content-type", RawValue: []byte("application/json")}}}},
			Body:    body,
			Details: "toolmesh_reply",
		}},
		DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("v")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodesAlike checks that UnmarshalAliasingBody decodes every message
// as proto.Unmarshal does, and that it leaves a sole ImmediateResponse body
// in the received buffer.
func TestDecodesAlike(t *testing.T) {
	big := bytes.Repeat([]byte(`{"name":"t"},`), 10_000)
	plain := immediateWire(t, big)
	field := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	headers, _ := proto.Marshal(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{}}})
	secondBody := field(fieldImmediate, field(fieldBody, []byte("second")))
	for _, tc := range []struct {
		name    string
		b       []byte
		aliases bool
	}{
		{"immediate response", plain, true},
		{"empty body", immediateWire(t, nil), false},
		{"two immediate responses (merged)", append(append([]byte(nil), plain...), secondBody...), false},
		{"body twice (last wins)", append(append([]byte(nil), plain...),
			field(fieldImmediate, append(field(fieldBody, []byte("x")), field(fieldBody, []byte("y"))...))...), false},
		{"replaced by a later oneof member", append(append([]byte(nil), plain...), headers...), false},
		{"unknown field after", append(append([]byte(nil), plain...), field(99, []byte("u"))...), true},
		{"truncated", plain[:len(plain)-3], false},
		{"not an immediate response", headers, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := &extprocv3.ProcessingResponse{}
			wantErr := proto.Unmarshal(tc.b, want)
			got := &extprocv3.ProcessingResponse{}
			in := append([]byte(nil), tc.b...)
			err := UnmarshalAliasingBody(in, got)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error %v, proto.Unmarshal %v", err, wantErr)
			}
			if err != nil {
				return
			}
			if !proto.Equal(got, want) {
				t.Fatalf("decoded\n%v\nproto.Unmarshal\n%v", got, want)
			}
			if inBuf := within(got.GetImmediateResponse().GetBody(), in); inBuf != tc.aliases {
				t.Fatalf("body in the received buffer: %v, want %v", inBuf, tc.aliases)
			}
		})
	}
}

// within reports whether sub is a non-empty slice of b's memory.
func within(sub, b []byte) bool {
	if len(sub) == 0 || len(b) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(&sub[0])), uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p < lo+uintptr(len(b))
}

func FuzzUnmarshalAliasingBody(f *testing.F) {
	f.Add(immediateWire(f, []byte("hello")))
	f.Add(immediateWire(f, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &extprocv3.ProcessingResponse{}
		wantErr := proto.Unmarshal(b, want)
		got := &extprocv3.ProcessingResponse{}
		err := UnmarshalAliasingBody(append([]byte(nil), b...), got)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error %v, proto.Unmarshal %v", err, wantErr)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("decoded\n%v\nproto.Unmarshal\n%v", got, want)
		}
	})
}
