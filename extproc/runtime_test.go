package extproc

import (
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// TestRuntimeCapturedOncePerStream: a Runtime put in force while a request
// is under way (between its request headers and its body, and again
// before its response) changes nothing that request sees; the next
// request sees all of it. The new Runtime limits the weather service's
// bodies to 150 bytes and redacts results.
func TestRuntimeCapturedOncePerStream(t *testing.T) {
	env := newTestEnv(t, Config{}, testTable(t))
	pad := strings.Repeat("x", 200)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"` + pad + `"}}}`
	reply := `{"ssn":"123-45-6789"}`
	reload := func(limit bool, redact bool) {
		t.Helper()
		err := env.srv.UpdateRuntime(func(cur *Runtime) (*Runtime, error) {
			next := *cur
			if limit {
				next.BodyLimits = BodyLimits{Services: map[string]int64{"weather": 150}}
			}
			if redact {
				next.Filters = redactFilters(t)
			}
			return &next, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body), "mcp-protocol-version", "2025-11-25")...))
	reload(true, false) // mid-request: after the headers, before the body
	resp := v.send(reqBody(body))
	if got := setOf(t, resp.GetRequestBody().GetResponse().GetHeaderMutation())[wire.ClusterHeader]; got != "toolsvc_weather" {
		t.Fatalf("the request under way saw the new body limit: %v", resp)
	}
	reload(true, true) // mid-request: after the body, before the response
	v.send(respHeaders(false, ":status", "200", "content-type", "application/json"))
	out := v.send(respBody(reply))
	if got := string(out.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); !strings.Contains(got, "123-45-6789") {
		t.Errorf("the request under way saw the new filters: %s", got)
	}
	v.close()

	// The next request sees the new Runtime: its body is over the limit.
	v = env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body), "mcp-protocol-version", "2025-11-25")...))
	resp = v.send(reqBody(body))
	if ir := resp.GetImmediateResponse(); ir == nil || ir.GetStatus().GetCode() != 413 {
		t.Fatalf("a request after the reload: %v, want 413", resp)
	}
	v.close()

	// And its results are redacted.
	small := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo"}}}`
	v = env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(small), "mcp-protocol-version", "2025-11-25")...))
	v.send(reqBody(small))
	v.send(respHeaders(false, ":status", "200", "content-type", "application/json"))
	out = v.send(respBody(reply))
	if got := string(out.GetResponseBody().GetResponse().GetBodyMutation().GetBody()); strings.Contains(got, "123-45-6789") {
		t.Errorf("a request after the reload was not filtered: %s", got)
	}
	v.close()
}
