package extproc

import (
	"slices"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

// TestEventStreamOverride checks the response_headers reply to a Tool
// Service answering text/event-stream. Envoy (>= 1.34,
// source/extensions/filters/http/ext_proc/ext_proc.cc effectiveModeOverride)
// fills DEFAULT header and trailer modes in from the configured
// processing_mode and takes both body modes as given before it checks
// allowed_override_modes, so the override must name request_body_mode
// BUFFERED as well as response_body_mode NONE: with the listener's
// processing_mode (all fields set) that is exactly its pass-through
// allow-list entry. The events pass unchanged, so no chunk needs a
// message. content-length goes in the same reply.
func TestEventStreamOverride(t *testing.T) {
	env := newTestEnv(t, Config{MaxResponseBytes: 1 << 20}, testTable(t))
	call := `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`
	tests := []struct {
		name    string
		accept  string
		headers []string
		stream  bool
	}{
		{name: "2xx event stream to a client accepting streams", accept: "application/json, text/event-stream",
			headers: []string{":status", "200", "content-type", "text/event-stream; charset=utf-8", "content-length", "20"}, stream: true},
		{name: "client accepting JSON only", accept: "application/json",
			headers: []string{":status", "200", "content-type", "text/event-stream"}},
		{name: "event stream refused with q=0", accept: "application/json, text/event-stream;q=0",
			headers: []string{":status", "200", "content-type", "text/event-stream"}},
		{name: "error status", accept: "application/json, text/event-stream",
			headers: []string{":status", "500", "content-type", "text/event-stream"}},
		{name: "JSON answer", accept: "application/json, text/event-stream",
			headers: []string{":status", "200", "content-type", "application/json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			defer v.close()
			v.send(reqHeaders(false, post("/mcp/core", len(call), "accept", tc.accept)...))
			wantRouted(t, v.send(reqBody(call)), "toolsvc_echo", "/invoke/echo", "echo", "", `{"x":1}`, "11", "legacy")
			resp := v.send(respHeaders(false, tc.headers...))
			if !tc.stream {
				if resp.GetModeOverride() != nil {
					t.Fatalf("mode_override %v, want none", resp.GetModeOverride())
				}
				return
			}
			want := &extprocfilterv3.ProcessingMode{
				RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_NONE}
			if !proto.Equal(resp.GetModeOverride(), want) {
				t.Fatalf("mode_override %v, want %v", resp.GetModeOverride(), want)
			}
			hm := resp.GetResponseHeaders().GetResponse().GetHeaderMutation()
			if !slices.Contains(hm.GetRemoveHeaders(), "content-length") {
				t.Errorf("remove_headers %v, want content-length", hm.GetRemoveHeaders())
			}
			set := setOf(t, hm)
			if set[":status"] != "200" {
				t.Errorf("set_headers %v, want :status 200", set)
			}
			if _, ok := set["content-type"]; ok {
				t.Errorf("content-type rewritten: %v", set)
			}
			// Should a body come anyway (an Envoy that ignored the
			// override), it passes unchanged.
			for _, chunk := range []string{"data: one\n\n", "data: two\n\n"} {
				cr := v.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
					ResponseBody: &extprocv3.HttpBody{Body: []byte(chunk)}}}).GetResponseBody().GetResponse()
				if cr.GetBodyMutation() != nil || cr.GetHeaderMutation() != nil {
					t.Fatalf("chunk %q answered with %v", chunk, cr)
				}
			}
		})
	}
	labels := map[string]string{"route": "core", "tool": "echo", "outcome": callOK}
	if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", labels); got < 1 {
		t.Errorf("tool_calls_total%v = %v, want the streamed call counted", labels, got)
	}
}
