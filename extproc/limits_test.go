package extproc

import (
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/mcp"
)

func limitsEnv(t *testing.T, cfg *ratelimit.Config) *testEnv {
	t.Helper()
	env := newTestEnv(t, Config{}, approvalTable(t))
	l, err := ratelimit.New(cfg, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.srv.SetRateLimiter(l)
	return env
}

func legacyCall(id, tool string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
}

// callOnce sends one tools/call (legacy, or 2026-07-28 with its headers)
// from client address addr and returns the body-phase reply; the stream is
// closed unless keep.
func callOnce(t *testing.T, env *testEnv, era, tool, id, addr string, keep bool) (*extprocv3.ProcessingResponse, *envoy) {
	t.Helper()
	v := env.open(t)
	var body string
	extra := []string{"x-forwarded-for", "203.0.113.9, " + addr}
	if era == mcp.Version20260728 {
		body = deleteCall(id, `{}`, "", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`)
		body = strings.Replace(body, "delete_repo", tool, 1)
		extra = append(extra, stateless("tools/call", tool)...)
	} else {
		body = legacyCall(id, tool)
	}
	v.send(reqHeaders(false, post("/mcp/core", len(body), extra...)...))
	resp := v.send(reqBody(body))
	if !keep {
		v.close()
	}
	return resp, v
}

func TestRateLimitAnswer(t *testing.T) {
	for _, era := range []string{"2025-11-25", mcp.Version20260728} {
		t.Run(era, func(t *testing.T) {
			env := limitsEnv(t, &ratelimit.Config{Routes: map[string][]ratelimit.Limit{"core": {
				{Name: "deletes", Tools: []string{"delete_repo"}, By: []string{"caller"}, Requests: 2, Per: "day"}}}})
			for i := range 2 {
				if im := must(callOnce(t, env, era, "delete_repo", "1", "10.1.1.1", false)).GetImmediateResponse(); im != nil {
					t.Fatalf("call %d answered locally: %v", i, im)
				}
			}
			resp, _ := callOnce(t, env, era, "delete_repo", `"r-3"`, "10.1.1.1", false)
			im := resp.GetImmediateResponse()
			if im == nil || im.GetStatus().GetCode() != 429 {
				t.Fatalf("third call: %v, want 429", resp)
			}
			h := map[string]string{}
			for _, o := range im.GetHeaders().GetSetHeaders() {
				h[o.GetHeader().GetKey()] = string(o.GetHeader().GetRawValue())
			}
			if h["retry-after"] == "" || h["ratelimit-policy"] != `"deletes";q=2;w=86400` || !strings.HasPrefix(h["ratelimit"], `"deletes";r=0;t=`) {
				t.Errorf("headers %v", h)
			}
			r := decodeReply(t, im.GetBody())
			if string(r.ID) != `"r-3"` || r.Error == nil || r.Error.Code != ratelimit.CodeRateLimited ||
				!strings.Contains(string(im.GetBody()), `"retryAfterMs":`) {
				t.Errorf("body %s", im.GetBody())
			}
			// Another client address is another (anonymous) caller; a tool
			// the limit does not select is not counted.
			if im := must(callOnce(t, env, era, "delete_repo", "4", "10.1.1.2", false)).GetImmediateResponse(); im != nil {
				t.Errorf("other address limited: %v", im)
			}
			if im := must(callOnce(t, env, era, "list_repos", "5", "10.1.1.1", false)).GetImmediateResponse(); im != nil {
				t.Errorf("list_repos limited: %v", im)
			}
			if !strings.Contains(env.logs.String(), `"msg":"audit","event":"ratelimit","caller":"anonymous","route":"core","tool":"delete_repo","limit":"deletes"`) {
				t.Errorf("no audit event:\n%s", env.logs.String())
			}
			if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", map[string]string{"route": "core", "tool": "delete_repo", "outcome": outcomeRateLimited}); got != 1 {
				t.Errorf("rate_limited calls %v", got)
			}
		})
	}
}

func must(r *extprocv3.ProcessingResponse, _ *envoy) *extprocv3.ProcessingResponse { return r }

// TestConcurrencyLimitReleasedAtStreamEnd: a call holds its slot until its
// ext_proc stream ends, however it ends.
func TestConcurrencyLimitReleasedAtStreamEnd(t *testing.T) {
	env := limitsEnv(t, &ratelimit.Config{Default: []ratelimit.Limit{{Name: "one", By: []string{"caller"}, Concurrency: 1}}})
	first, v := callOnce(t, env, "2025-11-25", "list_repos", "1", "10.1.1.1", true)
	if first.GetImmediateResponse() != nil {
		t.Fatalf("first: %v", first)
	}
	second, _ := callOnce(t, env, "2025-11-25", "list_repos", "2", "10.1.1.1", false)
	if second.GetImmediateResponse().GetStatus().GetCode() != 429 ||
		!strings.Contains(string(second.GetImmediateResponse().GetBody()), `"reason":"concurrency"`) {
		t.Fatalf("second while the first is in flight: %v", second)
	}
	v.close() // the first call's stream ends: its slot is free
	if third, _ := callOnce(t, env, "2025-11-25", "list_repos", "3", "10.1.1.1", false); third.GetImmediateResponse() != nil {
		t.Fatalf("third after the first ended: %v", third)
	}
}

// TestRateLimitNeverHidesTools: a tools/list while every call is refused
// still lists every tool.
func TestRateLimitNeverHidesTools(t *testing.T) {
	env := limitsEnv(t, &ratelimit.Config{Default: []ratelimit.Limit{{Name: "none", Concurrency: 1, Requests: 1, Per: "day"}}})
	callOnce(t, env, "2025-11-25", "list_repos", "1", "10.1.1.1", false)
	if r, _ := callOnce(t, env, "2025-11-25", "delete_repo", "2", "10.1.1.1", false); r.GetImmediateResponse().GetStatus().GetCode() != 429 {
		t.Fatalf("not limited: %v", r)
	}
	v := env.open(t)
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	v.send(reqHeaders(false, post("/mcp/core", len(body))...))
	resp := v.send(reqBody(body))
	v.close()
	b := string(resp.GetImmediateResponse().GetBody())
	if !strings.Contains(b, `"delete_repo"`) || !strings.Contains(b, `"list_repos"`) {
		t.Errorf("tools/list %s", b)
	}
}
