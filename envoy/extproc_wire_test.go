package envoy

import (
	"bytes"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestHeadersRequestWire: a headersRequest is written as the bytes
// proto.Marshal gives for the same message built with toProto (or, with a
// map in the message, bytes that decode to it).
func TestHeadersRequestWire(t *testing.T) {
	full := &headerMap{}
	full.add(":method", "POST")
	full.add(":path", "/mcp/bench")
	full.add("content-type", "application/json")
	full.add("empty", "")
	full.add("x-long", strings.Repeat("v", 300)) // lengths past one varint byte
	full.add("accept", "a")
	full.add("accept", "b")
	many := &headerMap{}
	for i := range 40 {
		many.add("x-h"+strings.Repeat("x", i), strings.Repeat("y", i))
	}
	noX := func(k string) bool { return !strings.HasPrefix(k, "x-") }
	attrs, err := structpb.NewStruct(map[string]any{"connection.mtls": true})
	if err != nil {
		t.Fatal(err)
	}
	meta, err := structpb.NewStruct(map[string]any{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		h        *headerMap
		forward  func(string) bool
		response bool
		eos      bool
		extra    func(*extprocv3.ProcessingRequest)
		hasMap   bool
	}{
		{name: "request headers", h: full},
		{name: "request headers, end of stream", h: full, eos: true},
		{name: "response headers", h: full, response: true},
		{name: "forward rules", h: full, forward: noX},
		{name: "nothing forwarded", h: full, forward: func(string) bool { return false }},
		{name: "empty map", h: &headerMap{}, eos: true},
		{name: "long map", h: many},
		{name: "protocol config", h: full, extra: func(r *extprocv3.ProcessingRequest) {
			r.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED}
			r.ObservabilityMode = true
		}},
		{name: "attributes and metadata", h: full, hasMap: true, extra: func(r *extprocv3.ProcessingRequest) {
			r.Attributes = map[string]*structpb.Struct{extProcAttrNamespace: attrs}
			r.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"ns": meta}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func(hm *corev3.HeaderMap) *extprocv3.ProcessingRequest {
				hh := &extprocv3.HttpHeaders{Headers: hm, EndOfStream: tc.eos}
				r := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hh}}
				if tc.response {
					r.Request = &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: hh}
				}
				if tc.extra != nil {
					tc.extra(r)
				}
				return r
			}
			want := build(tc.h.toProto(tc.forward))
			hr := &headersRequest{req: build(nil), h: tc.h, forward: tc.forward}
			got, err := hr.marshal()
			if err != nil {
				t.Fatal(err)
			}
			var dec extprocv3.ProcessingRequest
			if err := proto.Unmarshal(got, &dec); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&dec, want) {
				t.Fatalf("decoded\n%v\nwant\n%v", &dec, want)
			}
			if !tc.hasMap {
				wb, err := proto.Marshal(want)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, wb) {
					t.Errorf("bytes differ from proto.Marshal:\n%x\n%x", got, wb)
				}
			}
			// The message is left as it was.
			if hr.req.GetRequest() == nil || (hr.req.GetRequestHeaders() == nil) == !tc.response {
				t.Errorf("request oneof not restored: %v", hr.req)
			}
		})
	}
}

// TestHeadersRequestInvalidKey: a key that is not UTF-8 fails as
// proto.Marshal fails on it.
func TestHeadersRequestInvalidKey(t *testing.T) {
	h := &headerMap{}
	h.add("\xff", "v")
	hr := &headersRequest{req: &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{}}}, h: h}
	if _, err := hr.marshal(); err == nil {
		t.Fatal("no error for a key that is not UTF-8")
	}
}

// TestExtProcContentType: the data plane's codec has no name of its own,
// so its streams carry application/grpc, as Envoy's gRPC client sends
// them, not a subtype naming the codec.
func TestExtProcContentType(t *testing.T) {
	e := newEnv(t, continueAll, setup{extProc: defaultExtProc(), routes: []*routev3.Route{directRoute("/", 200, "ok")}})
	if got := e.do("POST", "/", `{"a":1}`, map[string]string{"content-type": "application/json"}); got.status != 200 {
		t.Fatalf("status %d: %s", got.status, got.body)
	}
	e.ext.waitEnded(t, 1)
	e.ext.mu.Lock()
	defer e.ext.mu.Unlock()
	if len(e.ext.contentTypes) != 1 || e.ext.contentTypes[0] != "application/grpc" {
		t.Errorf("content-type %q, want [application/grpc]", e.ext.contentTypes)
	}
}
