package extproc

import (
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// TestToolServiceBodyLimit checks that a tools/call whose body is over its
// Tool Service's maxRequestBytes gets the 413 of a body over the
// deployment-wide limit, marked as this server's answer, while calls to
// other services of the same route and calls under the limit are routed.
func TestToolServiceBodyLimit(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	env.srv.SetBodyLimits(BodyLimits{Default: 1 << 20, Services: map[string]int64{"weather": 150}})
	pad := strings.Repeat("x", 200)
	for _, tc := range []struct {
		name, body string
		want       int // 0: routed
		cluster    string
	}{
		{name: "over the service's limit",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"` + pad + `"}}}`,
			want: 413},
		{name: "under the service's limit",
			body:    `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo"}}}`,
			cluster: "toolsvc_weather"},
		{name: "another service of the route takes the default",
			body:    `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"s":"` + pad + `"}}}`,
			cluster: "toolsvc_echo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			v.send(reqHeaders(false, post("/mcp/core", len(tc.body), "mcp-protocol-version", "2025-11-25")...))
			resp := v.send(reqBody(tc.body))
			if tc.want == 0 {
				if got := setOf(t, resp.GetRequestBody().GetResponse().GetHeaderMutation())[wire.ClusterHeader]; got != tc.cluster {
					t.Fatalf("routed to %q, want %q (%v)", got, tc.cluster, resp)
				}
				return
			}
			ir := resp.GetImmediateResponse()
			if ir == nil || int(ir.GetStatus().GetCode()) != tc.want {
				t.Fatalf("got %v, want an ImmediateResponse %d", resp, tc.want)
			}
			r := decodeReply(t, ir.GetBody())
			if string(r.ID) != "null" || r.Error == nil || r.Error.Code != -32600 ||
				r.Error.Message != "Request body too large: the limit is 150 bytes" {
				t.Errorf("body %s", ir.GetBody())
			}
			m := resp.GetDynamicMetadata().GetFields()[wire.MetadataNamespace].GetStructValue().GetFields()
			if m[wire.MetadataAnswered].GetStringValue() != "true" {
				t.Errorf("ImmediateResponse not marked as answered: %v", resp.GetDynamicMetadata())
			}
		})
	}
}
