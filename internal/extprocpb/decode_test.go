package extprocpb

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func headers(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

func set(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
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

func responses(t testing.TB) []struct {
	name string
	m    *extprocv3.ProcessingResponse
	fast bool
} {
	meta := mustStruct(t, map[string]any{"toolmesh": map[string]any{
		"jsonrpc_id": "7", "tool": "echo", "n": 1.5, "ok": true, "none": nil,
		"list": []any{"a", 2.0, map[string]any{"x": "y"}, []any{}}, "empty": map[string]any{},
	}})
	return []struct {
		name string
		m    *extprocv3.ProcessingResponse
		fast bool
	}{
		{"request headers, routed", &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
				HeaderMutation:  &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-toolmesh-cluster", "echo"), set(":path", "/tools/echo")}},
				ClearRouteCache: true,
			}}},
			DynamicMetadata: meta,
		}, true},
		{"request body, replaced", &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
				Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
				HeaderMutation: &extprocv3.HeaderMutation{
					SetHeaders:    []*corev3.HeaderValueOption{set("content-length", "8"), {Header: &corev3.HeaderValue{Key: "k", Value: "v"}, KeepEmptyValue: true}},
					RemoveHeaders: []string{"authorization", "cookie"},
				},
				BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(`{"q":"1"}`)}},
			}}},
		}, true},
		{"response headers, empty", &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}},
		}, true},
		{"response body, empty body", &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
				BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte{}}},
			}}},
		}, true},
		{"clear body", &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
				BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}},
			}}},
			DynamicMetadata: &structpb.Struct{},
		}, true},
		{"immediate", &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{Body: []byte("x"), Details: "d"}},
		}, false},
		{"mode override", &extprocv3.ProcessingResponse{
			Response:     &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}},
			ModeOverride: &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED},
		}, false},
		{"override message timeout", &extprocv3.ProcessingResponse{OverrideMessageTimeout: durationpb.New(5)}, false},
		{"deprecated append", &extprocv3.ProcessingResponse{
			Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
				HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "a"}, Append: wrapperspb.Bool(true)}}},
			}}},
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
			for _, alias := range []bool{false, true} {
				if fast := (decoder{alias}).decodeRequest(append([]byte(nil), b...), &extprocv3.ProcessingRequest{}); fast != tc.fast {
					t.Errorf("alias %v: fast path taken: %v, want %v", alias, fast, tc.fast)
				}
			}
		})
	}
	for _, tc := range responses(t) {
		t.Run("response/"+tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			checkResponse(t, b)
			for _, alias := range []bool{false, true} {
				if fast := (decoder{alias}).decodeResponse(append([]byte(nil), b...), &extprocv3.ProcessingResponse{}); fast != tc.fast {
					t.Errorf("alias %v: fast path taken: %v, want %v", alias, fast, tc.fast)
				}
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
	entry := func(k string, v []byte) []byte {
		e := tag(nil, 1, []byte(k))
		if v != nil {
			e = tag(e, 2, v)
		}
		return e
	}
	str := func(s string) []byte { return tag(nil, 3, []byte(s)) }
	meta := func(entries ...[]byte) []byte {
		var st []byte
		for _, e := range entries {
			st = tag(st, 1, e)
		}
		return tag(nil, 8, st)
	}
	cases := []struct {
		name      string
		req, resp []byte
	}{
		{"header key twice", headersMsg(tag(hv, 1, []byte("k2"))), nil},
		{"header key not UTF-8", headersMsg(tag(nil, 1, []byte{0xff})), nil},
		{"request headers twice", append(headersMsg(hv), headersMsg(hv)...), nil},
		{"headers then body", append(headersMsg(hv), tag(nil, 4, nil)...), nil},
		{"truncated", headersMsg(hv)[:5], nil},
		{"unknown field", protowire.AppendVarint(protowire.AppendTag(headersMsg(hv), 20, protowire.VarintType), 1), nil},
		{"map key twice", nil, meta(entry("a", str("1")), entry("a", str("2")))},
		{"map entry without value", nil, meta(entry("a", nil))},
		{"map entry without key", nil, meta(tag(nil, 2, str("x")))},
		{"map key not UTF-8", nil, meta(entry("\xff", str("x")))},
		{"value kind twice", nil, meta(entry("a", append(str("1"), str("2")...)))},
		{"nested too deep", nil, func() []byte {
			v := str("leaf")
			for range maxDepth + 2 {
				v = tag(nil, 5, tag(nil, 1, entry("n", v)))
			}
			return meta(entry("top", v))
		}()},
		// Envoy's field order, the protocol config after the headers, and
		// protobuf-go's, before; with a body message, and bad.
		{"headers then protocol config", tag(headersMsg(hv), 11, []byte{0x08, 0x01, 0x18, 0x01}), nil},
		{"protocol config then headers", append(tag(nil, 11, []byte{0x10, 0x01}), headersMsg(hv)...), nil},
		{"body then protocol config", tag(tag(nil, 4, []byte{0x0a, 0x01, 'x'}), 11, []byte{0x08, 0x01}), nil},
		{"headers then bad protocol config", tag(headersMsg(hv), 11, []byte{0x20, 0x01}), nil},
		{"bad length", nil, []byte{0x42, 0x05, 0x01}},
		{"group wire type", nil, []byte{0x0b, 0x0c}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req != nil {
				checkRequest(t, tc.req)
			}
			if tc.resp != nil {
				checkResponse(t, tc.resp)
			}
		})
	}
}

func checkRequest(t testing.TB, b []byte) {
	t.Helper()
	var want extprocv3.ProcessingRequest
	werr := proto.Unmarshal(b, &want)
	for _, alias := range []bool{false, true} {
		var got extprocv3.ProcessingRequest
		gerr := UnmarshalRequest(append([]byte(nil), b...), &got, alias)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("alias %v: error %v, proto.Unmarshal %v", alias, gerr, werr)
		}
		if werr == nil && !proto.Equal(&want, &got) {
			t.Fatalf("alias %v: decoded\n%v\nproto.Unmarshal\n%v", alias, &got, &want)
		}
	}
}

func checkResponse(t testing.TB, b []byte) {
	t.Helper()
	var want extprocv3.ProcessingResponse
	werr := proto.Unmarshal(b, &want)
	for _, alias := range []bool{false, true} {
		var got extprocv3.ProcessingResponse
		gerr := UnmarshalResponse(append([]byte(nil), b...), &got, alias)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("alias %v: error %v, proto.Unmarshal %v", alias, gerr, werr)
		}
		if werr == nil && !proto.Equal(&want, &got) {
			t.Fatalf("alias %v: decoded\n%v\nproto.Unmarshal\n%v", alias, &got, &want)
		}
	}
}

// FuzzDecode: any bytes decode as proto.Unmarshal decodes them.
func FuzzDecode(f *testing.F) {
	for _, tc := range requests(f) {
		b, _ := proto.Marshal(tc.m)
		f.Add(b)
	}
	for _, tc := range responses(f) {
		b, _ := proto.Marshal(tc.m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRequest(t, b)
		checkResponse(t, b)
	})
}

// TestDecodeAllocations: a routed call's headers message and reply cost
// fewer allocations than proto.Unmarshal spends on them, in both modes.
func TestDecodeAllocations(t *testing.T) {
	req, err := proto.Marshal(requests(t)[0].m)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := proto.Marshal(responses(t)[0].m)
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
	var rs extprocv3.ProcessingResponse
	for _, alias := range []bool{false, true} {
		fast := testing.AllocsPerRun(50, func() { _ = UnmarshalRequest(req, &rq, alias) })
		slow := testing.AllocsPerRun(50, func() { _ = proto.Unmarshal(req, &rq) })
		if fast >= slow {
			t.Errorf("request, alias %v: %v allocations, proto.Unmarshal %v", alias, fast, slow)
		}
		t.Logf("request, alias %v: %v allocations, proto.Unmarshal %v", alias, fast, slow)
		// Aliased, the headers message costs the oneof member with its
		// HttpHeaders, HeaderMap and protocol config (one), the entries
		// and the pointers to them.
		if alias && fast != 3 {
			t.Errorf("request headers, aliased: %v allocations, want 3", fast)
		}
		if alias {
			if n := testing.AllocsPerRun(50, func() { _ = UnmarshalRequest(envoyOrder, &rq, alias) }); n != 3 {
				t.Errorf("request headers in Envoy's field order, aliased: %v allocations, want 3", n)
			}
		}
		fast = testing.AllocsPerRun(50, func() { _ = UnmarshalResponse(resp, &rs, alias) })
		slow = testing.AllocsPerRun(50, func() { _ = proto.Unmarshal(resp, &rs) })
		if fast >= slow {
			t.Errorf("response, alias %v: %v allocations, proto.Unmarshal %v", alias, fast, slow)
		}
		t.Logf("response, alias %v: %v allocations, proto.Unmarshal %v", alias, fast, slow)
	}
}
