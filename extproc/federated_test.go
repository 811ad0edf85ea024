package extproc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/upstream"
)

// fakeUpstreams hands out fixed header values and a real MCP client.
type fakeUpstreams struct{ headers map[string]string }

func (f fakeUpstreams) UpstreamHeaders(registry.ToolService) (map[string]string, error) {
	return f.headers, nil
}
func (f fakeUpstreams) Client() *upstream.Client { return upstream.New(upstream.Options{}) }

// legacyServer is a legacy MCP server on 127.0.0.1 that issues sessions
// "s1", "s2", … and answers a tools/call in the current session with a
// result; forget makes it drop every session (a restart).
type legacyServer struct {
	*httptest.Server
	n      atomic.Int32
	live   atomic.Value // string: the session it knows
	inits  atomic.Int32
	lastAu atomic.Value
}

func newLegacyServer(t *testing.T) *legacyServer {
	ls := &legacyServer{}
	ls.live.Store("")
	ls.lastAu.Store("")
	ls.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		ls.lastAu.Store(r.Header.Get("Authorization"))
		switch m.Method {
		case "initialize":
			ls.inits.Add(1)
			id := "s" + string(rune('0'+ls.n.Add(1)))
			ls.live.Store(id)
			w.Header().Set("Mcp-Session-Id", id)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"l","version":"1"}}}`))
		case "notifications/initialized":
			w.WriteHeader(202)
		default:
			if r.Header.Get("Mcp-Session-Id") != ls.live.Load().(string) {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"again"}]}}`))
		}
	}))
	t.Cleanup(ls.Close)
	return ls
}

// federatedRoutes is route "fed": a native Tool Service, a 2026 server
// "gh" (toolPrefix gh_, with a resource, a template and a prompt), and a
// legacy server "old" at legacyURL.
func federatedRoutes(t *testing.T, legacyURL string) testRoutes {
	route := registry.Route{Key: "fed", ToolServices: []registry.ToolService{
		{Name: "echo", URL: "http://echo.tools.svc:9000"},
		{Name: "gh", URL: "https://gh.example/v1/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "gh_",
			Headers: map[string]registry.HeaderValue{"Authorization": {Credential: "gh"}}},
		{Name: "old", URL: legacyURL + "/mcp", Protocol: registry.ProtocolMCP, ForwardAuthorization: true},
	}}
	obj := json.RawMessage(`{"type":"object"}`)
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{
		"echo": {Tools: []registry.ManifestTool{{Name: "echo", InputSchema: obj}}},
		"gh": {Tools: []registry.ManifestTool{{Name: "search", InputSchema: obj},
			{Name: "regional", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}`)}},
			MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20260728, Completions: true,
				Resources:         []json.RawMessage{json.RawMessage(`{"uri":"gh://readme","name":"readme"}`)},
				ResourceTemplates: []json.RawMessage{json.RawMessage(`{"uriTemplate":"gh://issues/{n}","name":"issue"}`)},
				Prompts:           []json.RawMessage{json.RawMessage(`{"name":"review","description":"d"}`)}}},
		"old": {Tools: []registry.ManifestTool{{Name: "legacy_tool", InputSchema: obj}},
			MCP: &registry.MCPManifest{ProtocolVersion: mcp.Version20251125}},
	})
	return testRoutes{"/mcp/fed": {key: "fed", snap: snap}}
}

func bodyOf(r *extprocv3.ProcessingResponse) string {
	return string(r.GetRequestBody().GetResponse().GetBodyMutation().GetBody())
}

// TestFederatedRouting: each federated method is routed to its server's
// cluster and MCP path, with only the name rewritten, the era's _meta and
// headers translated, the service's credentials set and the client's
// Authorization removed.
func TestFederatedRouting(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{Upstreams: fakeUpstreams{map[string]string{"Authorization": "Bearer upstream-secret"}}},
		federatedRoutes(t, ls.URL))
	ghCluster := wire.ClusterName("gh")
	for _, tc := range []struct {
		name, body string
		extra      []string
		cluster    string
		path       string
		wantBody   string
		wantSet    map[string]string
		wantRemove []string
	}{
		{name: "legacy client, prefixed tool, 2026 server",
			body:    `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gh_search","arguments":{"q": 1.0}}}`,
			cluster: ghCluster, path: "/v1/mcp",
			wantBody: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q": 1.0},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"toolmesh","version":"dev"}}}}`,
			wantSet: map[string]string{"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "search",
				"authorization": "Bearer upstream-secret"}},
		{name: "legacy client, 2026 server: Mcp-Param headers mirrored from the arguments",
			body:    `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"gh_regional","arguments":{"region":"eu","n":3}}}`,
			cluster: ghCluster, path: "/v1/mcp",
			wantSet: map[string]string{"mcp-name": "regional", "mcp-param-region": "eu", "mcp-param-n": "3"}},
		{name: "2026 client, prompt",
			body:    `{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"gh_review",` + meta2026 + `}}`,
			extra:   stateless("prompts/get", "gh_review"),
			cluster: ghCluster, path: "/v1/mcp",
			wantBody: `{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"review",` + meta2026 + `}}`,
			wantSet:  map[string]string{"mcp-method": "prompts/get", "mcp-name": "review"}},
		{name: "legacy client, resource by template",
			body:    `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"gh://issues/42"}}`,
			cluster: ghCluster, path: "/v1/mcp",
			wantSet: map[string]string{"mcp-method": "resources/read", "mcp-name": "gh://issues/42"}},
		{name: "legacy client, completion of a prompt argument",
			body:    `{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"gh_review"},"argument":{"name":"a","value":"x"}}}`,
			cluster: ghCluster, path: "/v1/mcp",
			wantSet: map[string]string{"mcp-method": "completion/complete"}},
		{name: "2026 client, legacy server: _meta protocol members dropped, session injected, the gateway's id, Authorization forwarded by opt-in",
			body:    `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"legacy_tool","arguments":{},"_meta":{"progressToken":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			extra:   stateless("tools/call", "legacy_tool"),
			cluster: wire.ClusterName("old"), path: "/mcp",
			// The first request this server sends in a shared session.
			wantBody:   `{"jsonrpc":"2.0","id":"toolmesh-1","method":"tools/call","params":{"name":"legacy_tool","arguments":{},"_meta":{"progressToken":"t"}}}`,
			wantSet:    map[string]string{"mcp-protocol-version": "2025-11-25", "mcp-session-id": "s1", "authorization": "Bearer s3cret-token"},
			wantRemove: []string{"mcp-method", "mcp-name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			defer v.close()
			v.send(reqHeaders(false, post("/mcp/fed", len(tc.body), tc.extra...)...))
			r := v.send(reqBody(tc.body))
			cr := r.GetRequestBody().GetResponse()
			if cr == nil {
				t.Fatalf("not routed: %v", r)
			}
			set := setOf(t, cr.GetHeaderMutation())
			if set[wire.ClusterHeader] != tc.cluster || set[":path"] != tc.path || !cr.GetClearRouteCache() {
				t.Errorf("cluster %q path %q clear %v", set[wire.ClusterHeader], set[":path"], cr.GetClearRouteCache())
			}
			if tc.wantBody != "" && bodyOf(r) != tc.wantBody {
				t.Errorf("body\n got %s\nwant %s", bodyOf(r), tc.wantBody)
			}
			if set["content-length"] != itoa(len(bodyOf(r))) {
				t.Errorf("content-length %q for %d bytes", set["content-length"], len(bodyOf(r)))
			}
			for k, want := range tc.wantSet {
				if set[k] != want {
					t.Errorf("%s = %q, want %q", k, set[k], want)
				}
			}
			for _, k := range tc.wantRemove {
				if !contains(cr.GetHeaderMutation().GetRemoveHeaders(), k) {
					t.Errorf("%s not removed: %v", k, cr.GetHeaderMutation().GetRemoveHeaders())
				}
			}
			// Envoy's own 503/504 become isError results only for a
			// tools/call (local_reply_config reads this metadata).
			ns := r.GetDynamicMetadata().GetFields()[wire.MetadataNamespace].GetStructValue().GetFields()
			isCall := strings.Contains(tc.body, `"tools/call"`)
			if ns[wire.MetadataJSONRPCID].GetStringValue() == "" || (ns[wire.MetadataToolCall].GetStringValue() == "true") != isCall {
				t.Errorf("dynamic metadata %v (tools/call: %v)", ns, isCall)
			}
			if _, ok := tc.wantSet["authorization"]; !ok && set["authorization"] == "" &&
				!contains(cr.GetHeaderMutation().GetRemoveHeaders(), "authorization") {
				t.Error("client Authorization neither replaced nor removed")
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestFederatedAuthorizationRemoved: without credentials for the header and
// without forwardAuthorization, the client's token never leaves the
// gateway.
func TestFederatedAuthorizationRemoved(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{Upstreams: fakeUpstreams{}}, federatedRoutes(t, ls.URL))
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gh_search","arguments":{}}}`
	v := env.open(t)
	defer v.close()
	v.send(reqHeaders(false, post("/mcp/fed", len(body))...))
	cr := v.send(reqBody(body)).GetRequestBody().GetResponse()
	if set := setOf(t, cr.GetHeaderMutation()); set["authorization"] != "" {
		t.Errorf("authorization set to %q", set["authorization"])
	}
	if !contains(cr.GetHeaderMutation().GetRemoveHeaders(), "authorization") {
		t.Errorf("authorization not removed: %v", cr.GetHeaderMutation().GetRemoveHeaders())
	}
}

// TestFederatedLists: resources, templates and prompts are listed from the
// snapshot (prompts under their prefixed names) and initialize advertises
// them; unknown items are errors that never reach a server.
func TestFederatedLists(t *testing.T) {
	env := newTestEnv(t, Config{}, federatedRoutes(t, "http://127.0.0.1:1"))
	for _, tc := range []struct {
		body, want string
		headers    []string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, `"resources":[{"uri":"gh://readme","name":"readme"}]`, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/templates/list"}`, `"resourceTemplates":[{"uriTemplate":"gh://issues/{n}","name":"issue"}]`, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`, `"prompts":[{"name":"gh_review","description":"d"}]`, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, `"resources":{"listChanged":false},"prompts":{"listChanged":false},"completions":{}`, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"gh://nothing"}}`, `"code":-32002,"message":"Resource not found: gh://nothing","data":{"uri":"gh://nothing"}`, nil},
		// 2026-07-28: -32602 with data.uri (SEP-2164).
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"gh://nothing",` + meta2026 + `}}`, `"code":-32602,"message":"Resource not found: gh://nothing","data":{"uri":"gh://nothing"}`,
			[]string{"mcp-protocol-version", "2026-07-28", "mcp-method", "resources/read", "mcp-name", "gh://nothing"}},
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"review"}}`, `unknown prompt: review`, nil},
	} {
		v := env.open(t)
		v.send(reqHeaders(false, post("/mcp/fed", len(tc.body), tc.headers...)...))
		im := v.send(reqBody(tc.body)).GetImmediateResponse()
		if im == nil || !strings.Contains(string(im.GetBody()), tc.want) {
			t.Errorf("%s\n got %s\nwant %s", tc.body, im.GetBody(), tc.want)
		}
		v.close()
	}
}

// TestFederatedResponses: JSON answers are translated for the client's
// era, event streams switch to STREAMED and are translated event by event,
// the server's Mcp-Session-Id never reaches the client, and answers that are
// not a JSON-RPC response become isError results.
func TestFederatedResponses(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{}, federatedRoutes(t, ls.URL))
	call2026 := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"legacy_tool","arguments":{},` + meta2026 + `}}`
	callLegacy := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gh_search","arguments":{}}}`
	route := func(t *testing.T, body string, extra ...string) *envoy {
		v, _ := routeCall(t, env, body, extra...)
		return v
	}

	t.Run("JSON from a legacy server to a 2026 client gets resultType", func(t *testing.T) {
		v, upID := routeCall(t, env, call2026, stateless("tools/call", "legacy_tool")...)
		defer v.close()
		hr := v.send(respHeaders(false, ":status", "200", "content-type", "application/json", "mcp-session-id", "s1"))
		if !contains(hr.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(), "mcp-session-id") {
			t.Error("upstream session id not removed")
		}
		r := v.send(respBody(`{"jsonrpc":"2.0","id":` + upID + `,"result":{"content":[]}}`))
		got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
		if got != `{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","content":[]}}` {
			t.Errorf("body %s", got)
		}
	})
	t.Run("a 2026 server's 4xx JSON-RPC error keeps its status for a 2026 client, 200 for a legacy one", func(t *testing.T) {
		errBody := `{"jsonrpc":"2.0","id":5,"error":{"code":-32021,"message":"needs sampling","data":{"requiredCapabilities":{"sampling":{}}}}}`
		for _, tc := range []struct {
			name, body, status string
			extra              []string
		}{
			{"2026 client", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gh_search","arguments":{},` + meta2026 + `}}`,
				"400", stateless("tools/call", "gh_search")},
			{"legacy client", callLegacy, "200", nil},
		} {
			v := route(t, tc.body, tc.extra...)
			v.send(respHeaders(false, ":status", "400", "content-type", "application/json"))
			cr := v.send(respBody(errBody)).GetResponseBody().GetResponse()
			v.close()
			if set := setOf(t, cr.GetHeaderMutation()); set[":status"] != tc.status {
				t.Errorf("%s: status %q, want %s", tc.name, set[":status"], tc.status)
			}
			if got := string(cr.GetBodyMutation().GetBody()); got != errBody {
				t.Errorf("%s: body %s", tc.name, got)
			}
		}
	})
	t.Run("input_required to a legacy client is an isError result", func(t *testing.T) {
		v := route(t, callLegacy)
		defer v.close()
		v.send(respHeaders(false, ":status", "200", "content-type", "application/json"))
		r := v.send(respBody(`{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","inputRequests":{}}}`))
		res := decodeResult(t, r.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), "5")
		if !res.IsError || !strings.Contains(res.Content[0].Text, "input_required") {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("garbage is an isError result", func(t *testing.T) {
		v := route(t, callLegacy)
		defer v.close()
		v.send(respHeaders(false, ":status", "200", "content-type", "application/json"))
		r := v.send(respBody(`<html>oops</html>`))
		res := decodeResult(t, r.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), "5")
		if !res.IsError {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("event stream to a client that does not accept streams: the response event as JSON", func(t *testing.T) {
		v := env.open(t)
		defer v.close()
		v.send(reqHeaders(false, post("/mcp/fed", len(callLegacy), "accept", "application/json")...))
		if v.send(reqBody(callLegacy)).GetRequestBody() == nil {
			t.Fatal("not routed")
		}
		hr := v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream"))
		if hr.GetModeOverride() != nil {
			t.Fatal("streamed to a client that did not ask for a stream")
		}
		r := v.send(respBody("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"resultType\":\"complete\",\"content\":[]}}\n\n"))
		cr := r.GetResponseBody().GetResponse()
		if got := string(cr.GetBodyMutation().GetBody()); got != `{"jsonrpc":"2.0","id":5,"result":{"content":[]}}` {
			t.Errorf("body %s", got)
		}
		if set := setOf(t, cr.GetHeaderMutation()); set["content-type"] != "application/json" || set[":status"] != "200" {
			t.Errorf("headers %v", set)
		}
	})
	t.Run("event stream from a 2026 server to a 2026 client: events pass unchanged, through the bounds", func(t *testing.T) {
		v := route(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gh_search","arguments":{},`+meta2026+`}}`,
			stateless("tools/call", "gh_search")...)
		defer v.close()
		hr := v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream", "content-length", "9"))
		want := &extprocfilterv3.ProcessingMode{RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
		if !proto.Equal(hr.GetModeOverride(), want) {
			t.Fatalf("mode_override %v, want %v", hr.GetModeOverride(), want)
		}
		if rm := hr.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); !slices.Contains(rm, "content-length") || !slices.Contains(rm, "mcp-session-id") {
			t.Errorf("remove_headers %v, want content-length and mcp-session-id", rm)
		}
		ev := "id: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"resultType\":\"complete\",\"content\":[]}}\n\n"
		if got := v.responseChunk(ev[:20], false) + v.responseChunk(ev[20:], true); got != ev {
			t.Errorf("stream\n got %q\nwant %q", got, ev)
		}
	})
	t.Run("event stream to a legacy client: streamed, resultType dropped per event", func(t *testing.T) {
		v := route(t, callLegacy)
		defer v.close()
		hr := v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream"))
		if hr.GetModeOverride().GetResponseBodyMode().String() != "STREAMED" {
			t.Fatalf("no STREAMED override: %v", hr)
		}
		chunk := v.responseChunk
		progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`
		if got := chunk("id: 1\ndata: "+progress+"\n\ndata: {\"jsonrpc\":\"2.0\",", false); got != "id: 1\ndata: "+progress+"\n\n" {
			t.Errorf("first chunk %q", got)
		}
		if got := chunk(`"id":5,"result":{"resultType":"complete","content":[]}}`+"\n\n", true); got != `data: {"jsonrpc":"2.0","id":5,"result":{"content":[]}}`+"\n\n" {
			t.Errorf("second chunk %q", got)
		}
	})
	t.Run("an event that never ends is cut at the bound, the client gets a failure", func(t *testing.T) {
		env := newTestEnv(t, Config{MaxResponseBytes: 4096}, federatedRoutes(t, ls.URL))
		v, _ := routeCall(t, env, callLegacy)
		defer v.close()
		v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream"))
		progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`
		if got := v.responseChunk("data: "+progress+"\n\ndata: {", false); got != "data: "+progress+"\n\n" {
			t.Errorf("first chunk %q", got)
		}
		var got string
		for i := 0; got == "" && i < 100; i++ {
			got = v.responseChunk(strings.Repeat("x", 1000), false)
		}
		data, ok := strings.CutPrefix(got, "event: message\ndata: ")
		if !ok {
			t.Fatalf("no failure event after 100 KB of one event: %q", got)
		}
		if res := decodeResult(t, []byte(strings.TrimSpace(data)), "5"); !res.IsError {
			t.Errorf("result %+v, want isError", res)
		}
		if rest := v.responseChunk("\n\ndata: late\n\n", true); rest != "" {
			t.Errorf("after the failure %q", rest)
		}
	})
}

// routeCall sends a request's headers and body and returns the stream and
// the id the request carries upstream.
func routeCall(t *testing.T, env *testEnv, body string, extra ...string) (*envoy, string) {
	t.Helper()
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/fed", len(body), extra...)...))
	r := v.send(reqBody(body))
	if r.GetRequestBody() == nil {
		v.close()
		t.Fatal("not routed")
	}
	return v, string(mcp.Member([]byte(bodyOf(r)), "id"))
}

// TestFederatedSharedSessionIDs: requests sent in the gateway's shared
// legacy session carry ids of the gateway, distinct even when clients
// chose the same id, and each client gets the response with its own id
// back, as JSON or streamed; the server's requests get relay ids.
func TestFederatedSharedSessionIDs(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{}, federatedRoutes(t, ls.URL))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	a, idA := routeCall(t, env, body)
	defer a.close()
	b, idB := routeCall(t, env, body)
	defer b.close()
	if idA == "1" || idB == "1" || idA == idB {
		t.Fatalf("upstream ids %s and %s for two requests with the client id 1", idA, idB)
	}

	a.send(respHeaders(false, ":status", "200", "content-type", "application/json"))
	r := a.send(respBody(`{"jsonrpc":"2.0","id":` + idA + `,"result":{"content":[]}}` + "\n"))
	if got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); got != `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` {
		t.Errorf("JSON answer %s", got)
	}

	if b.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream")).GetModeOverride() == nil {
		t.Fatal("not streamed")
	}
	ask := `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`
	r = b.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte("data: " + ask + "\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + idB + ",\"result\":{\"content\":[]}}\n\n"), EndOfStream: true}}})
	// The server's request gets a relay id (relay.go), not the client's.
	got := string(r.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
	first, rest, _ := strings.Cut(got, "\n\n")
	if m := []byte(strings.TrimPrefix(first, "data: ")); string(mcp.Member(m, "method")) != `"sampling/createMessage"` ||
		!strings.HasPrefix(string(mcp.Member(m, "id")), `"tmr2.`) {
		t.Errorf("the server's request %s, want sampling/createMessage with a relay id", first)
	}
	if want := `data: {"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n\n"; rest != want {
		t.Errorf("stream after the request\n got %q\nwant %q", rest, want)
	}
}

// TestFederatedSessionExpired: a 404 of the gateway's legacy session opens
// a new one and re-issues the call; the client gets the result.
func TestFederatedSessionExpired(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{}, federatedRoutes(t, ls.URL))
	body := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	v := env.open(t)
	defer v.close()
	v.send(reqHeaders(false, post("/mcp/fed", len(body))...))
	if set := setOf(t, v.send(reqBody(body)).GetRequestBody().GetResponse().GetHeaderMutation()); set["mcp-session-id"] != "s1" {
		t.Fatalf("session %q", set["mcp-session-id"])
	}
	ls.live.Store("") // the server restarts
	r := v.send(respHeaders(false, ":status", "404", "content-type", "text/plain"))
	cr := r.GetResponseHeaders().GetResponse()
	if cr.GetStatus() != extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
		t.Fatalf("status %v", cr.GetStatus())
	}
	res := decodeResult(t, cr.GetBodyMutation().GetBody(), "8")
	if res.IsError || res.Content[0].Text != "again" {
		t.Errorf("result %+v", res)
	}
	if ls.inits.Load() != 2 || ls.live.Load() != "s2" {
		t.Errorf("initialize %d times, live session %v", ls.inits.Load(), ls.live.Load())
	}
	// The next call uses the new session without a handshake.
	v2 := env.open(t)
	defer v2.close()
	v2.send(reqHeaders(false, post("/mcp/fed", len(body))...))
	if set := setOf(t, v2.send(reqBody(body)).GetRequestBody().GetResponse().GetHeaderMutation()); set["mcp-session-id"] != "s2" {
		t.Errorf("second call session %q", set["mcp-session-id"])
	}
}

// TestFederatedSessionLost400: a server that answers its lost session with
// 400 and a JSON-RPC error naming the session (as the TypeScript SDK's
// reference server does) gets a new session and the call once more; a 400
// about anything else is the server's answer and is not re-issued.
func TestFederatedSessionLost400(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{}, federatedRoutes(t, ls.URL))
	body := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	call := func(answer string) *extprocv3.CommonResponse {
		v := env.open(t)
		defer v.close()
		v.send(reqHeaders(false, post("/mcp/fed", len(body))...))
		v.send(reqBody(body))
		v.send(respHeaders(false, ":status", "400", "content-type", "application/json"))
		return v.send(respBody(answer)).GetResponseBody().GetResponse()
	}
	// Not about the session: no new session, the server's error reaches
	// the client as an isError result.
	cr := call(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: invalid arguments"}}`)
	if ls.inits.Load() != 1 {
		t.Fatalf("a 400 about the arguments opened a session: %d handshakes", ls.inits.Load())
	}
	if res := decodeResult(t, cr.GetBodyMutation().GetBody(), "8"); !res.IsError {
		t.Errorf("result %+v, want isError", res)
	}
	ls.live.Store("") // the server restarts
	cr = call(`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
	if res := decodeResult(t, cr.GetBodyMutation().GetBody(), "8"); res.IsError || res.Content[0].Text != "again" {
		t.Errorf("result %+v", res)
	}
	if set := setOf(t, cr.GetHeaderMutation()); set[":status"] != "200" {
		t.Errorf("status %q, want 200", set[":status"])
	}
	if ls.inits.Load() != 2 || ls.live.Load() != "s2" {
		t.Errorf("initialize %d times, live session %v", ls.inits.Load(), ls.live.Load())
	}
}

// TestFederatedResponseHeaderAllowList: a federated server's response
// headers reach the client only through the allow-list, on the buffered
// and the streamed path alike.
func TestFederatedResponseHeaderAllowList(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{}, federatedRoutes(t, ls.URL))
	body := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"legacy_tool","arguments":{}}}`
	hostile := []string{"set-cookie", "sid=1", "access-control-allow-origin", "*", "www-authenticate", `Bearer realm="elsewhere"`,
		"location", "https://elsewhere.example/", "x-anything", "1", "mcp-session-id", "s1"}
	kept := []string{"x-envoy-upstream-service-time", "3", "cache-control", "no-store", "mcp-protocol-version", "2025-11-25", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	for _, ct := range []string{"application/json", "text/event-stream"} {
		v := env.open(t)
		v.send(reqHeaders(false, append(post("/mcp/fed", len(body)), "accept", "application/json, text/event-stream")...))
		v.send(reqBody(body))
		kv := append(append([]string{":status", "200", "content-type", ct}, hostile...), kept...)
		m := v.send(respHeaders(false, kv...)).GetResponseHeaders().GetResponse().GetHeaderMutation()
		v.close()
		removed := map[string]bool{}
		for _, k := range m.GetRemoveHeaders() {
			removed[k] = true
		}
		for i := 0; i < len(hostile); i += 2 {
			if !removed[hostile[i]] {
				t.Errorf("%s: %s reaches the client (removed %v)", ct, hostile[i], m.GetRemoveHeaders())
			}
		}
		for i := 0; i < len(kept); i += 2 {
			if removed[kept[i]] {
				t.Errorf("%s: %s removed", ct, kept[i])
			}
		}
		if removed["content-type"] {
			t.Errorf("%s: content-type removed", ct)
		}
	}
}

// TestSessionCache: concurrent first calls open one session; invalidating
// a stale id drops it, invalidating an id already replaced does not.
func TestSessionCache(t *testing.T) {
	var c sessionCache
	key := sessionKey{service: "s", url: "u", version: "v"}
	var opened atomic.Int32
	open := func(context.Context) (string, error) {
		return "id" + itoa(int(opened.Add(1))), nil
	}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() { ids[i], _ = c.get(t.Context(), key, open) })
	}
	wg.Wait()
	if opened.Load() != 1 || ids[0] != "id1" || ids[7] != "id1" {
		t.Fatalf("opened %d sessions: %v", opened.Load(), ids)
	}
	c.invalidate(key, "id1")
	if id, _ := c.get(t.Context(), key, open); id != "id2" {
		t.Fatalf("after invalidate: %q", id)
	}
	c.invalidate(key, "id1") // stale: another call already replaced it
	if id, _ := c.get(t.Context(), key, open); id != "id2" {
		t.Errorf("a stale invalidate dropped the new session: %q", id)
	}
	failing := func(context.Context) (string, error) { return "", errors.New("down") }
	if _, err := c.get(t.Context(), sessionKey{service: "x"}, failing); err == nil {
		t.Error("want the open error")
	}
}

// TestFederatedSearchModeAndHeaders: a federated tool called through the
// search-mode call_tool is sent as a plain tools/call of the upstream name;
// a 2026 resources/read whose Mcp-Name differs from the URI is refused.
func TestFederatedSearchModeAndHeaders(t *testing.T) {
	routes := federatedRoutes(t, "http://127.0.0.1:1")
	snap := routes["/mcp/fed"].snap
	def := registry.Route{Key: "fed", Catalog: &registry.Catalog{Mode: "search"}, ToolServices: []registry.ToolService{
		{Name: "gh", URL: "https://gh.example/v1/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "gh_"}}}
	_, man, _ := snap.MCPService("gh")
	search := buildSnapshot(t, def, map[string]*registry.Manifest{"gh": {
		Tools: []registry.ManifestTool{{Name: "search", InputSchema: json.RawMessage(`{"type":"object"}`)}}, MCP: man}})
	routes["/mcp/search"] = testRoute{key: "search", snap: search}
	env := newTestEnv(t, Config{}, routes)

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"gh_search","arguments":{"q":1}}}}`
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/search", len(body))...))
	r := v.send(reqBody(body))
	want := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"toolmesh","version":"dev"}}}}`
	if got := bodyOf(r); got != want {
		t.Errorf("call_tool body\n got %s\nwant %s", got, want)
	}
	v.close()

	body = `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"gh://readme",` + meta2026 + `}}`
	v = env.open(t)
	defer v.close()
	v.send(reqHeaders(false, post("/mcp/fed", len(body), stateless("resources/read", "gh://other")...)...))
	im := v.send(reqBody(body)).GetImmediateResponse()
	if im == nil || im.GetStatus().GetCode() != 400 || !strings.Contains(string(im.GetBody()), "-32020") {
		t.Errorf("mismatched Mcp-Name: %v", im)
	}
}

// brokenUpstreams cannot read any service's credentials.
type brokenUpstreams struct{ fakeUpstreams }

func (brokenUpstreams) UpstreamHeaders(registry.ToolService) (map[string]string, error) {
	return nil, errors.New("open /run/secrets/gh: no such file or directory")
}

// TestFederatedCredentialsUnreadable: a call whose server's credentials
// cannot be read is never sent; the client gets an isError result and the
// call counts as federated_failed.
func TestFederatedCredentialsUnreadable(t *testing.T) {
	env := newTestEnv(t, Config{Upstreams: brokenUpstreams{}}, federatedRoutes(t, "http://127.0.0.1:1"))
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gh_search","arguments":{}}}`
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/fed", len(body))...))
	ir := v.send(reqBody(body)).GetImmediateResponse()
	v.close()
	if ir == nil || !strings.Contains(string(ir.GetBody()), `"isError":true`) || strings.Contains(string(ir.GetBody()), "/run/secrets") {
		t.Fatalf("got %v, want an isError result that does not name the secret's path", ir)
	}
	for range 100 { // the server records a call as its stream ends
		if outcomeSeries(t, env.reg)["call/gh_search/"+callFederatedFailed] == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("no call counted as %s: %v", callFederatedFailed, outcomeSeries(t, env.reg))
}

// TestFederatedResultFiltersStreamed: on a route with a result filter, a
// federated event stream is still streamed; the progress event passes as
// the server sent it and only the response event goes through the filter.
func TestFederatedResultFiltersStreamed(t *testing.T) {
	ls := newLegacyServer(t)
	set := buildFilters(t, `
definitions:
  - {name: ssn, type: redact, config: {patterns: ['\b\d{3}-\d{2}-\d{4}\b']}}
defaults: [ssn]
`)
	env := newTestEnv(t, Config{Runtime: &Runtime{Filters: set}}, federatedRoutes(t, ls.URL))
	// Same era, same id: only the filter makes the gateway cut the stream
	// into events.
	v, upID := routeCall(t, env, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"gh_search","arguments":{},`+meta2026+`}}`,
		stateless("tools/call", "gh_search")...)
	defer v.close()
	if upID != "5" {
		t.Fatalf("upstream id %s, want the client's", upID)
	}
	hr := v.send(respHeaders(false, ":status", "200", "content-type", "text/event-stream"))
	if hr.GetModeOverride().GetResponseBodyMode().String() != "STREAMED" {
		t.Fatalf("no STREAMED override: %v", hr)
	}
	chunk := v.responseChunk
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"message":"found 123-45-6789"}}`
	if got := chunk("data: "+progress+"\n\n", false); got != "data: "+progress+"\n\n" {
		t.Errorf("progress event %q, want it unchanged", got)
	}
	got := chunk(`data: {"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","content":[{"type":"text","text":"ssn 123-45-6789"}]}}`+"\n\n", true)
	if strings.Contains(got, "123-45-6789") || !strings.Contains(got, `"id":5`) || !strings.HasPrefix(got, "data: ") {
		t.Errorf("response event %q, want the ssn redacted", got)
	}
}
