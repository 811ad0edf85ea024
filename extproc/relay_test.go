package extproc

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/relay"
	"github.com/toolmesh/toolmesh/extproc/session"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

// TestClientCaps: what a legacy client's tools/call declares in _meta is
// what the gateway's session declares upstream, reduced to what the
// gateway can pass on.
func TestClientCaps(t *testing.T) {
	call := func(caps string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string // declare() as JSON, "null" for none
	}{
		{"no _meta", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`), `null`},
		{"empty", call(`{}`), `null`},
		{"not an object", call(`"all"`), `null`},
		{"empty elicitation is form", call(`{"elicitation":{}}`), `{"elicitation":{"form":{}}}`},
		{"url elicitation only", call(`{"elicitation":{"url":{}}}`), `{"elicitation":{"url":{}}}`},
		{"both modes", call(`{"elicitation":{"form":{},"url":{}}}`), `{"elicitation":{"form":{},"url":{}}}`},
		{"sub-capabilities dropped", call(`{"sampling":{"tools":{}},"roots":{"listChanged":true},"experimental":{"x":{}}}`),
			`{"roots":{},"sampling":{}}`},
		{"true is not a capability", call(`{"sampling":true}`), `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := json.Marshal(session.CapsOf(tc.body).Declare())
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal([]byte(tc.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("declare = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFederatedRelayAnswer: a legacy server's request on a legacy client's
// stream gets a relay id; the client's answer with that id, sent to
// another replica with the same relay key, is routed to the server's
// cluster with the server's id and the gateway's session; a tampered id,
// or one a replica with another key made, is answered 202 and not routed.
func TestFederatedRelayAnswer(t *testing.T) {
	ls := newLegacyServer(t)
	routes := federatedRoutes(t, ls.URL)
	key, _ := relay.New([]relay.Key{{ID: "r1", Secret: []byte(strings.Repeat("k", 32))}}, nil)
	a, b := newTestEnv(t, Config{}, routes), newTestEnv(t, Config{}, routes)
	a.srv.SetRelayKeys(key)
	b.srv.SetRelayKeys(key)
	other := newTestEnv(t, Config{}, routes) // a generated key

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	v, _ := routeCall(t, a, body)
	defer v.close()
	if v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream")).GetModeOverride().GetResponseBodyMode().String() != "STREAMED" {
		t.Fatal("a legacy server's stream to a legacy client is not STREAMED")
	}
	r := v.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte(`data: {"jsonrpc":"2.0","id":42,"method":"elicitation/create","params":{"message":"who?"}}` + "\n\n")}}})
	ev := []byte(strings.TrimSpace(strings.TrimPrefix(string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()), "data: ")))
	tok := string(mcp.Member(ev, "id"))
	if !strings.HasPrefix(tok, `"tmr2.r1.`) {
		t.Fatalf("the server's request %s has no relay id", ev)
	}
	answerOn := func(env *testEnv, id string) (*envoy, *extprocv3.ProcessingResponse) {
		t.Helper()
		ans := `{"jsonrpc":"2.0","id":` + id + `,"result":{"action":"accept","content":{"name":"ada"}}}`
		w := env.open(t)
		w.send(reqHeaders(false, post("/mcp/fed", len(ans), "mcp-protocol-version", "2025-11-25", "mcp-session-id", "client-made")...))
		return w, w.send(reqBody(ans))
	}
	answer := func(env *testEnv, id string) *extprocv3.ProcessingResponse {
		t.Helper()
		w, r := answerOn(env, id)
		w.close()
		return r
	}

	w, routed := answerOn(b, tok)
	defer w.close()
	if routed.GetRequestBody() == nil {
		t.Fatalf("the answer was not routed: %v", routed)
	}
	cr := routed.GetRequestBody().GetResponse()
	set := setOf(t, cr.GetHeaderMutation())
	if set["x-toolmesh-cluster"] != wire.ClusterName("old") || set[":path"] != "/mcp" || set["mcp-session-id"] != ls.live.Load().(string) ||
		set["mcp-protocol-version"] != "2025-11-25" || set["authorization"] != "Bearer s3cret-token" {
		t.Errorf("headers %v", set)
	}
	if got := string(cr.GetBodyMutation().GetBody()); got != `{"jsonrpc":"2.0","id":42,"result":{"action":"accept","content":{"name":"ada"}}}` {
		t.Errorf("body sent %s", got)
	}

	// The server's 202 goes back as it is, without its session id and the
	// headers outside the allow-list.
	hr := w.send(respHeaders(true, ":status", "202", "mcp-session-id", "s1", "set-cookie", "a=b", "x-envoy-upstream-service-time", "1"))
	if m := hr.GetResponseHeaders().GetResponse(); m.GetStatus() != extprocv3.CommonResponse_CONTINUE ||
		!slices.Equal(m.GetHeaderMutation().GetRemoveHeaders(), []string{"mcp-session-id", "set-cookie"}) || len(m.GetHeaderMutation().GetSetHeaders()) != 0 {
		t.Errorf("response headers reply %v", hr)
	}

	flipped := []byte(tok)
	flipped[len(flipped)-3] ^= 1
	for name, tc := range map[string]struct {
		env *testEnv
		id  string
	}{
		"tampered":              {b, string(flipped)},
		"another replica's key": {other, tok},
		"not a token":           {b, `"s-7"`},
	} {
		r := answer(tc.env, tc.id)
		if r.GetImmediateResponse().GetStatus().GetCode() != 202 || r.GetRequestBody() != nil {
			t.Errorf("%s: %v, want an immediate 202", name, r)
		}
	}
}
