package callplan

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

// TestHeld: a held call is sent again with the client's headers the routed
// request kept, the reply's own headers over them and the new credentials
// over both, to the Tool Service's scheme and authority and the call's path.
func TestHeld(t *testing.T) {
	tool := &registry.Tool{Service: "svc", Cluster: "svc", BasePath: "/base", Path: "/invoke/x"}
	p := For("core", tool)
	r := p.Reply(&Call{Call: &mcp.Call{Tool: "x"}, Args: []byte(`{"a":1}`), Rerouted: true, Creds: map[string]string{"authorization": "Bearer old"},
		Dropped: []string{"x-dropped"}})
	h := Hold(tool, []byte(`{"a":1}`), r)
	client := &corev3.HeaderMap{}
	for _, kv := range [][2]string{{":path", "/mcp/core"}, {"host", "gw"}, {"authorization", "Bearer client"}, {"x-dropped", "1"},
		{"x-request-id", "r1"}, {"x-toolmesh-route", "forged"}, {"x-envoy-original-path", "/x"}, {"content-length", "99"},
		{"mcp-method", "tools/call"}, {"accept", "application/json"}} {
		client.Headers = append(client.Headers, &corev3.HeaderValue{Key: kv[0], RawValue: []byte(kv[1])})
	}
	got := h.Header(client, map[string]string{"authorization": "Bearer new"})
	want := map[string]string{"Authorization": "Bearer new", "X-Request-Id": "r1", "X-Toolmesh-Route": "core",
		"X-Toolmesh-Tool": tool.ServiceToolName(), "Content-Type": "application/json", "Accept": "application/json",
		"X-Dropped": "", "Host": "", "X-Envoy-Original-Path": "", "Content-Length": "", "Mcp-Method": "",
		"X-Toolmesh-Cluster": "", ":path": ""}
	for k, v := range want {
		if g := got.Get(k); g != v {
			t.Errorf("%s = %q, want %q", k, g, v)
		}
	}
	if string(h.Body) != `{"a":1}` || h.Path != "/base/invoke/x" {
		t.Errorf("body %s, path %s", h.Body, h.Path)
	}
	for in, want := range map[string]string{"http://svc.tools:8080/base": "http://svc.tools:8080/base/invoke/x",
		"https://[::1]/base": "https://[::1]/base/invoke/x", "::not a url": "", "/relative": ""} {
		if g := h.URL(in); g != want {
			t.Errorf("URL(%q) = %q, want %q", in, g, want)
		}
	}
}
