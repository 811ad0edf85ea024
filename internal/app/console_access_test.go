package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/internal/authtest"
)

// The secrets of the access fixture: each is live in the process (read, or
// sent to it) when the console is read, and none may appear there.
const (
	consoleApprovalKey = "console-approval-hmac-key-0123456789abcdef"
	consoleCredential  = "console-credential-file-content-Yp4"
)

// consoleAccessConfig is the fixture's configuration; ttl and the name of
// the deny policy change on reload.
func consoleAccessConfig(issuer, keyFile, credFile, ttl, denyName string) string {
	return `resourceBase: https://mcp.example.com
auth:
  routes:
    ops: {mode: required, issuers: [{issuer: "` + issuer + `"}], scopes: ["mcp:tools"]}
    open: {mode: "off"}
policies:
  routes:
    ops:
    - {name: staff-only, effect: allow, when: '"dev" in caller.claims.roles'}
    - {name: ` + denyName + `, effect: deny, when: 'tool.name.startsWith("wipe_")'}
approval:
  keys: [{id: k1, file: ` + keyFile + `}]
  ttl: ` + ttl + `
  routes:
    ops: {annotations: [destructiveHint], tools: ["wipe_*"], exempt: [wipe_safe]}
credentials:
  remote: {file: ` + credFile + `}
rateLimits:
  default:
  - {name: per-caller, by: [caller], requests: 600, per: minute, burst: 100}
  routes:
    open: []
`
}

// TestConsoleAccess runs a gateway with authentication, policies and
// approval on one route and none on another, and checks what the state
// document says of each: issuers, audience and scopes; the policies with
// their expressions and the methods they decide; the approval rule, its
// TTL and the tools it selects. A SIGHUP that changes the TTL and renames a
// policy shows in the document. No secret is in it: not the approval key,
// not the credential file's content, not the bearer token a caller sent,
// not the admin token.
func TestConsoleAccess(t *testing.T) {
	key := authtest.NewRSAKey(t, "k1")
	issuer := authtest.NewIssuer(t, "/realm", key).URL
	svc := http.NewServeMux()
	svc.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[
			{"name":"drop","description":"Drops a table.","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}},
			{"name":"t","description":"A test tool.","inputSchema":{"type":"object"}},
			{"name":"wipe_cache","description":"Wipes the cache.","inputSchema":{"type":"object"}},
			{"name":"wipe_safe","description":"Wipes nothing.","inputSchema":{"type":"object"}}]}`)
	})
	svc.HandleFunc("POST /tools/t", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":[{"type":"text","text":"done"}]}`)
	})
	svcSrv := httptest.NewServer(svc)
	t.Cleanup(svcSrv.Close)

	dir := t.TempDir()
	portal := writeFile(t, dir, "portal.yaml", "routes:\n- key: ops\n  toolServices: [{name: svc, url: "+svcSrv.URL+"}]\n"+
		"- key: open\n  toolServices: [{name: svc, url: "+svcSrv.URL+"}]\n")
	keyFile := writeFile(t, dir, "approval.key", consoleApprovalKey+"\n")
	credFile := writeFile(t, dir, "remote.cred", consoleCredential+"\n")
	cfgFile := writeFile(t, dir, "toolmesh.yaml", consoleAccessConfig(issuer, keyFile, credFile, "2m", "no-wipe"))
	tokenFile := writeFile(t, dir, "admin.token", adminToken)
	p := startProcess(t, "run", "--portal", portal, "--config", cfgFile, "--admin-token-file", tokenFile)

	// A caller's token reaches the process: a call with it is routed.
	bearer := key.Sign(t, map[string]any{"iss": issuer, "sub": "alice", "aud": "https://mcp.example.com/mcp/ops",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools", "roles": []string{"dev"}})
	if r := rawPost(t, p.addrs["dataplane"], "/mcp/ops", append(clientHeaders(3), "Authorization: Bearer "+bearer), callT, 0); r.status != http.StatusOK || !strings.Contains(string(r.body), "done") {
		t.Fatalf("call with a valid token: %d %s", r.status, r.body)
	}

	state := func() (string, map[string]json.RawMessage) {
		t.Helper()
		resp := adminGet(t, p.addrs["admin"], "/console/api/state", "Bearer "+adminToken)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("state: %d %v", resp.StatusCode, err)
		}
		var doc struct {
			Routes map[string]json.RawMessage `json:"routes"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		return string(b), doc.Routes
	}
	access := func(routes map[string]json.RawMessage, route string) map[string]any {
		t.Helper()
		var r struct {
			Access map[string]any `json:"access"`
		}
		if err := json.Unmarshal(routes[route], &r); err != nil || r.Access == nil {
			t.Fatalf("route %s has no access: %s (%v)", route, routes[route], err)
		}
		return r.Access
	}
	var routes map[string]json.RawMessage
	waitFor(t, "the approval tools of ops to be listed", func() bool {
		_, routes = state()
		ap, _ := access(routes, "ops")["approval"].(map[string]any)
		return ap != nil && ap["selectedTotal"] == float64(2)
	})

	ops := access(routes, "ops")
	want := map[string]any{
		"auth": map[string]any{"mode": "required", "issuers": []any{issuer},
			"audience": "https://mcp.example.com/mcp/ops", "resource": "https://mcp.example.com/mcp/ops", "scopes": []any{"mcp:tools"}},
		"policies": []any{
			map[string]any{"name": "staff-only", "effect": "allow", "when": `"dev" in caller.claims.roles`,
				"subjects": []any{"tool", "resource", "prompt"},
				"methods": []any{"tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list",
					"completion/complete", "prompts/get", "prompts/list"}},
			map[string]any{"name": "no-wipe", "effect": "deny", "when": `tool.name.startsWith("wipe_")`,
				"subjects": []any{"tool"}, "methods": []any{"tools/call", "tools/list"}},
		},
		"approval": map[string]any{"annotations": []any{"destructiveHint"}, "tools": []any{"wipe_*"},
			"exempt": []any{"wipe_safe"}, "ttl": "2m0s", "selectedTotal": float64(2), "selected": []any{
				map[string]any{"name": "drop", "why": "annotation destructiveHint"},
				map[string]any{"name": "wipe_cache", "why": "tool pattern wipe_*"},
			}},
		"rateLimits": []any{map[string]any{"scope": "", "name": "per-caller", "tools": "*", "by": "caller",
			"rate": "600 per 1m0s, burst 100", "keys": float64(1)}},
	}
	if !reflect.DeepEqual(ops, want) {
		got, _ := json.MarshalIndent(ops, "", "  ")
		exp, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("ops access:\n%s\nwant\n%s", got, exp)
	}
	open := access(routes, "open")
	if want := map[string]any{"auth": map[string]any{"mode": "off"}, "policies": []any{}, "rateLimits": []any{}}; !reflect.DeepEqual(open, want) {
		t.Errorf("open access: %v, want %v", open, want)
	}

	// SIGHUP puts a new TTL and a renamed policy in force; the console
	// shows them.
	if err := os.WriteFile(cfgFile, []byte(consoleAccessConfig(issuer, keyFile, credFile, "3m", "no-wipe-v2")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, "the reloaded approval TTL and policy name in the console", func() bool {
		body, routes = state()
		ops := access(routes, "ops")
		ap, _ := ops["approval"].(map[string]any)
		pols, _ := ops["policies"].([]any)
		return ap != nil && ap["ttl"] == "3m0s" && len(pols) == 2 && pols[1].(map[string]any)["name"] == "no-wipe-v2"
	})

	for what, secret := range map[string]string{"approval key": consoleApprovalKey, "credential": consoleCredential,
		"bearer token": bearer, "admin token": adminToken} {
		if strings.Contains(body, secret) {
			t.Errorf("the state document shows the %s", what)
		}
	}
	for _, leak := range []string{filepath.Base(keyFile), filepath.Base(credFile)} {
		if strings.Contains(body, leak) {
			t.Errorf("the state document names the secret file %s", leak)
		}
	}
}
