package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/extproc/approval"
)

const (
	approvalSecretA = "0123456789abcdef0123456789abcdef"
	approvalSecretB = "fedcba9876543210fedcba9876543210"
)

func TestApprovalConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyA := write("a", approvalSecretA+"\n")
	short := write("short", "too short\n")
	t.Setenv("TOOLMESH_TEST_APPROVAL_KEY", approvalSecretB)
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"file and env keys", `{keys: [{id: k1, file: ` + keyA + `}, {id: k2, env: TOOLMESH_TEST_APPROVAL_KEY}], ttl: 2m, routes: {core: {tools: ["delete_*"]}}, default: {}}`, ""},
		{"no keys", `{routes: {core: {}}}`, "approval.keys: at least one key is required"},
		{"short key", `{keys: [{id: k1, file: ` + short + `}]}`, "approval.keys[0] (id k1): the key has 9 bytes, at least 32 are required"},
		{"missing file", `{keys: [{id: k1, file: ` + dir + `/nope}]}`, "approval.keys[0] (id k1): read key file"},
		{"unset env", `{keys: [{id: k1, env: TOOLMESH_TEST_APPROVAL_UNSET}]}`, "environment variable TOOLMESH_TEST_APPROVAL_UNSET is not set"},
		{"file and env", `{keys: [{id: k1, file: ` + keyA + `, env: X}]}`, "file and env are exclusive"},
		{"neither", `{keys: [{id: k1}]}`, "one of file and env is required"},
		{"duplicate ids", `{keys: [{id: k1, file: ` + keyA + `}, {id: k1, env: TOOLMESH_TEST_APPROVAL_KEY}]}`, `approval.keys[1].id "k1": duplicate key id`},
		{"ttl too long", `{keys: [{id: k1, file: ` + keyA + `}], ttl: 2h}`, "approval.ttl 2h0m0s: must be between 10s and 1h0m0s"},
		{"bad pattern", `{keys: [{id: k1, file: ` + keyA + `}], routes: {core: {exempt: ["["]}}}`, "approval.routes.core.exempt: pattern"},
		{"unknown field", `{keys: [{id: k1, file: ` + keyA + `}], route: {}}`, `unknown field "route"`},
		{"when", `{keys: [{id: k1, file: ` + keyA + `}], routes: {core: {tools: [transfer], when: "args.amount > 1000"}}}`, ""},
		{"bad when", `{keys: [{id: k1, file: ` + keyA + `}], routes: {core: {when: "caller.claim.roles == []"}}}`,
			"approval.routes.core.when: ERROR: <input>:1:7: undefined field 'claim'"},
		{"when not bool", `{keys: [{id: k1, file: ` + keyA + `}], default: {when: "args"}}`, "approval.default.when: when is of type map(string, dyn), not bool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			err := loadConfigFile(write("c.yaml", "approval: "+tc.yaml+"\n"), &cfg)
			if err == nil {
				err = cfg.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// approvalService is a Tool Service with a destructive tool, drop, that
// records the arguments of every invocation.
type approvalService struct {
	url   string
	mu    sync.Mutex
	calls []string
}

func (s *approvalService) invoked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func startApprovalService(t *testing.T) *approvalService {
	t.Helper()
	s := &approvalService{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"drop","description":"Drops a table.","inputSchema":{"type":"object"},
			"annotations":{"destructiveHint":true},"path":"/tools/drop"}]}`)
	})
	mux.HandleFunc("POST /tools/drop", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.calls = append(s.calls, string(b))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"dropped":true}`)
	})
	svc := httptest.NewServer(mux)
	t.Cleanup(svc.Close)
	s.url = svc.URL
	return s
}

// approvalGateway runs `toolmesh run` with route r on svc and the approval
// config written to cfgPath; it returns the process.
func approvalGateway(t *testing.T, svc *approvalService, cfgPath, keyFile string) *process {
	t.Helper()
	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.json")
	doc := `{"routes":[{"key":"r","toolServices":[{"name":"db","url":"` + svc.url + `"}]}]}`
	if err := os.WriteFile(portal, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	writeApprovalConfig(t, cfgPath, keyFile)
	return startProcess(t, "run", "--portal", portal, "--config", cfgPath)
}

func writeApprovalConfig(t *testing.T, cfgPath, keyFile string) {
	t.Helper()
	cfg := "approval:\n  keys: [{id: k1, file: " + keyFile + "}]\n  ttl: 1m\n  routes:\n    r: {}\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

const approvalMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// callDrop sends a 2026-07-28 tools/call of drop through the data plane.
func callDrop(t *testing.T, p *process, id, args, extra string) (int, map[string]any) {
	t.Helper()
	if extra != "" {
		extra += ","
	}
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"drop","arguments":` + args + `,` + extra + approvalMeta + `}}`
	return rpc(t, "http://"+p.addrs["dataplane"], "r", body, map[string]string{
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "drop"})
}

func answer(state, action string, approve bool) string {
	content := ""
	if action == "accept" {
		content = `,"content":{"approve":` + map[bool]string{true: "true", false: "false"}[approve] + `}`
	}
	return `"requestState":"` + state + `","inputResponses":{"toolmesh_approval":{"action":"` + action + `"` + content + `}}`
}

// TestRunApproval goes through the whole path (local data plane → ext_proc →
// Tool Service) with a raw 2026-07-28 client: the Tool Service sees exactly
// the approved calls, with their original arguments; a second replica with
// the same key accepts the first one's state, one with another key refuses
// it; SIGHUP re-reads the approval block, keeping the last good one.
func TestRunApproval(t *testing.T) {
	dir := t.TempDir()
	keyA, keyB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for f, v := range map[string]string{keyA: approvalSecretA, keyB: approvalSecretB} {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	svc := startApprovalService(t)
	cfg1 := filepath.Join(dir, "one.yaml")
	p1 := approvalGateway(t, svc, cfg1, keyA)
	p2 := approvalGateway(t, svc, filepath.Join(dir, "two.yaml"), keyA)
	p3 := approvalGateway(t, svc, filepath.Join(dir, "three.yaml"), keyB)

	const args = `{"table":"users", "cascade":true}`
	ask := func(p *process) string {
		t.Helper()
		code, out := callDrop(t, p, "1", args, "")
		state, _ := dig(out, "result", "requestState").(string)
		if code != 200 || dig(out, "result", "resultType") != "input_required" || state == "" ||
			dig(out, "result", "inputRequests", "toolmesh_approval", "method") != "elicitation/create" {
			t.Fatalf("first call: %d %v", code, out)
		}
		return state
	}
	wantCalls := func(want ...string) {
		t.Helper()
		if got := svc.invoked(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("Tool Service invocations %q, want %q", got, want)
		}
	}
	wantRefused := func(code int, out map[string]any, reason string) {
		t.Helper()
		if code != 200 || dig(out, "error", "code") != float64(-32602) || dig(out, "error", "data", "reason") != reason {
			t.Fatalf("got %d %v, want -32602 %s", code, out, reason)
		}
	}

	state := ask(p1)
	wantCalls()

	// Declined: never called.
	code, out := callDrop(t, p1, "2", args, answer(state, "decline", false))
	if code != 200 || dig(out, "result", "isError") != true {
		t.Fatalf("declined: %d %v", code, out)
	}
	// Tampered, other arguments: never called.
	code, out = callDrop(t, p1, "3", args, answer(state[:len(state)-4]+"AAAA", "accept", true))
	wantRefused(code, out, "bad_signature")
	code, out = callDrop(t, p1, "4", `{"table":"orders","cascade":true}`, answer(state, "accept", true))
	wantRefused(code, out, "other_arguments")
	wantCalls()

	// Approved: called once, with the arguments as the client sent them.
	code, out = callDrop(t, p1, "5", args, answer(state, "accept", true))
	if code != 200 || dig(out, "result", "isError") == true || dig(out, "result", "structuredContent", "dropped") != true {
		t.Fatalf("approved: %d %v", code, out)
	}
	wantCalls(args)
	// Single use: the same approval again is refused (issue 26).
	code, out = callDrop(t, p1, "51", args, answer(state, "accept", true))
	wantRefused(code, out, "spent")
	wantCalls(args)

	// Another replica with the same key accepts p1's state (without Redis
	// each replica keeps its own ledger of used approvals, the documented
	// limit); one with another key refuses it (and calls nothing).
	code, out = callDrop(t, p2, "6", args, answer(state, "accept", true))
	if code != 200 || dig(out, "result", "structuredContent", "dropped") != true {
		t.Fatalf("replica, same key: %d %v", code, out)
	}
	code, out = callDrop(t, p3, "7", args, answer(state, "accept", true))
	wantRefused(code, out, "bad_signature") // key id k1 there, with another secret
	wantCalls(args, args)

	// SIGHUP: a bad block (a key too short) is refused and the approval in
	// force stays; a good one that drops key A takes effect.
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangup := func(wantLog string) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(p1.logs.String(), wantLog) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the logs after SIGHUP", wantLog)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	writeApprovalConfig(t, cfg1, short)
	hangup("keeps its last good configuration")
	// The approval in force still asks and grants, and still remembers
	// the approval already used.
	code, out = callDrop(t, p1, "81", args, answer(state, "accept", true))
	wantRefused(code, out, "spent")
	state = ask(p1)
	code, out = callDrop(t, p1, "8", args, answer(state, "accept", true))
	if code != 200 || dig(out, "result", "structuredContent", "dropped") != true {
		t.Fatalf("after a bad reload: %d %v", code, out)
	}
	writeApprovalConfig(t, cfg1, keyB)
	hangup("approval configuration reloaded")
	code, out = callDrop(t, p1, "9", args, answer(state, "accept", true))
	wantRefused(code, out, "bad_signature")
	wantCalls(args, args, args)

	// The metric and the audit event of the grant.
	if !strings.Contains(p1.logs.String(), `msg=audit mode=run component=extproc event=approval caller=anonymous route=r tool=drop service=db decision=granted`) {
		t.Errorf("no audit event of the grant in the logs:\n%s", lastLines(p1.logs.String(), 20))
	}
	_, metrics := httpGet(t, "http://"+p1.addrs["admin"]+"/metrics")
	if !strings.Contains(metrics, `toolmesh_approvals_total{decision="granted",route="r"} 2`) {
		t.Errorf("metrics lack the grants:\n%s", grepLines(metrics, "toolmesh_approvals_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestApprovalRuleDefaults: an entry that names neither annotations nor
// tools selects destructiveHint; an explicit empty list selects nothing.
func TestApprovalRuleDefaults(t *testing.T) {
	t.Setenv("TOOLMESH_TEST_APPROVAL_KEY", approvalSecretA)
	cfg := defaultConfig()
	doc := "approval:\n  keys: [{id: k1, env: TOOLMESH_TEST_APPROVAL_KEY}]\n  routes:\n    a: {}\n    b: {annotations: []}\n    c: {tools: [x]}\n"
	if err := parseConfig([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	ap, err := cfg.Approval.build(nil)
	if err != nil {
		t.Fatal(err)
	}
	destructive := approval.Tool{Name: "drop", Annotations: []byte(`{"destructiveHint":true}`)}
	for route, want := range map[string]bool{"a": true, "b": false, "c": false, "d": false} {
		if got, _ := ap.Needs(route, destructive, approval.Call{}); got != want {
			t.Errorf("route %s: needs approval %v, want %v", route, got, want)
		}
	}
}

// TestApprovalWhenErrorsExit2: a when that does not compile stops the start
// with the usage exit code, naming the field.
func TestApprovalWhenErrorsExit2(t *testing.T) {
	t.Setenv("TOOLMESH_TEST_APPROVAL_KEY", approvalSecretA)
	cfg := filepath.Join(t.TempDir(), "toolmesh.yaml")
	doc := "approval:\n  keys: [{id: k1, env: TOOLMESH_TEST_APPROVAL_KEY}]\n  routes:\n    core: {when: 'args.amount >'}\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	code := execute(t.Context(), []string{"run", "--config", cfg}, io.Discard, &stderr, hooks{})
	if code != exitUsage || !strings.Contains(stderr.String(), "approval.routes.core.when: ERROR: <input>:1:14: Syntax error") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
}
