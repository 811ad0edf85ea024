package extproc

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
)

var (
	approvalKey1 = approval.Key{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}
	approvalKey2 = approval.Key{ID: "k2", Secret: []byte("fedcba9876543210fedcba9876543210")}
)

// approvalTable is route "core" with Tool Service "repo": delete_repo is
// destructive, list_repos is not.
func approvalTable(t testing.TB) testRoutes {
	route := registry.Route{Key: "core", ToolServices: []registry.ToolService{{Name: "repo", URL: "http://repo.tools.svc:8080"}}}
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{"repo": {Tools: []registry.ManifestTool{
		{Name: "delete_repo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: json.RawMessage(`{"destructiveHint":true}`)},
		{Name: "list_repos", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: json.RawMessage(`{"readOnlyHint":true}`)},
	}}})
	return testRoutes{"/mcp/core": {key: "core", snap: snap}}
}

// approvalEnv is a server with approval on for route core (default rule:
// every tool not declared read-only), its clock at *now.
func approvalEnv(t testing.TB, now *time.Time, keys ...approval.Key) *testEnv {
	t.Helper()
	env := newTestEnv(t, Config{}, approvalTable(t))
	a, err := approval.New(approval.Config{Keys: keys, TTL: time.Minute, Now: func() time.Time { return *now },
		Routes: map[string]approval.Rule{"core": {}}})
	if err != nil {
		t.Fatal(err)
	}
	env.srv.SetApproval(a)
	return env
}

const (
	capsElicit = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	approveYes = `"inputResponses":{"toolmesh_approval":{"action":"accept","content":{"approve":true}}}`
)

// deleteCall is a 2026-07-28 tools/call of delete_repo; extra are further
// params members.
func deleteCall(id, args, extra, meta string) string {
	if extra != "" {
		extra += ","
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"delete_repo","arguments":` + args + `,` + extra + meta + `}}`
}

// exchange2026 sends one 2026-07-28 tools/call of tool through env and
// returns the headers-phase reply and the body-phase reply.
func exchange2026(t *testing.T, env *testEnv, tool, body string) (*extprocv3.CommonResponse, *extprocv3.ProcessingResponse) {
	t.Helper()
	v := env.open(t)
	hr := v.send(reqHeaders(false, post("/mcp/core", len(body), stateless("tools/call", tool)...)...)).GetRequestHeaders().GetResponse()
	resp := v.send(reqBody(body))
	v.close()
	return hr, resp
}

// askApproval makes the first call and returns the gateway's requestState.
func askApproval(t *testing.T, env *testEnv, args string) string {
	t.Helper()
	_, resp := exchange2026(t, env, "delete_repo", deleteCall("1", args, "", capsElicit))
	im := resp.GetImmediateResponse()
	if im == nil || im.GetStatus().GetCode() != 200 {
		t.Fatalf("first call: got %v, want a 200 answer", resp)
	}
	var doc struct {
		Result struct {
			ResultType    string `json:"resultType"`
			RequestState  string `json:"requestState"`
			InputRequests map[string]struct {
				Method string `json:"method"`
				Params struct {
					Mode            string          `json:"mode"`
					Message         string          `json:"message"`
					RequestedSchema json.RawMessage `json:"requestedSchema"`
				} `json:"params"`
			} `json:"inputRequests"`
		} `json:"result"`
	}
	if err := json.Unmarshal(im.GetBody(), &doc); err != nil {
		t.Fatal(err)
	}
	ir, ok := doc.Result.InputRequests["toolmesh_approval"]
	if doc.Result.ResultType != "input_required" || doc.Result.RequestState == "" || !ok ||
		ir.Method != "elicitation/create" || ir.Params.Mode != "form" {
		t.Fatalf("first call: %s", im.GetBody())
	}
	for _, want := range []string{`tool "delete_repo"`, `Tool Service "repo"`, `route "core"`, "no readOnlyHint: true annotation"} {
		if !strings.Contains(ir.Params.Message, want) {
			t.Errorf("message %q lacks %q", ir.Params.Message, want)
		}
	}
	return doc.Result.RequestState
}

// rpcErrorOf decodes an answer that must be a JSON-RPC error.
func rpcErrorOf(t *testing.T, resp *extprocv3.ProcessingResponse) (status, code int, message, reason string) {
	t.Helper()
	im := resp.GetImmediateResponse()
	if im == nil {
		t.Fatalf("got %v, want an immediate answer", resp)
	}
	var doc struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(im.GetBody(), &doc); err != nil || doc.Error.Code == 0 {
		t.Fatalf("not a JSON-RPC error: %s", im.GetBody())
	}
	return int(im.GetStatus().GetCode()), doc.Error.Code, doc.Error.Message, doc.Error.Data.Reason
}

func TestApprovalFlow(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	env := approvalEnv(t, &now, approvalKey1)
	const args = `{"repo":"acme/site", "force":true}`

	// Not selected by the rule: routed in the headers phase, as before.
	hr, resp := exchange2026(t, env, "list_repos", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_repos","arguments":{},`+capsElicit+`}}`)
	if setOf(t, hr.GetHeaderMutation())[wire.ClusterHeader] != "toolsvc_repo" || resp.GetRequestBody() == nil {
		t.Fatalf("list_repos: headers %v, body %v; want routed", hr, resp)
	}

	state := askApproval(t, env, args)

	// The approved retry is routed with the original arguments; the call
	// that needs approval was not routed in the headers phase.
	hr, resp = exchange2026(t, env, "delete_repo", deleteCall("2", args, `"requestState":"`+state+`",`+approveYes, capsElicit))
	if set := setOf(t, hr.GetHeaderMutation()); len(set) != 0 || !slices.Contains(hr.GetHeaderMutation().GetRemoveHeaders(), wire.ClusterHeader) {
		t.Fatalf("headers phase of a call that needs approval: %v, want no routing", hr)
	}
	if body := resp.GetRequestBody().GetResponse().GetBodyMutation().GetBody(); string(body) != args {
		t.Fatalf("approved call: got %v, want routed with %s", resp, args)
	}

	for _, tc := range []struct {
		name        string
		body        string
		status      int
		code        int    // JSON-RPC error code; 0: a result
		reason      string // data.reason of a refused state
		isError     string // text of an isError result
		inputAgain  bool   // a new input_required result
		advance     time.Duration
		otherServer bool
	}{
		{name: "declined", body: deleteCall("4", args, `"requestState":"`+state+`","inputResponses":{"toolmesh_approval":{"action":"decline"}}`, capsElicit),
			isError: "not approved: the user did not approve this call (decline)"},
		{name: "cancelled", body: deleteCall("4", args, `"requestState":"`+state+`","inputResponses":{"toolmesh_approval":{"action":"cancel"}}`, capsElicit),
			isError: "(cancel)"},
		{name: "approve false", body: deleteCall("4", args, `"requestState":"`+state+`","inputResponses":{"toolmesh_approval":{"action":"accept","content":{"approve":false}}}`, capsElicit),
			isError: "(accept)"},
		{name: "replayed approval", body: deleteCall("4", args, `"requestState":"`+state+`",`+approveYes, capsElicit),
			status: 200, code: mcp.CodeInvalidParams, reason: "spent"},
		{name: "answer without state", body: deleteCall("4", args, approveYes, capsElicit), inputAgain: true},
		{name: "state without answer", body: deleteCall("4", args, `"requestState":"`+state+`"`, capsElicit), inputAgain: true},
		{name: "answer of the wrong shape", body: deleteCall("4", args, `"requestState":"`+state+`","inputResponses":{"toolmesh_approval":{"action":"accept","content":{"approve":"yes"}}}`, capsElicit), inputAgain: true},
		{name: "tampered state", body: deleteCall("4", args, `"requestState":"`+state[:len(state)-3]+`AAA",`+approveYes, capsElicit),
			status: 200, code: mcp.CodeInvalidParams, reason: "bad_signature"},
		{name: "replayed with other arguments", body: deleteCall("4", `{"repo":"acme/prod","force":true}`, `"requestState":"`+state+`",`+approveYes, capsElicit),
			status: 200, code: mcp.CodeInvalidParams, reason: "other_arguments"},
		{name: "replayed for another tool", body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_repos","arguments":{},"requestState":"` + state + `",` + approveYes + `,` + capsElicit + `}}`},
		{name: "another server's state", body: deleteCall("4", args, `"requestState":"eyJzdGVwIjoxfQ.c2ln",`+approveYes, capsElicit),
			status: 200, code: mcp.CodeInvalidParams, reason: "malformed_state"},
		{name: "expired", body: deleteCall("4", args, `"requestState":"`+state+`",`+approveYes, capsElicit), advance: time.Minute,
			status: 200, code: mcp.CodeInvalidParams, reason: "expired"},
		{name: "no elicitation capability", body: deleteCall("4", args, "", meta2026),
			status: 400, code: mcp.CodeMissingClientCapability},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now = now.Add(tc.advance)
			defer func() { now = now.Add(-tc.advance) }()
			tool := "delete_repo"
			if strings.Contains(tc.body, `"name":"list_repos"`) {
				tool = "list_repos"
			}
			_, resp := exchange2026(t, env, tool, tc.body)
			switch {
			case tool == "list_repos":
				// delete_repo's state says nothing about list_repos, which
				// needs no approval: routed, the state not looked at.
				if resp.GetRequestBody() == nil {
					t.Fatalf("got %v, want routed", resp)
				}
			case tc.code != 0:
				status, code, msg, reason := rpcErrorOf(t, resp)
				if status != tc.status || code != tc.code || reason != tc.reason || msg == "" {
					t.Fatalf("got %d %d %q reason %q, want %d %d reason %q", status, code, msg, reason, tc.status, tc.code, tc.reason)
				}
			case tc.inputAgain:
				var doc struct {
					Result struct{ ResultType, RequestState string } `json:"result"`
				}
				if err := json.Unmarshal(resp.GetImmediateResponse().GetBody(), &doc); err != nil || doc.Result.ResultType != "input_required" {
					t.Fatalf("got %v, want input_required", resp)
				}
			default:
				if resp.GetImmediateResponse() == nil {
					t.Fatalf("got %v, want an answer", resp)
				}
				res := decodeResult(t, resp.GetImmediateResponse().GetBody(), "4")
				if !res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, tc.isError) {
					t.Fatalf("got %+v, want isError with %q", res, tc.isError)
				}
			}
		})
	}

	for decision, want := range map[string]float64{"requested": 4, "granted": 1, "declined": 3, "refused": 5, "unsupported": 1} {
		if got := metricValue(t, env.reg, "toolmesh_approvals_total", map[string]string{"route": "core", "decision": decision}); got != want {
			t.Errorf("toolmesh_approvals_total{decision=%q} = %v, want %v", decision, got, want)
		}
	}
	if got := metricValue(t, env.reg, "toolmesh_tool_calls_total", map[string]string{"route": "core", "tool": "delete_repo", "outcome": outcomeApproval}); got != 13 {
		t.Errorf("tool_calls_total{outcome=approval} = %v, want 13", got)
	}
	logs := env.logs.String()
	for _, want := range []string{`"msg":"audit","event":"approval","caller":"anonymous","route":"core","tool":"delete_repo","service":"repo","decision":"granted","reason":"no readOnlyHint: true annotation"`,
		`"decision":"refused","reason":"other_arguments"`, `"decision":"declined","reason":"decline"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s", want)
		}
	}
}

// TestApprovalReplicas: a state minted by one server is accepted by another
// with the same keys, including after the second rotated to a new signing
// key; a server without the minting key refuses it.
func TestApprovalReplicas(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const args = `{"repo":"acme/site"}`
	a := approvalEnv(t, &now, approvalKey1)
	state := askApproval(t, a, args)
	retry := deleteCall("2", args, `"requestState":"`+state+`",`+approveYes, capsElicit)
	for _, tc := range []struct {
		name   string
		keys   []approval.Key
		reason string
	}{
		{"same keys", []approval.Key{approvalKey1}, ""},
		{"rotated: new key signs, old verifies", []approval.Key{approvalKey2, approvalKey1}, ""},
		{"other keys", []approval.Key{approvalKey2}, "unknown_key"},
		{"same key id, other secret", []approval.Key{{ID: "k1", Secret: approvalKey2.Secret}}, "bad_signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := approvalEnv(t, &now, tc.keys...)
			_, resp := exchange2026(t, b, "delete_repo", retry)
			if tc.reason == "" {
				if string(resp.GetRequestBody().GetResponse().GetBodyMutation().GetBody()) != args {
					t.Fatalf("got %v, want routed", resp)
				}
				return
			}
			if _, code, _, reason := rpcErrorOf(t, resp); code != mcp.CodeInvalidParams || reason != tc.reason {
				t.Fatalf("got %d %q, want -32602 %q", code, reason, tc.reason)
			}
		})
	}
}

// TestApprovalSingleUseAcrossReplicas: replicas sharing a Ledger (the
// Redis store's in production) run an approved call once between them;
// with one in-process ledger each, each replica runs it once (the
// documented limit without Redis).
func TestApprovalSingleUseAcrossReplicas(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const args = `{"repo":"acme/site"}`
	replica := func(l approval.Ledger) *testEnv {
		env := newTestEnv(t, Config{}, approvalTable(t))
		a, err := approval.New(approval.Config{Keys: []approval.Key{approvalKey1}, TTL: time.Minute,
			Now: func() time.Time { return now }, Routes: map[string]approval.Rule{"core": {}}, Ledger: l})
		if err != nil {
			t.Fatal(err)
		}
		env.srv.SetApproval(a)
		return env
	}
	shared := approval.NewMemoryLedger(func() time.Time { return now })
	a, b, c := replica(shared), replica(shared), replica(nil)
	state := askApproval(t, a, args)
	retry := deleteCall("2", args, `"requestState":"`+state+`",`+approveYes, capsElicit)
	if _, resp := exchange2026(t, b, "delete_repo", retry); string(resp.GetRequestBody().GetResponse().GetBodyMutation().GetBody()) != args {
		t.Fatalf("first use on replica b: got %v, want routed", resp)
	}
	for name, env := range map[string]*testEnv{"a": a, "b": b} {
		_, resp := exchange2026(t, env, "delete_repo", retry)
		if _, code, msg, reason := rpcErrorOf(t, resp); code != mcp.CodeInvalidParams || reason != "spent" || !strings.Contains(msg, "already used") {
			t.Fatalf("second use on replica %s: got %d %q %q, want -32602 spent", name, code, reason, msg)
		}
	}
	if _, resp := exchange2026(t, c, "delete_repo", retry); string(resp.GetRequestBody().GetResponse().GetBodyMutation().GetBody()) != args {
		t.Fatalf("replica c with its own ledger: got %v, want routed once", resp)
	}
}

// TestApprovalLegacyEra: a legacy-era client cannot carry the approval: an
// isError result that says so and how to exempt the tool; never routed.
func TestApprovalLegacyEra(t *testing.T) {
	now := time.Now()
	env := approvalEnv(t, &now, approvalKey1)
	body := `{"jsonrpc":"2.0","id":"l","method":"tools/call","params":{"name":"delete_repo","arguments":{},"requestState":"x",` + approveYes + `}}`
	v := env.open(t)
	v.send(reqHeaders(false, post("/mcp/core", len(body), "mcp-protocol-version", mcp.Version20251125)...))
	resp := v.send(reqBody(body))
	v.close()
	if resp.GetImmediateResponse() == nil {
		t.Fatalf("got %v, want an answer", resp)
	}
	res := decodeResult(t, resp.GetImmediateResponse().GetBody(), `"l"`)
	if !res.IsError || !strings.Contains(res.Content[0].Text, "protocol version 2025-11-25 cannot carry the approval request") ||
		!strings.Contains(res.Content[0].Text, "approval.routes.core.exempt") {
		t.Fatalf("got %+v", res)
	}
	if got := metricValue(t, env.reg, "toolmesh_approvals_total", map[string]string{"route": "core", "decision": "unsupported"}); got != 1 {
		t.Errorf("unsupported = %v, want 1", got)
	}
}

// TestApprovalFederated: an approved call of a federated server's tool is
// forwarded without the gateway's requestState and answer; a server's own
// requestState on a tool that needs approval is refused (the client cannot
// carry two); with no rule selecting the tool, the server's multi
// round-trip retry passes untouched.
func TestApprovalFederated(t *testing.T) {
	ls := newLegacyServer(t)
	env := newTestEnv(t, Config{}, federatedRoutes(t, ls.URL))
	send := func(body string) *extprocv3.ProcessingResponse {
		t.Helper()
		v := env.open(t)
		defer v.close()
		v.send(reqHeaders(false, post("/mcp/fed", len(body), stateless("tools/call", "gh_search")...)...))
		return v.send(reqBody(body))
	}
	call := func(id, extra string) string {
		if extra != "" {
			extra += ","
		}
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"gh_search","arguments":{"q":"x"},` + extra + capsElicit + `}}`
	}
	serverRetry := call("3", `"requestState":"server-state-1","inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}`)

	// No approval: the server's retry is forwarded with its state and answers.
	if got := bodyOf(send(serverRetry)); !strings.Contains(got, `"requestState":"server-state-1"`) || !strings.Contains(got, `"inputResponses":{"confirm"`) {
		t.Fatalf("without approval the MRTR retry changed: %s", got)
	}

	a, err := approval.New(approval.Config{Keys: []approval.Key{approvalKey1}, Routes: map[string]approval.Rule{"fed": {Tools: []string{"gh_*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	env.srv.SetApproval(a)
	var first struct {
		Result struct{ ResultType, RequestState string } `json:"result"`
	}
	if err := json.Unmarshal(send(call("1", "")).GetImmediateResponse().GetBody(), &first); err != nil || first.Result.ResultType != "input_required" {
		t.Fatalf("first call: %v %+v", err, first)
	}
	want := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"},` + capsElicit + `}}`
	if got := bodyOf(send(call("2", `"requestState":"`+first.Result.RequestState+`",`+approveYes))); got != want {
		t.Fatalf("approved call forwarded as\n%s\nwant\n%s", got, want)
	}
	_, code, msg, reason := rpcErrorOf(t, send(serverRetry))
	if code != mcp.CodeInvalidParams || reason != "malformed_state" || !strings.Contains(msg, "not issued by this gateway") {
		t.Fatalf("server's state on a tool that needs approval: %d %q %q", code, msg, reason)
	}
}

// TestApprovalWhen: a rule's when condition decides in the body phase, with
// the caller and the arguments. A condition that reads either is not
// decided on the headers, so a call it selects by name is never routed in
// the request-headers phase; one that reads neither (here the era) is
// decided on the headers, and a call it does not select is routed early as
// before.
func TestApprovalWhen(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		rule    approval.Rule
		caller  *identity.Caller
		args    string
		early   bool // routed in the request-headers phase
		needs   bool // answered input_required in the body phase
		wantWhy string
	}{
		{name: "args over the threshold", rule: approval.Rule{Tools: []string{"list_repos"}, When: "args.limit > 100"},
			args: `{"limit":500}`, needs: true, wantWhy: "tool pattern list_repos and the when condition"},
		{name: "args under the threshold", rule: approval.Rule{Tools: []string{"list_repos"}, When: "args.limit > 100"},
			args: `{"limit":5}`},
		{name: "args missing: fail safe", rule: approval.Rule{Tools: []string{"list_repos"}, When: "args.limit > 100"},
			args: `{}`, needs: true, wantWhy: "could not be evaluated"},
		{name: "caller without the role", rule: approval.Rule{Tools: []string{"list_repos"}, When: `!("admin" in caller.claims.roles)`},
			caller: devCaller, args: `{}`, needs: true, wantWhy: "tool pattern list_repos and the when condition"},
		{name: "caller with the role", rule: approval.Rule{Tools: []string{"list_repos"}, When: `!("admin" in caller.claims.roles)`},
			caller: adminCaller, args: `{}`},
		{name: "era only, false: routed early", rule: approval.Rule{Tools: []string{"list_repos"}, When: `era_kind == "legacy"`},
			args: `{}`, early: true},
		{name: "era only, true", rule: approval.Rule{Tools: []string{"list_repos"}, When: `era == "2026-07-28"`},
			args: `{}`, needs: true, wantWhy: "tool pattern list_repos and the when condition"},
		// Guarded conditions are false on the headers alone (no arguments,
		// anonymous), so only the header-phase rule keeps these from being
		// routed early.
		{name: "guarded args", rule: approval.Rule{Tools: []string{"list_repos"}, When: "has(args.limit) && args.limit > 100"},
			args: `{"limit":500}`, needs: true, wantWhy: "tool pattern list_repos and the when condition"},
		{name: "guarded caller", rule: approval.Rule{When: `has(caller.claims.roles) && "dev" in caller.claims.roles && !("admin" in caller.claims.roles)`},
			caller: devCaller, args: `{}`, needs: true, wantWhy: "because of the when condition"},
		{name: "not selected by name: routed early", rule: approval.Rule{Tools: []string{"delete_*"}, When: "args.limit > 100"},
			args: `{"limit":500}`, early: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, Config{}, approvalTable(t))
			env.srv.callerSeam = callerFromHeaders
			a, err := approval.New(approval.Config{Keys: []approval.Key{approvalKey1}, TTL: time.Minute,
				Now: func() time.Time { return now }, Routes: map[string]approval.Rule{"core": tc.rule}})
			if err != nil {
				t.Fatal(err)
			}
			env.srv.SetApproval(a)
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_repos","arguments":` + tc.args + `,` + capsElicit + `}}`
			extra := stateless("tools/call", "list_repos")
			if tc.caller != nil {
				extra = as(tc.caller, extra...)
			}
			v := env.open(t)
			hr := v.send(reqHeaders(false, post("/mcp/core", len(body), extra...)...)).GetRequestHeaders().GetResponse()
			resp := v.send(reqBody(body))
			v.close()

			routedEarly := setOf(t, hr.GetHeaderMutation())[wire.ClusterHeader] != ""
			if routedEarly != tc.early {
				t.Fatalf("routed in the headers phase: %v, want %v (%v)", routedEarly, tc.early, hr)
			}
			if !tc.needs {
				// Routed: the cluster is set in the headers phase (early) or
				// in the body phase.
				cluster := setOf(t, hr.GetHeaderMutation())[wire.ClusterHeader]
				if c := setOf(t, resp.GetRequestBody().GetResponse().GetHeaderMutation())[wire.ClusterHeader]; c != "" {
					cluster = c
				}
				if resp.GetRequestBody() == nil || cluster != "toolsvc_repo" {
					t.Fatalf("body phase: got %v, want routed", resp)
				}
				return
			}
			var doc struct {
				Result struct {
					ResultType    string `json:"resultType"`
					InputRequests map[string]struct {
						Params struct{ Message string } `json:"params"`
					} `json:"inputRequests"`
				} `json:"result"`
			}
			if err := json.Unmarshal(resp.GetImmediateResponse().GetBody(), &doc); err != nil || doc.Result.ResultType != "input_required" {
				t.Fatalf("body phase: got %v, want input_required", resp)
			}
			if msg := doc.Result.InputRequests["toolmesh_approval"].Params.Message; !strings.Contains(msg, tc.wantWhy) {
				t.Fatalf("message %q lacks %q", msg, tc.wantWhy)
			}
		})
	}
}
