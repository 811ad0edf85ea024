package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/authtest"
)

// docIssuer is the issuer of the worked example in docs/authorization.md;
// the test serves it on 127.0.0.1 under the same path.
const docIssuer = "https://idp.example.com/realms/tools"

// workedExampleYAML returns the configuration of docs/authorization.md's
// worked example, as the document shows it, so document and test cannot
// drift.
func workedExampleYAML(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/authorization.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n## A worked example\n")
	if !ok {
		t.Fatal(`docs/authorization.md: no "## A worked example" section`)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	if !ok {
		t.Fatal("docs/authorization.md: the worked example has no yaml block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok || !strings.Contains(block, docIssuer) {
		t.Fatalf("docs/authorization.md: the worked example's yaml block does not name %s:\n%s", docIssuer, block)
	}
	return block
}

// exampleIdP is the example's issuer on 127.0.0.1: discovery, JWKS and
// RS256 tokens signed with go-jose.
type exampleIdP struct {
	issuer string
	key    *authtest.Key
}

func startExampleIdP(t *testing.T) *exampleIdP {
	t.Helper()
	key := authtest.NewRSAKey(t, "example-1")
	return &exampleIdP{issuer: authtest.NewIssuer(t, "/realms/tools", key).URL, key: key}
}

// token signs an access token of sub for route core with claims extra.
func (p *exampleIdP) token(t *testing.T, sub string, extra map[string]any) string {
	t.Helper()
	c := map[string]any{"iss": p.issuer, "sub": sub, "aud": "https://mcp.example.com/mcp/core",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools"}
	for k, v := range extra {
		c[k] = v
	}
	return p.key.Sign(t, c)
}

// crmService is the example's Tool Service: delete_customer is
// destructive, get_customer read-only. It records every invocation.
type crmService struct {
	url   string
	mu    sync.Mutex
	calls []string // tool name + " " + arguments
}

func (s *crmService) invoked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func startCRM(t *testing.T) *crmService {
	t.Helper()
	s := &crmService{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[
			{"name":"delete_customer","description":"Deletes a customer.","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true},"path":"/tools/delete_customer"},
			{"name":"get_customer","description":"Reads a customer.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"path":"/tools/get_customer"}]}`)
	})
	mux.HandleFunc("POST /tools/{tool}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.calls = append(s.calls, r.PathValue("tool")+" "+string(b))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"done":true}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// mcpEra is how a test client speaks one protocol era.
type mcpEra struct {
	version string
	meta    string // the params' _meta member of a 2026-07-28 request, else ""
}

var (
	era2025 = mcpEra{version: "2025-11-25"}
	era2026 = mcpEra{version: "2026-07-28",
		meta: `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`}
)

// exampleRPC posts method to route core in era e with token tok ("" for
// none); params are the params members besides _meta.
func exampleRPC(t *testing.T, p *process, e mcpEra, tok, method, name, params string) (int, http.Header, map[string]any) {
	t.Helper()
	if e.meta != "" {
		if params != "" {
			params += ","
		}
		params += e.meta
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.addrs["dataplane"]+"/mcp/core", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", e.version)
	if e.meta != "" {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, name, resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header, out
}

func listedTools(t *testing.T, p *process, e mcpEra, tok string) []string {
	t.Helper()
	code, _, out := exampleRPC(t, p, e, tok, "tools/list", "", "")
	tools, ok := dig(out, "result", "tools").([]any)
	if code != 200 || !ok {
		t.Fatalf("tools/list (%s): %d %v", e.version, code, out)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, dig(tl, "name").(string))
	}
	return names
}

func callTool(t *testing.T, p *process, e mcpEra, tok, tool, args, extra string) (int, map[string]any) {
	t.Helper()
	params := `"name":"` + tool + `","arguments":` + args
	if extra != "" {
		params += "," + extra
	}
	code, _, out := exampleRPC(t, p, e, tok, "tools/call", tool, params)
	return code, out
}

// TestWorkedExample runs `toolmesh run` with exactly the configuration of
// docs/authorization.md's worked example (its issuer served on 127.0.0.1)
// and checks through the local data plane, with RS256 tokens: an admin
// sees and calls the destructive tool; a developer is not listed it in
// either era and calling it is answered as an unknown tool, without the
// Tool Service being called; no token is a 401 with the challenge. Then
// approval is added to the route (SIGHUP): the admin's 2026-07-28 call gets
// input_required, the state is bound to the admin (another admin's token
// cannot use it), and the audit events of the admin's call name the same
// caller through authentication, authorization and approval, never the
// token. A reload with a when that does not compile keeps the approval in
// force.
func TestWorkedExample(t *testing.T) {
	idp := startExampleIdP(t)
	crm := startCRM(t)
	example := strings.ReplaceAll(workedExampleYAML(t), docIssuer, idp.issuer)

	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	if err := os.WriteFile(portal, []byte(`{"routes":[{"key":"core","toolServices":[{"name":"crm","url":"`+crm.url+`"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "toolmesh.yaml")
	writeCfg := func(doc string) {
		t.Helper()
		if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg(example)
	p := startProcess(t, "run", "--portal", portal, "--config", cfgFile, "--log-level", "debug")

	admin := idp.token(t, "ann", map[string]any{"roles": []string{"admin"}})
	admin2 := idp.token(t, "abe", map[string]any{"roles": []string{"admin"}})
	dev := idp.token(t, "dan", map[string]any{"roles": []string{"dev"}})
	sales := idp.token(t, "sal", map[string]any{"roles": []string{"sales"}})
	noRoles := idp.token(t, "nor", nil)
	wantCalls := func(t *testing.T, want ...string) {
		t.Helper()
		if got := crm.invoked(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("Tool Service invocations %q, want %q", got, want)
		}
	}

	// No token: 401 with the challenge, whatever the method.
	for _, e := range []mcpEra{era2025, era2026} {
		code, h, out := exampleRPC(t, p, e, "", "tools/list", "", "")
		const challenge = `Bearer scope="mcp:tools", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/core"`
		if code != 401 || h.Get("Www-Authenticate") != challenge || dig(out, "error", "code") != float64(-32600) {
			t.Fatalf("no token (%s): %d %q %v", e.version, code, h.Get("Www-Authenticate"), out)
		}
	}

	for _, e := range []mcpEra{era2025, era2026} {
		t.Run(e.version, func(t *testing.T) {
			for _, tc := range []struct {
				who, tok string
				want     string
			}{
				{"admin", admin, "delete_customer,get_customer"},
				{"dev", dev, "get_customer"},
				{"no roles claim", noRoles, ""},
				{"sales", sales, ""},
			} {
				if got := strings.Join(listedTools(t, p, e, tc.tok), ","); got != tc.want {
					t.Errorf("%s lists %q, want %q", tc.who, got, tc.want)
				}
			}

			// A developer's call of the destructive tool is answered as
			// the call of a tool that does not exist.
			hiddenCode, hidden := callTool(t, p, e, dev, "delete_customer", `{"id":"c-1"}`, "")
			unknownCode, unknown := callTool(t, p, e, dev, "no_such_tool", `{"id":"c-1"}`, "")
			hiddenErr, _ := json.Marshal(hidden["error"])
			unknownErr, _ := json.Marshal(unknown["error"])
			if hiddenCode != unknownCode || hidden["error"] == nil ||
				string(hiddenErr) != strings.ReplaceAll(string(unknownErr), "no_such_tool", "delete_customer") ||
				dig(hidden, "error", "message") != "unknown tool: delete_customer" {
				t.Errorf("dev's call of delete_customer: %d %s\nunknown tool: %d %s", hiddenCode, hiddenErr, unknownCode, unknownErr)
			}
			// Without a role the route offers nothing, not even the
			// read-only tool.
			for _, tok := range []string{noRoles, sales} {
				if _, out := callTool(t, p, e, tok, "get_customer", `{"id":"c-1"}`, ""); dig(out, "error", "message") != "unknown tool: get_customer" {
					t.Errorf("a caller without a staff role calls get_customer: %v", out)
				}
			}
			wantCalls(t)
		})
	}

	// The admin's call is routed (legacy era: approval is not configured
	// yet); a developer's call of the read-only tool too.
	if code, out := callTool(t, p, era2025, admin, "delete_customer", `{"id":"c-1"}`, ""); code != 200 || dig(out, "result", "isError") == true {
		t.Fatalf("admin's call: %d %v", code, out)
	}
	if code, out := callTool(t, p, era2026, dev, "get_customer", `{"id":"c-2"}`, ""); code != 200 || dig(out, "result", "isError") == true {
		t.Fatalf("dev's call of get_customer: %d %v", code, out)
	}
	wantCalls(t, `delete_customer {"id":"c-1"}`, `get_customer {"id":"c-2"}`)

	// Part two: the same route with approval of destructive tools.
	t.Setenv("TOOLMESH_TEST_EXAMPLE_APPROVAL_KEY", approvalSecretA)
	withApproval := example + "\napproval:\n  keys: [{id: k1, env: TOOLMESH_TEST_EXAMPLE_APPROVAL_KEY}]\n  routes:\n    core: {annotations: [destructiveHint]}\n"
	hangup := func(wantLog string) {
		t.Helper()
		before := strings.Count(p.logs.String(), wantLog)
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(p.logs.String(), wantLog) == before {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the logs after SIGHUP", wantLog)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	writeCfg(withApproval)
	hangup("approval configuration reloaded")

	const args = `{"id":"c-3"}`
	logStart := len(p.logs.String())
	code, out := callTool(t, p, era2026, admin, "delete_customer", args, "")
	state, _ := dig(out, "result", "requestState").(string)
	if code != 200 || dig(out, "result", "resultType") != "input_required" || state == "" {
		t.Fatalf("admin's 2026-07-28 call: %d %v, want input_required", code, out)
	}
	approve := `"requestState":"` + state + `","inputResponses":{"toolmesh_approval":{"action":"accept","content":{"approve":true}}}`

	// Another admin cannot use the state minted for ann; a developer does
	// not even see the tool.
	code, out = callTool(t, p, era2026, admin2, "delete_customer", args, approve)
	if code != 200 || dig(out, "error", "code") != float64(-32602) || dig(out, "error", "data", "reason") != "other_caller" {
		t.Fatalf("another admin's replay: %d %v, want -32602 other_caller", code, out)
	}
	code, out = callTool(t, p, era2026, dev, "delete_customer", args, approve)
	if code != 200 || dig(out, "error", "message") != "unknown tool: delete_customer" {
		t.Fatalf("a developer's replay: %d %v, want unknown tool", code, out)
	}
	wantCalls(t, `delete_customer {"id":"c-1"}`, `get_customer {"id":"c-2"}`)

	// The admin's approved retry is routed, once, with the arguments.
	code, out = callTool(t, p, era2026, admin, "delete_customer", args, approve)
	if code != 200 || dig(out, "result", "isError") == true || dig(out, "result", "structuredContent", "done") != true {
		t.Fatalf("admin's approved call: %d %v", code, out)
	}
	wantCalls(t, `delete_customer {"id":"c-1"}`, `get_customer {"id":"c-2"}`, `delete_customer `+args)

	// Audit: each layer names the admin as ann, and no token appears.
	// Request logs are written when the ext_proc stream ends, which may be
	// after the client has its answer: wait for them.
	wantLogs := []string{
		// authentication: the request log (debug) of each admin request
		`msg="mcp request" .*route=core path=/mcp/core caller=ann method=tools/call .*outcome=approval`,
		`msg="mcp request" .*route=core path=/mcp/core caller=ann method=tools/call .*outcome=ok .*tool=delete_customer tool_service=crm`,
		// authorization
		`msg=audit .*event=authorization caller=ann route=core method=tools/call tool=delete_customer decision=allow`,
		// approval
		`msg=audit .*event=approval caller=ann route=core tool=delete_customer service=crm decision=requested reason="annotation destructiveHint"`,
		`msg=audit .*event=approval caller=abe route=core tool=delete_customer service=crm decision=refused reason=other_caller`,
		`msg=audit .*event=approval caller=ann route=core tool=delete_customer service=crm decision=granted reason="annotation destructiveHint"`,
		// the developer's replay stopped at authorization
		`msg=audit .*event=authorization caller=dan route=core method=tools/call tool=delete_customer decision=deny policy=admins-only-destructive`,
	}
	var adminCall string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		adminCall = p.logs.String()[logStart:]
		var missing []string
		for _, re := range wantLogs {
			if !regexp.MustCompile(re).MatchString(adminCall) {
				missing = append(missing, re)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs lack\n%s\nin:\n%s", strings.Join(missing, "\n"), grepLines(adminCall, "delete_customer"))
		}
	}
	logs := p.logs.String()
	for _, tok := range []string{admin, admin2, dev, sales, noRoles} {
		sig := tok[strings.LastIndexByte(tok, '.')+1:]
		if strings.Contains(logs, sig) {
			t.Fatal("a token's signature is in the logs")
		}
	}
	if strings.Contains(adminCall, "authorization=") && !strings.Contains(adminCall, `authorization="[redacted]"`) && !strings.Contains(adminCall, "authorization=[redacted]") {
		t.Errorf("the Authorization header is logged unredacted:\n%s", grepLines(adminCall, "authorization="))
	}

	// A when that does not compile: the reload is refused, naming the
	// field, and the approval in force stays.
	writeCfg(example + "\napproval:\n  keys: [{id: k1, env: TOOLMESH_TEST_EXAMPLE_APPROVAL_KEY}]\n  routes:\n    core: {when: 'args.id ==', annotations: [destructiveHint]}\n")
	hangup("approval.routes.core.when")
	if code, out := callTool(t, p, era2026, admin, "delete_customer", `{"id":"c-4"}`, ""); code != 200 || dig(out, "result", "resultType") != "input_required" {
		t.Fatalf("after a refused reload: %d %v, want input_required", code, out)
	}
	// A when on the caller, reloaded: the admin needs no approval any more,
	// another role would.
	writeCfg(example + "\napproval:\n  keys: [{id: k1, env: TOOLMESH_TEST_EXAMPLE_APPROVAL_KEY}]\n  routes:\n    core: {annotations: [destructiveHint], when: '!(\"admin\" in caller.claims.roles)'}\n")
	hangup("approval configuration reloaded")
	if code, out := callTool(t, p, era2026, admin, "delete_customer", `{"id":"c-5"}`, ""); code != 200 || dig(out, "result", "structuredContent", "done") != true {
		t.Fatalf("admin under a when on the caller: %d %v, want routed", code, out)
	}
	wantCalls(t, `delete_customer {"id":"c-1"}`, `get_customer {"id":"c-2"}`, `delete_customer `+args, `delete_customer {"id":"c-5"}`)
}
