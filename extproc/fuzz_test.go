package extproc

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/internal/wire"
)

// FuzzExchange drives one request through every phase with arbitrary
// headers and bodies, and checks that the server never panics and that every
// reply is one Envoy accepts: valid per PGV, JSON with a JSON content-type,
// and content-length equal to any rewritten body.
func FuzzExchange(f *testing.F) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`
	f.Add("/mcp/core", "POST", "application/json", "", "", "", []byte(call), "200", "application/json", []byte(`{"a":1}`), false)
	f.Add("/mcp/core?q=1", "POST", "application/json", "2026-07-28", "tools/call", "forecast",
		[]byte(`{"jsonrpc":"2.0","id":"f","method":"tools/call","params":{"name":"forecast","arguments":{"city":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`),
		"500", "text/plain", []byte("boom"), false)
	f.Add("/mcp/core", "POST", "application/json", "", "", "", []byte(call), "503", "", []byte(nil), true)
	f.Add("/mcp/core", "POST", "application/json", "", "", "", []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), "", "", []byte(nil), false)
	f.Add("/mcp/cold", "GET", "", "", "", "", []byte("{"), "", "", []byte(nil), false)
	f.Add("/mcp/core", "POST", "application/json; charset=utf-8", "2025-06-18", "", "", []byte(`[1,2]`), "", "", []byte(nil), false)

	srv, err := New(Config{MaxResponseBytes: 256}, testTable(f), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	srv.GRPCServerOptions() // prepared answers on, as served; handle decodes them
	f.Fuzz(func(t *testing.T, path, method, ctype, version, mcpMethod, mcpName string, body []byte,
		upStatus, upType string, upBody []byte, headersOnly bool) {
		x := srv.newRequest(context.Background())
		defer x.finish()
		kv := []string{":method", method, ":path", path, ":authority", "localhost", "content-type", ctype,
			"accept", "application/json", "content-length", strconv.Itoa(len(body)), wire.ClusterHeader, "evil"}
		for _, h := range [][2]string{{"mcp-protocol-version", version}, {"mcp-method", mcpMethod}, {"mcp-name", mcpName}} {
			if h[1] != "" {
				kv = append(kv, h[0], h[1])
			}
		}
		// Every phase is sent even after an ImmediateResponse (Envoy would
		// close the stream): spurious messages must not break the server.
		hr := x.handle(reqHeaders(false, kv...))
		done := checkReply(t, hr, false)
		routedTo := ""
		if c := hr.GetRequestHeaders().GetResponse(); c.GetClearRouteCache() {
			routedTo = setOf(t, c.GetHeaderMutation())[wire.ClusterHeader]
		}
		done = checkReplyRouted(t, x.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}), done, routedTo) || done
		checkReply(t, x.handle(respHeaders(headersOnly, ":status", upStatus, "content-type", upType)), done)
		checkReply(t, x.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: upBody, EndOfStream: true}}}), done)
	})
}

// checkReply checks the invariants of one reply and reports whether it ended
// the request (an ImmediateResponse). After the end (answered), a reply only
// has to be valid and harmless.
func checkReply(t *testing.T, resp *extprocv3.ProcessingResponse, answered bool) (final bool) {
	return checkReplyRouted(t, resp, answered, "")
}

// checkReplyRouted is checkReply for a request the headers reply routed to
// the cluster headerRouted ("" for none).
func checkReplyRouted(t *testing.T, resp *extprocv3.ProcessingResponse, answered bool, headerRouted string) (final bool) {
	t.Helper()
	if resp == nil {
		t.Fatal("no reply")
	}
	if err := resp.ValidateAll(); err != nil {
		t.Fatalf("invalid reply %v: %v", resp, err)
	}
	if im := resp.GetImmediateResponse(); im != nil {
		if im.GetGrpcStatus() != nil {
			t.Fatal("grpc_status on an HTTP reply")
		}
		if len(im.GetBody()) > 0 {
			if !json.Valid(im.GetBody()) {
				t.Fatalf("immediate body is not JSON: %q", im.GetBody())
			}
			if setOf(t, im.GetHeaders())["content-type"] != procmsg.ContentTypeJSON {
				t.Fatalf("immediate reply with a body lacks content-type: %v", im)
			}
		}
		return true
	}
	var cr *extprocv3.CommonResponse
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		cr = r.RequestHeaders.GetResponse()
	case *extprocv3.ProcessingResponse_RequestBody:
		cr = r.RequestBody.GetResponse()
		if answered {
			if cr.GetBodyMutation() != nil || cr.GetHeaderMutation() != nil {
				t.Fatalf("request body after the answer was mutated: %v", cr)
			}
			break
		}
		if cr.GetBodyMutation() == nil {
			t.Fatalf("a request body that was not answered must be routed: %v", resp)
		}
		// A call routed at request headers keeps that route when the body
		// names the same tool: no second cluster header, no second clear.
		if set := setOf(t, cr.GetHeaderMutation()); (!cr.GetClearRouteCache() || set[wire.ClusterHeader] == "") &&
			(headerRouted == "" || set[wire.ClusterHeader] != "" || cr.GetClearRouteCache()) {
			t.Fatalf("routed call without cluster header and clear_route_cache (routed at headers to %q): %v", headerRouted, cr)
		}
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		cr = r.ResponseHeaders.GetResponse()
	case *extprocv3.ProcessingResponse_ResponseBody:
		cr = r.ResponseBody.GetResponse()
	default:
		t.Fatalf("unexpected reply kind %T", r)
	}
	if cr.GetClearRouteCache() && cr.GetHeaderMutation() == nil {
		t.Fatal("clear_route_cache without a header mutation is ignored by Envoy")
	}
	if b := cr.GetBodyMutation(); b != nil {
		if !json.Valid(b.GetBody()) {
			t.Fatalf("rewritten body is not JSON: %q", b.GetBody())
		}
		if cl, ok := setOf(t, cr.GetHeaderMutation())["content-length"]; ok && cl != strconv.Itoa(len(b.GetBody())) {
			t.Fatalf("content-length %s for a body of %d bytes", cl, len(b.GetBody()))
		}
	}
	return false
}
