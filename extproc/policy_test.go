package extproc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/catalog"
	"github.com/toolmesh/toolmesh/extproc/identity"
	"github.com/toolmesh/toolmesh/extproc/procmsg"
	"github.com/toolmesh/toolmesh/registry"
)

// Callers of the policy tests, by bearer token: the test seam stands in for
// authentication and maps the Authorization header to one of them.
var (
	devCaller = &identity.Caller{Authenticated: true, Issuer: "https://idp.example", Subject: "dave",
		Claims: map[string]any{"roles": []any{"dev"}}, Scopes: []string{"mcp:tools"}, Token: "dev-secret-token"}
	dev2Caller = &identity.Caller{Authenticated: true, Issuer: "https://idp.example", Subject: "dora",
		Claims: map[string]any{"roles": []any{"dev"}}, Token: "dev2-secret-token"}
	adminCaller = &identity.Caller{Authenticated: true, Issuer: "https://idp.example", Subject: "ada",
		Claims: map[string]any{"roles": []any{"admin", "dev"}}, Token: "admin-secret-token"}
)

var testCallers = map[string]*identity.Caller{
	"Bearer " + devCaller.Token:   devCaller,
	"Bearer " + dev2Caller.Token:  dev2Caller,
	"Bearer " + adminCaller.Token: adminCaller,
}

func callerFromHeaders(hm *corev3.HeaderMap) *identity.Caller {
	for _, h := range hm.GetHeaders() {
		if h.GetKey() == "authorization" {
			return testCallers[procmsg.HeaderValue(h)]
		}
	}
	return nil
}

// as is the extra request headers of a request of caller c.
func as(c *identity.Caller, extra ...string) []string {
	return append([]string{"authorization", "Bearer " + c.Token}, extra...)
}

const adminsOnlyDestructive = `tool.annotations.destructiveHint && !("admin" in caller.claims.roles)`

func policyEnv(t testing.TB, routes Routes, cfg *authz.Config) *testEnv {
	t.Helper()
	e := newTestEnv(t, Config{}, routes)
	e.srv.callerSeam = callerFromHeaders
	set, err := authz.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.SetPolicies(set)
	return e
}

func routePolicies(route string, ps ...authz.Policy) *authz.Config {
	return &authz.Config{Routes: map[string][]authz.Policy{route: ps}}
}

// bigSnapshot is route "core" with n tools, pages of pageSize; every 7th
// tool is destructive, the others read-only.
func bigSnapshot(t testing.TB, n, pageSize int, mode string, skip ...int) *registry.Snapshot {
	t.Helper()
	route := registry.Route{Key: "core", Catalog: &registry.Catalog{PageSize: pageSize, Mode: mode}}
	if mode == "search" {
		route.Catalog.Shortlist = registry.MaxShortlist
	}
	manifests := map[string]*registry.Manifest{}
	for i := range n {
		if slices.Contains(skip, i) {
			continue
		}
		svc := fmt.Sprintf("svc-%d", i/1000)
		m := manifests[svc]
		if m == nil {
			m = &registry.Manifest{}
			manifests[svc] = m
			route.ToolServices = append(route.ToolServices, registry.ToolService{Name: svc, URL: "http://" + svc + ".tools.svc:8080"})
		}
		ann := `{"readOnlyHint":true}`
		if destructive(i) {
			ann = `{"destructiveHint":true}`
		}
		m.Tools = append(m.Tools, registry.ManifestTool{Name: fmt.Sprintf("tool_%05d", i),
			Description: "Manages records of kind " + fmt.Sprint(i) + ".",
			InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: json.RawMessage(ann)})
	}
	return buildSnapshot(t, route, manifests)
}

func destructive(i int) bool { return i%7 == 0 }

// exchangeOnce sends one request and returns the body-phase answer (and the
// headers-phase one).
func exchangeOnce(t testing.TB, e *testEnv, path, body string, extra ...string) (hdr, resp *extprocv3.ProcessingResponse) {
	t.Helper()
	v := e.open(t)
	defer v.close()
	hdr = v.send(reqHeaders(false, post(path, len(body), extra...)...))
	if hdr.GetImmediateResponse() != nil {
		return hdr, hdr
	}
	return hdr, v.send(reqBody(body))
}

// listPage is one tools/list (or items list) answer.
func listPage(t testing.TB, e *testEnv, c *identity.Caller, method, cursor string) (names []string, next string, raw string) {
	t.Helper()
	params := ""
	if cursor != "" {
		params = `,"params":{"cursor":` + fmt.Sprintf("%q", cursor) + `}`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `"` + params + `}`
	_, r := exchangeOnce(t, e, "/mcp/core", body, as(c, "mcp-protocol-version", "2025-11-25")...)
	im := r.GetImmediateResponse()
	rep := decodeReply(t, im.GetBody())
	if rep.Error != nil {
		t.Fatalf("%s cursor %q: error %+v", method, cursor, rep.Error)
	}
	var res struct {
		Tools      []struct{ Name string } `json:"tools"`
		NextCursor string                  `json:"nextCursor"`
	}
	if err := json.Unmarshal(rep.Result, &res); err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names, res.NextCursor, string(im.GetBody())
}

// TestPolicyToolsListPaging walks every page of a 3,000-tool route as a
// developer and as an admin: the developer never sees a tool it may not
// call, pages stay full, cursors name only tools it saw, and a hidden
// tool's call is the unknown-tool answer, headers phase included.
func TestPolicyToolsListPaging(t *testing.T) {
	const n, size = 3000, 100
	snap := bigSnapshot(t, n, size, "")
	e := policyEnv(t, testRoutes{"/mcp/core": {key: "core", snap: snap}},
		routePolicies("core", authz.Policy{Name: "admins-only-destructive", Effect: "deny", When: adminsOnlyDestructive}))

	walk := func(c *identity.Caller) []string {
		var all []string
		cursor := ""
		for page := 0; ; page++ {
			names, next, _ := listPage(t, e, c, "tools/list", cursor)
			if next != "" && len(names) != size {
				t.Fatalf("page %d has %d tools, want %d: page sizes must not show what was hidden", page, len(names), size)
			}
			all = append(all, names...)
			if next == "" {
				return all
			}
			if raw, err := base64.RawURLEncoding.DecodeString(next); err != nil || !strings.HasSuffix(string(raw), names[len(names)-1]) {
				t.Fatalf("cursor %q does not name the page's last visible tool %s", next, names[len(names)-1])
			}
			cursor = next
		}
	}
	devSees := walk(devCaller)
	want := 0
	seen := map[string]bool{}
	for _, name := range devSees {
		var i int
		fmt.Sscanf(name, "tool_%05d", &i)
		if destructive(i) {
			t.Fatalf("developer listed destructive tool %s", name)
		}
		if seen[name] {
			t.Fatalf("%s listed twice", name)
		}
		seen[name] = true
	}
	for i := range n {
		if !destructive(i) {
			want++
		}
	}
	if len(devSees) != want {
		t.Errorf("developer saw %d tools, want %d", len(devSees), want)
	}
	if got := walk(adminCaller); len(got) != n {
		t.Errorf("admin saw %d tools, want %d", len(got), n)
	}

	// A hidden tool's call is answered as a tool that does not exist: the
	// same bytes as on a route without it and without policies.
	without := newTestEnv(t, Config{}, testRoutes{"/mcp/core": {key: "core", snap: bigSnapshot(t, n, size, "", 7)}})
	for _, era := range []struct {
		name  string
		body  string
		extra []string
	}{
		{"legacy", `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"tool_00007","arguments":{}}}`, nil},
		{"stateless", `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"tool_00007","arguments":{},` + meta2026 + `}}`,
			stateless("tools/call", "tool_00007")},
	} {
		gotH, got := exchangeOnce(t, e, "/mcp/core", era.body, as(devCaller, era.extra...)...)
		wantH, wantR := exchangeOnce(t, without, "/mcp/core", era.body, as(devCaller, era.extra...)...)
		if !proto.Equal(gotH, wantH) {
			t.Errorf("%s: headers phase differs from an unknown tool's:\n got %v\nwant %v", era.name, gotH, wantH)
		}
		if !proto.Equal(got, wantR) {
			t.Errorf("%s: hidden tool answered\n %v\nunknown tool answered\n %v", era.name, got, wantR)
		}
		if !strings.Contains(string(got.GetImmediateResponse().GetBody()), "unknown tool: tool_00007") {
			t.Errorf("%s: %s", era.name, got.GetImmediateResponse().GetBody())
		}
		// The admin's call is routed.
		_, r := exchangeOnce(t, e, "/mcp/core", era.body, as(adminCaller, era.extra...)...)
		if r.GetRequestBody() == nil {
			t.Errorf("%s: admin's call not routed: %v", era.name, r)
		}
	}

	// A cursor of the developer's walk is valid for the admin too (it
	// continues after a tool both see), and a forged one is refused.
	_, next, _ := listPage(t, e, devCaller, "tools/list", "")
	if names, _, _ := listPage(t, e, adminCaller, "tools/list", next); len(names) == 0 {
		t.Error("admin: the developer's cursor gave nothing")
	}
	forged := base64.RawURLEncoding.EncodeToString([]byte("\x76../etc"))
	_, r := exchangeOnce(t, e, "/mcp/core", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"`+forged+`"}}`, as(devCaller)...)
	if rep := decodeReply(t, r.GetImmediateResponse().GetBody()); rep.Error == nil {
		t.Error("forged cursor accepted")
	}
}

// TestPolicyArgsDenial: a policy on the arguments leaves the tool listed;
// the call it matches gets an isError result naming the policy and is not
// routed, the others are routed.
func TestPolicyArgsDenial(t *testing.T) {
	e := policyEnv(t, testTable(t), routePolicies("core",
		authz.Policy{Name: "small-echo", Effect: "deny", When: `tool.name == "echo" && args.size > 10.0 && !("admin" in caller.claims.roles)`}))
	names, _, _ := listPage(t, e, devCaller, "tools/list", "")
	if !contains(names, "echo") {
		t.Fatalf("echo not listed: %v", names)
	}
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"size":100}}}`
	_, r := exchangeOnce(t, e, "/mcp/core", body, as(devCaller)...)
	im := r.GetImmediateResponse()
	if im == nil {
		t.Fatalf("denied call was routed: %v", r)
	}
	res := decodeResult(t, im.GetBody(), "3")
	if !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, `denied by policy "small-echo"`) {
		t.Errorf("result %+v", res)
	}
	if got := metricValue(t, e.reg, "toolmesh_authz_decisions_total", map[string]string{"route": "core", "method": "tools/call", "decision": "deny"}); got != 1 {
		t.Errorf("deny decisions = %v", got)
	}
	for _, tc := range []struct {
		c    *identity.Caller
		args string
	}{{devCaller, `{"size":1}`}, {adminCaller, `{"size":100}`}} {
		body := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":` + tc.args + `}}`
		if _, r := exchangeOnce(t, e, "/mcp/core", body, as(tc.c)...); r.GetRequestBody() == nil {
			t.Errorf("%s %s: not routed: %v", tc.c.Subject, tc.args, r)
		}
	}
	waitMetric(t, e, "toolmesh_extproc_requests_total", map[string]string{"route": "core", "method": "tools/call", "era": "legacy", "outcome": "denied"}, 1)
	waitMetric(t, e, "toolmesh_tool_calls_total", map[string]string{"route": "core", "tool": "echo", "outcome": "denied"}, 1)
}

func waitMetric(t *testing.T, e *testEnv, name string, labels map[string]string, want float64) {
	t.Helper()
	// v.close returned: the stream ended and the server recorded it.
	if got := metricValue(t, e.reg, name, labels); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// TestPolicySearchShortlist: search_tools never offers a hidden tool, and
// call_tool of one is an unknown tool.
func TestPolicySearchShortlist(t *testing.T) {
	route := registry.Route{Key: "core", Catalog: &registry.Catalog{Mode: "search", Shortlist: 10},
		ToolServices: []registry.ToolService{{Name: "billing", URL: "http://billing.tools.svc:8080"}}}
	obj := json.RawMessage(`{"type":"object"}`)
	snap := buildSnapshot(t, route, map[string]*registry.Manifest{"billing": {Tools: []registry.ManifestTool{
		{Name: "delete_invoice", Description: "Delete an invoice.", InputSchema: obj, Annotations: json.RawMessage(`{"destructiveHint":true}`)},
		{Name: "get_invoice", Description: "Get an invoice.", InputSchema: obj, Annotations: json.RawMessage(`{"readOnlyHint":true}`)},
		{Name: "void_invoice", Description: "Void an invoice.", InputSchema: obj, Annotations: json.RawMessage(`{"destructiveHint":true}`)},
		{Name: "list_invoices", Description: "List invoices.", InputSchema: obj, Annotations: json.RawMessage(`{"readOnlyHint":true}`)},
	}}})
	e := policyEnv(t, testRoutes{"/mcp/core": {key: "core", snap: snap}},
		routePolicies("core", authz.Policy{Name: "admins-only-destructive", Effect: "deny", When: adminsOnlyDestructive}))
	search := func(c *identity.Caller) []string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"delete an invoice"}}}`
		_, r := exchangeOnce(t, e, "/mcp/core", body, as(c)...)
		res := decodeResult(t, r.GetImmediateResponse().GetBody(), "1")
		var sc struct{ Tools []struct{ Name string } }
		if err := json.Unmarshal(res.StructuredContent, &sc); err != nil {
			t.Fatalf("%v: %s", err, r.GetImmediateResponse().GetBody())
		}
		var names []string
		for _, tl := range sc.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	admin, dev := search(adminCaller), search(devCaller)
	if !contains(admin, "delete_invoice") {
		t.Fatalf("the admin's shortlist has no destructive tool, the test shows nothing: %v", admin)
	}
	var want []string
	for _, n := range admin {
		if n != "delete_invoice" && n != "void_invoice" {
			want = append(want, n)
		}
	}
	if !slices.Equal(dev, want) {
		t.Errorf("developer's shortlist %v, want %v (the admin's %v without destructive tools)", dev, want, admin)
	}
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"delete_invoice","arguments":{}}}}`
	_, r := exchangeOnce(t, e, "/mcp/core", body, as(devCaller)...)
	if im := r.GetImmediateResponse(); im == nil || !strings.Contains(string(im.GetBody()), "unknown tool: delete_invoice") {
		t.Errorf("call_tool of a hidden tool: %v", r)
	}
	if _, r := exchangeOnce(t, e, "/mcp/core", body, as(adminCaller)...); r.GetRequestBody() == nil {
		t.Errorf("admin's call_tool not routed: %v", r)
	}
	if want := fmt.Sprintf(`"msg":"audit","event":"authorization","caller":"dave","route":"core","method":"tools/call","tool":"search_tools","hidden":%d,"decision":"filtered"`,
		len(admin)-len(dev)); !strings.Contains(e.logs.String(), want) {
		t.Errorf("no audit event %s in\n%s", want, e.logs.String())
	}
}

// TestPolicyFederatedItems: hidden resources and prompts are neither listed
// nor readable, and look unknown; visible ones are routed.
func TestPolicyFederatedItems(t *testing.T) {
	routes := federatedRoutes(t, "http://127.0.0.1:1")
	e := newTestEnv(t, Config{Upstreams: fakeUpstreams{}}, routes)
	e.srv.callerSeam = callerFromHeaders
	set, err := authz.Compile(routePolicies("fed",
		authz.Policy{Name: "readme-admins", Effect: "deny", When: `resource.uri == "gh://readme" && !("admin" in caller.claims.roles)`},
		authz.Policy{Name: "review-admins", Effect: "deny", When: `prompt.name == "gh_review" && !("admin" in caller.claims.roles)`}))
	if err != nil {
		t.Fatal(err)
	}
	e.srv.SetPolicies(set)
	send := func(c *identity.Caller, body string) *extprocv3.ProcessingResponse {
		_, r := exchangeOnce(t, e, "/mcp/fed", body, as(c)...)
		return r
	}
	for _, tc := range []struct{ body, dev, admin string }{
		{`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, `"resources":[]`, `"resources":[{"uri":"gh://readme","name":"readme"}]`},
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`, `"prompts":[]`, `"prompts":[{"name":"gh_review","description":"d"}]`},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/templates/list"}`, `"resourceTemplates":[{"uriTemplate":"gh://issues/{n}","name":"issue"}]`, `"resourceTemplates":[{"uriTemplate":"gh://issues/{n}","name":"issue"}]`},
	} {
		if got := string(send(devCaller, tc.body).GetImmediateResponse().GetBody()); !strings.Contains(got, tc.dev) {
			t.Errorf("developer %s: %s, want %s", tc.body, got, tc.dev)
		}
		if got := string(send(adminCaller, tc.body).GetImmediateResponse().GetBody()); !strings.Contains(got, tc.admin) {
			t.Errorf("admin %s: %s, want %s", tc.body, got, tc.admin)
		}
	}
	plain := newTestEnv(t, Config{Upstreams: fakeUpstreams{}}, routes)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"gh://readme"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"gh_review"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"gh_review"},"argument":{"name":"a","value":"x"}}}`,
	} {
		got := send(devCaller, body)
		if got.GetImmediateResponse() == nil {
			t.Fatalf("developer's %s was routed", body)
		}
		// The answer of a name that does not exist, on a route without policies.
		missing := strings.NewReplacer("gh://readme", "gh://nothing", "gh_review", "gh_nothing").Replace(body)
		_, want := exchangeOnce(t, plain, "/mcp/fed", missing, as(devCaller)...)
		wantBody := strings.NewReplacer("gh://nothing", "gh://readme", "gh_nothing", "gh_review").Replace(string(want.GetImmediateResponse().GetBody()))
		if string(got.GetImmediateResponse().GetBody()) != wantBody {
			t.Errorf("hidden item answered\n %s\nunknown item answered\n %s", got.GetImmediateResponse().GetBody(), wantBody)
		}
		if r := send(adminCaller, body); r.GetRequestBody() == nil {
			t.Errorf("admin's %s not routed: %v", body, r)
		}
	}
	for _, want := range []string{
		`"msg":"audit","event":"authorization","caller":"dave","route":"fed","method":"resources/read","resource":"gh://readme","decision":"deny","policy":"readme-admins"`,
		`"msg":"audit","event":"authorization","caller":"ada","route":"fed","method":"prompts/get","prompt":"gh_review","decision":"allow","policy":""`,
		`"msg":"audit","event":"authorization","caller":"dave","route":"fed","method":"resources/list","hidden":1,"decision":"filtered"`,
	} {
		if !strings.Contains(e.logs.String(), want) {
			t.Errorf("no audit event %s in\n%s", want, e.logs.String())
		}
	}
}

// TestPolicyAudit: every call decision is an audit event naming caller,
// route, method, tool, decision and policy; a list is one event with the
// number hidden; no token appears in any log line.
func TestPolicyAudit(t *testing.T) {
	snap := bigSnapshot(t, 30, 10, "")
	e := policyEnv(t, testRoutes{"/mcp/core": {key: "core", snap: snap}},
		routePolicies("core", authz.Policy{Name: "admins-only-destructive", Effect: "deny", When: adminsOnlyDestructive}))
	listPage(t, e, devCaller, "tools/list", "")
	call := func(c *identity.Caller, name string) {
		exchangeOnce(t, e, "/mcp/core", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`, as(c)...)
	}
	call(devCaller, "tool_00007")   // hidden
	call(devCaller, "tool_00001")   // allowed
	call(adminCaller, "tool_00007") // allowed

	type event struct {
		Msg, Caller, Route, Method, Tool, Decision, Policy string
		Hidden                                             *int
	}
	var events []event
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if ev.Msg == "audit" {
			events = append(events, ev)
		}
	}
	want := []event{
		{Msg: "audit", Caller: "dave", Route: "core", Method: "tools/list", Decision: "filtered"},
		{Msg: "audit", Caller: "dave", Route: "core", Method: "tools/call", Tool: "tool_00007", Decision: "deny", Policy: "admins-only-destructive"},
		{Msg: "audit", Caller: "dave", Route: "core", Method: "tools/call", Tool: "tool_00001", Decision: "allow"},
		{Msg: "audit", Caller: "ada", Route: "core", Method: "tools/call", Tool: "tool_00007", Decision: "allow"},
	}
	if len(events) != len(want) {
		t.Fatalf("audit events %+v, want %d", events, len(want))
	}
	for i := range want {
		got := events[i]
		if i == 0 {
			if got.Hidden == nil || *got.Hidden != 5 { // tools 0, 7, 14, 21, 28
				t.Errorf("list event hidden = %v, want 5", got.Hidden)
			}
		}
		got.Hidden = nil
		if got != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got, want[i])
		}
	}
	for _, c := range testCallers {
		if strings.Contains(e.logs.String(), c.Token) {
			t.Errorf("the logs contain %s's token", c.Subject)
		}
	}
	for _, dec := range []string{"allow", "deny"} {
		want := map[string]float64{"allow": 2, "deny": 1}[dec]
		if got := metricValue(t, e.reg, "toolmesh_authz_decisions_total", map[string]string{"route": "core", "method": "tools/call", "decision": dec}); got != want {
			t.Errorf("decisions %s = %v, want %v", dec, got, want)
		}
	}
	if got := metricValue(t, e.reg, "toolmesh_authz_decisions_total", map[string]string{"route": "core", "method": "tools/list", "decision": "filtered"}); got != 1 {
		t.Errorf("filtered lists = %v", got)
	}
}

// TestPolicyViewCache: callers that differ only in attributes no policy
// reads share one filtered catalog; a new snapshot or policy set builds new
// ones; the cache is bounded.
func TestPolicyViewCache(t *testing.T) {
	routes := testRoutes{"/mcp/core": {key: "core", snap: bigSnapshot(t, 30, 10, "")}}
	e := policyEnv(t, routes, routePolicies("core", authz.Policy{Name: "admins-only-destructive", Effect: "deny", When: adminsOnlyDestructive}))
	current := func() *catalog.Route {
		r := e.srv.policyViews.Cached("core")
		if r == nil {
			t.Fatal("no policy route cached")
		}
		return r
	}
	views := func() int64 { n, _ := current().Size(); return n }
	listPage(t, e, devCaller, "tools/list", "")
	listPage(t, e, dev2Caller, "tools/list", "")
	if n := views(); n != 1 {
		t.Errorf("two developers: %d views, want 1 (same roles)", n)
	}
	listPage(t, e, adminCaller, "tools/list", "")
	if n := views(); n != 2 {
		t.Errorf("with the admin: %d views, want 2", n)
	}
	first := current()
	set, _ := authz.Compile(routePolicies("core", authz.Policy{Name: "none", Effect: "deny", When: `tool.name == "tool_00001"`}))
	e.srv.SetPolicies(set)
	names, _, _ := listPage(t, e, devCaller, "tools/list", "")
	if current() == first || !contains(names, "tool_00000") || contains(names, "tool_00001") {
		t.Errorf("new policies not in force: %v", names)
	}
	// A new snapshot of the route: a new view over it.
	second := current()
	routes["/mcp/core"] = testRoute{key: "core", snap: bigSnapshot(t, 30, 10, "", 2)}
	names, _, _ = listPage(t, e, devCaller, "tools/list", "")
	if current() == second || contains(names, "tool_00002") || !contains(names, "tool_00003") {
		t.Errorf("the new snapshot is not what the caller sees: %v", names)
	}

	// Bounded: more identities than the bound keep at most the bound.
	r := current()
	for i := range catalog.MaxViews + 20 {
		c := &identity.Caller{Authenticated: true, Subject: "u", Claims: map[string]any{"roles": []any{fmt.Sprint("r", i)}}}
		x := &request{s: e.srv, routeKey: "core", snap: routes["/mcp/core"].snap}
		x.caller = c
		x.pol.route = r.Policies()
		x.pol.started = true
		x.view(nil)
	}
	// The cache's own accounting against what it holds: TestViewsBounded
	// (package catalog).
	if n, bytes := r.Size(); n > catalog.MaxViews || bytes == 0 {
		t.Errorf("%d views of %d B cached, bound %d", n, bytes, catalog.MaxViews)
	}
}

// TestPolicyEra: era and era_kind are the request's protocol version and
// "legacy" or "stateless", for lists as for calls.
func TestPolicyEra(t *testing.T) {
	e := policyEnv(t, testTable(t), routePolicies("core",
		authz.Policy{Name: "legacy-no-echo", Effect: "deny", When: `era_kind == "legacy" && era == "2025-11-25" && tool.name == "echo"`}))
	for _, tc := range []struct {
		stateless bool
		want      bool
	}{{false, false}, {true, true}} {
		v := e.open(t)
		seq := listRequest("1", tc.stateless)
		v.send(seq[0])
		body := string(v.send(seq[1]).GetImmediateResponse().GetBody())
		v.close()
		if got := strings.Contains(body, `"name":"echo"`); got != tc.want {
			t.Errorf("stateless %v: echo listed %v, want %v: %s", tc.stateless, got, tc.want, body)
		}
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta2026 + `}}`
	if _, r := exchangeOnce(t, e, "/mcp/core", call, stateless("tools/call", "echo")...); r.GetRequestBody() == nil {
		t.Errorf("stateless call of echo not routed: %v", r)
	}
}
