package extprocpb

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func headers(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// requests are ProcessingRequests; fast says whether the fast path must
// decode them (the others must still decode as proto.Unmarshal does).
func requests(t testing.TB) []struct {
	name string
	m    *extprocv3.ProcessingRequest
	fast bool
} {
	return []struct {
		name string
		m    *extprocv3.ProcessingRequest
		fast bool
	}{
		{"request headers", &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
				Headers: headers(":method", "POST", ":path", "/mcp/bench", "content-type", "application/json", "empty", ""),
			}},
			ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
				ResponseBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, SendBodyWithoutWaitingForHeaderResponse: true},
		}, true},
		{"response headers, end of stream", &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
				Headers: headers(":status", "200"), EndOfStream: true,
			}},
			ObservabilityMode: true,
		}, true},
		{"headers with value", &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
				Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: "a", Value: "b"}}},
			}},
		}, true},
		{"empty header map", &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{}}},
		}, true},
		{"request body", &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(`{"jsonrpc":"2.0"}`), EndOfStream: true}},
		}, true},
		{"empty response body", &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{EndOfStream: true}},
		}, true},
		{"attributes", &extprocv3.ProcessingRequest{
			Request:    &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: headers("a", "b")}},
			Attributes: map[string]*structpb.Struct{"envoy.filters.http.ext_proc": mustStruct(t, map[string]any{"connection.mtls": true})},
		}, false},
		{"metadata context", &extprocv3.ProcessingRequest{
			Request:         &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte("x")}},
			MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"ns": mustStruct(t, map[string]any{"k": "v"})}},
		}, false},
		{"trailers", &extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{Trailers: headers("grpc-status", "0")}},
		}, false},
	}
}

// TestDecodeMatchesProto: every message decodes to what proto.Unmarshal
// gives, and the common shapes take the fast path.
func TestDecodeMatchesProto(t *testing.T) {
	for _, tc := range requests(t) {
		t.Run("request/"+tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			checkRequest(t, b)
			if fast := (decoder{}).decodeRequest(b, &extprocv3.ProcessingRequest{}); fast != tc.fast {
				t.Errorf("fast path taken: %v, want %v", fast, tc.fast)
			}
		})
	}
}

// TestDecodeEdgeCases: wire encodings proto.Marshal never writes but a
// peer may (repeated fields, missing map entry parts, bad UTF-8, bad
// lengths) decode as proto.Unmarshal decodes them, or fail as it fails.
func TestDecodeEdgeCases(t *testing.T) {
	tag := func(b []byte, n protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, n, protowire.BytesType), v)
	}
	hv := tag(tag(nil, 1, []byte("k")), 3, []byte("v"))
	headersMsg := func(hv []byte) []byte { return tag(nil, 2, tag(nil, 1, tag(nil, 1, hv))) }
	cases := []struct {
		name string
		req  []byte
	}{
		{"header key twice", headersMsg(tag(hv, 1, []byte("k2")))},
		{"header key not UTF-8", headersMsg(tag(nil, 1, []byte{0xff}))},
		{"request headers twice", append(headersMsg(hv), headersMsg(hv)...)},
		{"headers then body", append(headersMsg(hv), tag(nil, 4, nil)...)},
		{"truncated", headersMsg(hv)[:5]},
		{"unknown field", protowire.AppendVarint(protowire.AppendTag(headersMsg(hv), 20, protowire.VarintType), 1)},
		// Envoy's field order, the protocol config after the headers, and
		// protobuf-go's, before; with a body message, and bad.
		{"headers then protocol config", tag(headersMsg(hv), 11, []byte{0x08, 0x01, 0x18, 0x01})},
		{"protocol config then headers", append(tag(nil, 11, []byte{0x10, 0x01}), headersMsg(hv)...)},
		{"body then protocol config", tag(tag(nil, 4, []byte{0x0a, 0x01, 'x'}), 11, []byte{0x08, 0x01})},
		{"headers then bad protocol config", tag(headersMsg(hv), 11, []byte{0x20, 0x01})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkRequest(t, tc.req)
		})
	}
}

func checkRequest(t testing.TB, b []byte) {
	t.Helper()
	var want extprocv3.ProcessingRequest
	werr := proto.Unmarshal(b, &want)
	var got extprocv3.ProcessingRequest
	gerr := UnmarshalRequest(b, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("error %v, proto.Unmarshal %v", gerr, werr)
	}
	if werr == nil && !proto.Equal(&want, &got) {
		t.Fatalf("decoded\n%v\nproto.Unmarshal\n%v", &got, &want)
	}
}

// FuzzDecode: any bytes decode as proto.Unmarshal decodes them.
func FuzzDecode(f *testing.F) {
	for _, tc := range requests(f) {
		b, _ := proto.Marshal(tc.m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRequest(t, b)
	})
}

// TestDecodeAllocations: a routed call's headers message costs fewer
// allocations than proto.Unmarshal spends on it, in protobuf-go's field
// order and in Envoy's.
func TestDecodeAllocations(t *testing.T) {
	req, err := proto.Marshal(requests(t)[0].m)
	if err != nil {
		t.Fatal(err)
	}
	// Envoy writes fields in number order: the protocol config (11) after
	// the headers (2); protobuf-go writes it first.
	first := proto.Clone(requests(t)[0].m).(*extprocv3.ProcessingRequest)
	pc := first.ProtocolConfig
	first.ProtocolConfig = nil
	envoyOrder, err := proto.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	pcb, err := proto.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	envoyOrder = protowire.AppendBytes(protowire.AppendTag(envoyOrder, 11, protowire.BytesType), pcb)
	checkRequest(t, envoyOrder)
	var rq extprocv3.ProcessingRequest
	slow := testing.AllocsPerRun(50, func() { _ = proto.Unmarshal(req, &rq) })
	// The oneof member with its HttpHeaders, HeaderMap and protocol config
	// (one), the entries, the pointers to them, the one header name that
	// is not a common one ("empty") and the three non-empty values.
	const want = 7
	for name, b := range map[string][]byte{"protobuf-go's order": req, "Envoy's order": envoyOrder} {
		if fast := testing.AllocsPerRun(50, func() { _ = UnmarshalRequest(b, &rq) }); fast != want || fast >= slow {
			t.Errorf("request headers in %s: %v allocations, want %v (proto.Unmarshal %v)", name, fast, want, slow)
		}
	}
}
