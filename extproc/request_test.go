package extproc

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/metrics"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
)

const (
	meta2026   = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
)

// TestLocalAnswers drives requests the gateway answers itself, in the
// request-headers phase or the request-body phase, and checks the
// ImmediateResponse Envoy gets.
func TestLocalAnswers(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	tests := []struct {
		name  string
		path  string
		extra []string // request headers beyond the defaults of post
		eos   bool     // end_of_stream on the request headers
		body  string   // "" = the answer comes in the headers phase
		// want
		status     int
		code       int    // JSON-RPC error code; 0 = a result (or no body)
		id         string // expected id JSON; "" = not checked
		headers    map[string]string
		details    string
		noBody     bool
		checkReply func(t *testing.T, r rpcReply)
	}{
		// An unknown path is answered in the body phase when there is a
		// body, so the reply can echo the request's id.
		{name: "unknown route", path: "/mcp/nope", body: `{"jsonrpc":"2.0","id":11,"method":"ping"}`,
			status: 404, code: mcp.CodeInvalidRequest, id: "11", details: detailsUnknownRoute,
			checkReply: wantMessage("no MCP route at /mcp/nope")},
		{name: "unknown route with query", path: "/mcp/nope?x=/mcp/core", body: `{"jsonrpc":"2.0","id":"a\u0062","method":"tools/list"}`,
			status: 404, code: mcp.CodeInvalidRequest, id: `"a\u0062"`, checkReply: wantExactMessage("no MCP route at /mcp/nope")},
		{name: "unknown route, body not JSON", path: "/mcp/nope", body: `{"jsonrpc":"2.0","id":12,`,
			status: 404, code: mcp.CodeInvalidRequest, id: "null", details: detailsUnknownRoute},
		{name: "unknown route, notification", path: "/mcp/nope", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			status: 404, code: mcp.CodeInvalidRequest, id: "null"},
		{name: "unknown route, stateless call", path: "/mcp/nope", extra: stateless("tools/call", "echo"),
			body:   `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"echo",` + meta2026 + `}}`,
			status: 404, code: mcp.CodeInvalidRequest, id: "13"},
		{name: "unknown route without body", path: "/mcp/nope", eos: true,
			status: 404, code: mcp.CodeInvalidRequest, id: "null", details: detailsUnknownRoute},
		{name: "unknown route GET", path: "/mcp/nope", extra: []string{":method", "GET", "content-type", "<drop>"}, eos: true,
			status: 404, code: mcp.CodeInvalidRequest, id: "null", details: detailsUnknownRoute},
		{name: "unknown route PUT with a body", path: "/mcp/nope", extra: []string{":method", "PUT"},
			status: 404, code: mcp.CodeInvalidRequest, id: "null", details: detailsUnknownRoute},
		{name: "path outside MCP", path: "/favicon.ico", extra: []string{":method", "GET"}, eos: true,
			status: 404, code: mcp.CodeInvalidRequest, id: "null", checkReply: wantExactMessage("no MCP route at /favicon.ico")},
		{name: "route without snapshot", path: "/mcp/cold",
			status: 503, code: mcp.CodeInternalError, id: "null", headers: map[string]string{"retry-after": "1"},
			details: detailsRouteNotReady},
		{name: "GET", path: "/mcp/core", extra: []string{":method", "GET", "content-type", "<drop>"}, eos: true,
			status: 405, headers: map[string]string{"allow": "POST"}, details: detailsRejected},
		{name: "DELETE", path: "/mcp/core", extra: []string{":method", "DELETE"}, eos: true,
			status: 405, headers: map[string]string{"allow": "POST"}},
		{name: "wrong content type", path: "/mcp/core", extra: []string{"content-type", "text/plain"},
			status: 415},
		{name: "unacceptable accept", path: "/mcp/core", extra: []string{"accept", "text/html"},
			status: 406},
		{name: "foreign origin", path: "/mcp/core", extra: []string{"origin", "https://evil.example"},
			status: 403},
		{name: "unsupported version header", path: "/mcp/core", extra: []string{"mcp-protocol-version", "1999-01-01"},
			body:   `{"jsonrpc":"2.0","id":301,"method":"server/discover"}`,
			status: 400, code: mcp.CodeUnsupportedProtocolVersion, id: "301"},
		{name: "body over the limit", path: "/mcp/core", extra: []string{"content-length", "2097152"},
			status: 413},
		{name: "POST without body", path: "/mcp/core", eos: true,
			status: 400, code: mcp.CodeInvalidRequest, id: "null", details: detailsEmptyBody},

		{name: "parse error", path: "/mcp/core", body: `{"jsonrpc":"2.0",`,
			status: 400, code: mcp.CodeParseError, id: "null", details: detailsError},
		{name: "batch", path: "/mcp/core", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
			status: 400, code: mcp.CodeInvalidRequest, id: "null"},
		{name: "notification", path: "/mcp/core", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			status: 202, noBody: true, details: detailsReply},
		{name: "initialize", path: "/mcp/core", body: initialize,
			status: 200, id: "1", details: detailsReply,
			checkReply: func(t *testing.T, r rpcReply) {
				var res struct {
					ProtocolVersion string         `json:"protocolVersion"`
					Capabilities    map[string]any `json:"capabilities"`
				}
				mustUnmarshal(t, r.Result, &res)
				if res.ProtocolVersion != mcp.Version20250618 || res.Capabilities["tools"] == nil {
					t.Errorf("initialize result = %s", r.Result)
				}
			}},
		{name: "ping keeps a string id", path: "/mcp/core", body: `{"jsonrpc":"2.0","id":"1","method":"ping"}`,
			status: 200, id: `"1"`,
			checkReply: func(t *testing.T, r rpcReply) {
				if string(r.Result) != "{}" {
					t.Errorf("ping result = %s, want {}", r.Result)
				}
			}},
		{name: "server/discover", path: "/mcp/core", extra: stateless("server/discover"),
			body:   `{"jsonrpc":"2.0","id":1.0,"method":"server/discover","params":{` + meta2026 + `}}`,
			status: 200, id: "1.0",
			checkReply: func(t *testing.T, r rpcReply) {
				var res struct {
					ResultType        string   `json:"resultType"`
					SupportedVersions []string `json:"supportedVersions"`
				}
				mustUnmarshal(t, r.Result, &res)
				if res.ResultType != "complete" || !slices.Contains(res.SupportedVersions, mcp.Version20260728) {
					t.Errorf("server/discover result = %s", r.Result)
				}
			}},
		{name: "tools/list legacy", path: "/mcp/core", extra: []string{"mcp-protocol-version", mcp.Version20251125},
			body:   `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			status: 200, id: "2", checkReply: wantTools(false, "echo", "forecast")},
		{name: "tools/list stateless", path: "/mcp/core", extra: stateless("tools/list"),
			body:   `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta2026 + `}}`,
			status: 200, id: "3", checkReply: wantTools(true, "echo", "forecast")},
		{name: "unknown method legacy", path: "/mcp/core", body: `{"jsonrpc":"2.0","id":4,"method":"prompts/list"}`,
			status: 200, code: mcp.CodeMethodNotFound, id: "4"},
		{name: "unknown method stateless", path: "/mcp/core", extra: stateless("prompts/list"),
			body:   `{"jsonrpc":"2.0","id":4,"method":"prompts/list","params":{` + meta2026 + `}}`,
			status: 404, code: mcp.CodeMethodNotFound, id: "4"},
		{name: "header and body disagree", path: "/mcp/core", extra: stateless("tools/list"),
			body:   `{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{` + meta2026 + `}}`,
			status: 400, code: mcp.CodeHeaderMismatch, id: "5"},
		{name: "unknown tool", path: "/mcp/core",
			body:   `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope","arguments":{}}}`,
			status: 200, code: mcp.CodeInvalidParams, id: "6", details: detailsReply,
			checkReply: wantMessage("unknown tool")},
		{name: "ambiguous tool", path: "/mcp/core",
			body:   `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"dup"}}`,
			status: 200, code: mcp.CodeInvalidParams, id: "7", checkReply: wantMessage("ambiguous tool")},
		{name: "unknown tool stateless", path: "/mcp/core", extra: stateless("tools/call", "nope"),
			body:   `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"nope",` + meta2026 + `}}`,
			status: 200, code: mcp.CodeInvalidParams, id: "8"},
		{name: "arguments not an object", path: "/mcp/core",
			body:   `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":[1]}}`,
			status: 200, code: mcp.CodeInvalidParams, id: "9"},
		{name: "stateless call whose header names another tool", path: "/mcp/core",
			extra:  stateless("tools/call", "forecast"),
			body:   `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo",` + meta2026 + `}}`,
			status: 400, code: mcp.CodeHeaderMismatch, id: "10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := env.open(t)
			resp := v.send(reqHeaders(tc.eos, post(tc.path, len(tc.body), tc.extra...)...))
			if tc.body != "" {
				if resp.GetRequestHeaders() == nil {
					t.Fatalf("headers phase answered %v, want a HeadersResponse", resp)
				}
				resp = v.send(reqBody(tc.body))
			}
			im := resp.GetImmediateResponse()
			if im == nil {
				t.Fatalf("got %v, want an ImmediateResponse", resp)
			}
			if got := int(im.GetStatus().GetCode()); got != tc.status {
				t.Errorf("status = %d, want %d; body %s", got, tc.status, im.GetBody())
			}
			if im.GetGrpcStatus() != nil {
				t.Errorf("grpc_status set on an HTTP reply")
			}
			if !strings.HasPrefix(im.GetDetails(), "toolmesh_") || strings.ContainsAny(im.GetDetails(), " \t") {
				t.Errorf("details = %q, want toolmesh_* without spaces", im.GetDetails())
			}
			if tc.details != "" && im.GetDetails() != tc.details {
				t.Errorf("details = %q, want %q", im.GetDetails(), tc.details)
			}
			set := setOf(t, im.GetHeaders())
			for k, want := range tc.headers {
				if set[k] != want {
					t.Errorf("header %s = %q, want %q", k, set[k], want)
				}
			}
			if len(im.GetBody()) > 0 && set["content-type"] != "application/json" {
				t.Errorf("content-type = %q on a reply with a body", set["content-type"])
			}
			if tc.noBody {
				if len(im.GetBody()) != 0 {
					t.Errorf("body = %s, want none", im.GetBody())
				}
				v.close()
				return
			}
			if tc.status == 405 || tc.status == 202 {
				v.close()
				return
			}
			r := decodeReply(t, im.GetBody())
			if tc.id != "" && string(r.ID) != tc.id {
				t.Errorf("id = %s, want %s", r.ID, tc.id)
			}
			switch {
			case tc.code != 0 && r.Error == nil:
				t.Errorf("got a result, want error %d: %s", tc.code, im.GetBody())
			case tc.code != 0 && r.Error.Code != tc.code:
				t.Errorf("error code = %d, want %d: %s", r.Error.Code, tc.code, im.GetBody())
			case tc.code == 0 && tc.status < 400 && r.Error != nil:
				t.Errorf("got error %+v, want a result", r.Error)
			}
			if tc.checkReply != nil {
				tc.checkReply(t, r)
			}
			v.close()
		})
	}
}

func wantTools(stateless bool, names ...string) func(*testing.T, rpcReply) {
	return func(t *testing.T, r rpcReply) {
		t.Helper()
		var res struct {
			ResultType string `json:"resultType"`
			Tools      []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		mustUnmarshal(t, r.Result, &res)
		var got []string
		for _, tool := range res.Tools {
			got = append(got, tool.Name)
			if len(tool.InputSchema) == 0 {
				t.Errorf("tool %q has no inputSchema", tool.Name)
			}
		}
		if !slices.Equal(got, names) {
			t.Errorf("tools = %v, want %v", got, names)
		}
		if stateless && res.ResultType != "complete" {
			t.Errorf("resultType = %q, want complete", res.ResultType)
		}
		if !stateless && res.ResultType != "" {
			t.Errorf("legacy tools/list carries resultType %q", res.ResultType)
		}
	}
}

func wantMessage(sub string) func(*testing.T, rpcReply) {
	return func(t *testing.T, r rpcReply) {
		t.Helper()
		if r.Error == nil || !strings.Contains(r.Error.Message, sub) {
			t.Errorf("error = %+v, want a message containing %q", r.Error, sub)
		}
	}
}

func wantExactMessage(msg string) func(*testing.T, rpcReply) {
	return func(t *testing.T, r rpcReply) {
		if r.Error == nil || r.Error.Message != msg {
			t.Errorf("error = %+v, want message %q", r.Error, msg)
		}
	}
}

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
}

// TestHeadersPhaseStripsClientHeaders checks that a request that goes on to
// the body phase has every client-supplied x-toolmesh-* header removed and
// does not clear the route cache.
func TestHeadersPhaseStripsClientHeaders(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	var v *envoy
	// A known route, and an unknown path whose body is awaited for its id.
	for _, path := range []string{"/mcp/nope", "/mcp/core"} {
		v = env.open(t)
		resp := v.send(reqHeaders(false, post(path, 10,
			wire.ClusterHeader, "toolsvc_evil", wire.ToolHeader, "x", "X-Other", "kept")...))
		cr := resp.GetRequestHeaders().GetResponse()
		if cr == nil {
			t.Fatalf("%s: got %v, want a HeadersResponse", path, resp)
		}
		removed := cr.GetHeaderMutation().GetRemoveHeaders()
		for _, h := range []string{wire.ClusterHeader, wire.ToolHeader} {
			if !slices.Contains(removed, h) {
				t.Errorf("%s: remove_headers = %v, want %s", path, removed, h)
			}
		}
		if len(cr.GetHeaderMutation().GetSetHeaders()) != 0 || cr.GetClearRouteCache() || cr.GetBodyMutation() != nil {
			t.Errorf("%s: headers phase of a non-routed request mutates more than removals: %v", path, cr)
		}
		if path == "/mcp/nope" {
			v.close()
		}
	}
	// A header reply with no routing header at all still strips the cluster header.
	v2 := env.open(t)
	cr := v2.send(reqHeaders(false, post("/mcp/core", 10)...)).GetRequestHeaders().GetResponse()
	if !slices.Equal(cr.GetHeaderMutation().GetRemoveHeaders(), []string{wire.ClusterHeader}) {
		t.Errorf("remove_headers = %v, want [%s]", cr.GetHeaderMutation().GetRemoveHeaders(), wire.ClusterHeader)
	}
	v.close()
	v2.close()
}

// TestUnexpectedMessages checks the defensive answers to message sequences
// Envoy does not send with the configured processing mode.
func TestUnexpectedMessages(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))

	t.Run("body before headers fails closed", func(t *testing.T) {
		v := env.open(t)
		im := v.send(reqBody(initialize)).GetImmediateResponse()
		if im == nil || im.GetStatus().GetCode() != 500 || im.GetDetails() != detailsHeadersNotHandled {
			t.Fatalf("got %v, want a 500 ImmediateResponse", im)
		}
		v.close()
	})
	t.Run("response messages on a stream that routed nothing", func(t *testing.T) {
		v := env.open(t)
		resp := v.send(respHeaders(false, ":status", "200"))
		if cr := resp.GetResponseHeaders().GetResponse(); cr == nil || cr.GetHeaderMutation() != nil || cr.GetBodyMutation() != nil {
			t.Errorf("response headers: got %v, want an empty CommonResponse", resp)
		}
		resp = v.send(respBody("hello"))
		if cr := resp.GetResponseBody().GetResponse(); cr == nil || cr.GetHeaderMutation() != nil || cr.GetBodyMutation() != nil {
			t.Errorf("response body: got %v, want an empty CommonResponse", resp)
		}
		v.close()
	})
	t.Run("trailers pass", func(t *testing.T) {
		v := env.open(t)
		resp := v.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
			RequestTrailers: &extprocv3.HttpTrailers{}}})
		if resp.GetRequestTrailers() == nil {
			t.Errorf("got %v, want a TrailersResponse", resp)
		}
		resp = v.send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
			ResponseTrailers: &extprocv3.HttpTrailers{}}})
		if resp.GetResponseTrailers() == nil {
			t.Errorf("got %v, want a TrailersResponse", resp)
		}
		v.close()
	})
	t.Run("a message of no known kind gets no answer", func(t *testing.T) {
		v := env.open(t)
		if err := v.stream.Send(&extprocv3.ProcessingRequest{}); err != nil {
			t.Fatal(err)
		}
		// The next reply answers the next message: the empty one got none
		// and did not end the stream.
		resp := v.send(reqHeaders(false, post("/mcp/core", 10)...))
		if resp.GetRequestHeaders() == nil {
			t.Errorf("got %v, want the headers reply", resp)
		}
		v.close()
	})
}

// TestRequestLogAndMetrics checks the per-request debug line (correlation
// fields, redacted credentials) and the request metrics.
func TestRequestLogAndMetrics(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", 10, "mcp-session-id", "sess-9", "x-request-id", "rid-42")...))
	v.send(reqBody(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	v.close()
	v = env.open(t)
	v.send(reqHeaders(false, post("/mcp/nope", 10, "x-request-id", "rid-43")...))
	v.send(reqBody(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	v.close()
	v = env.open(t)
	v.send(reqHeaders(true, post("/mcp/nope", 0, ":method", "GET")...))
	v.close()

	logs := env.logs.String()
	for _, want := range []string{`"request_id":"rid-42"`, `"mcp_session_id":"sess-9"`, `"route":"core"`,
		`"method":"ping"`, `"authorization":"[redacted]"`, `"request_id":"rid-43"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "s3cret") {
		t.Errorf("logs leak the authorization header:\n%s", logs)
	}
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"route": "core", "method": "ping", "era": "legacy", "outcome": outcomeAnswered}, 1},
		{map[string]string{"route": "", "method": "tools/list", "era": "legacy", "outcome": outcomeUnknownRoute}, 1},
		{map[string]string{"route": "", "method": metrics.MethodNone, "era": "legacy", "outcome": outcomeUnknownRoute}, 1},
	} {
		if got := metricValue(t, env.reg, "toolmesh_extproc_requests_total", c.labels); got != c.want {
			t.Errorf("requests_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := metricValue(t, env.reg, "toolmesh_extproc_request_duration_seconds",
		map[string]string{"route": "core", "method": "ping"}); got != 1 {
		t.Errorf("duration samples = %v, want 1", got)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(Config{}, nil, nil, nil); err == nil {
		t.Error("New with nil routes: want an error")
	}
	if _, err := New(Config{MaxResponseBytes: -1}, testRoutes{}, nil, nil); err == nil {
		t.Error("New with a negative limit: want an error")
	}
	// Two servers may share one registry (they share the series).
	env := newTestEnv(t, Config{}, testRoutes{})
	if _, err := New(Config{}, testRoutes{}, nil, env.reg); err != nil {
		t.Errorf("second server on the same registry: %v", err)
	}
}

// TestMessagesAfterAnswer checks that a request whose headers were answered
// (unknown route: no snapshot captured) survives a spurious body message.
func TestMessagesAfterAnswer(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	for _, path := range []string{"/mcp/nope", "/mcp/cold"} {
		v := env.open(t)
		// A PUT to an unknown path is answered on its headers, like any
		// request to a route without a snapshot.
		if v.send(reqHeaders(false, post(path, 10, ":method", "PUT")...)).GetImmediateResponse() == nil {
			t.Fatalf("%s: want an ImmediateResponse", path)
		}
		resp := v.send(reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
		if cr := resp.GetRequestBody().GetResponse(); cr == nil || cr.GetHeaderMutation() != nil || cr.GetBodyMutation() != nil {
			t.Errorf("%s: body after the answer: got %v, want an empty BodyResponse", path, resp)
		}
		v.close()
	}
}
