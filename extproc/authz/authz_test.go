package authz

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types/ref"

	"github.com/toolmesh/toolmesh/extproc/identity"
)

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		want []string // substrings of the error
	}{
		{"syntax", Policy{"p1", "deny", `caller.sub ==`}, []string{`routes.core policy "p1"`, "Syntax error"}},
		{"not bool", Policy{"p2", "allow", `caller.sub`}, []string{`routes.core policy "p2"`, "not bool"}},
		{"unknown field", Policy{"p3", "allow", `caller.subject == "x"`}, []string{`policy "p3"`, "undefined field 'subject'"}},
		{"unknown variable", Policy{"p4", "allow", `user.sub == "x"`}, []string{`policy "p4"`, "undeclared reference"}},
		{"bad effect", Policy{"p5", "permit", `true`}, []string{`policy "p5"`, `effect "permit"`}},
		{"empty when", Policy{"p6", "deny", ` `}, []string{`policy "p6"`, "when is empty"}},
		{"no name", Policy{"", "deny", `true`}, []string{"routes.core[0]", "name is empty"}},
		{"wrong types", Policy{"p7", "allow", `caller.scopes == "a"`}, []string{`policy "p7"`, "no matching overload"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(&Config{Routes: map[string][]Policy{"core": {tt.p}}})
			if err == nil {
				t.Fatal("compiled")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	_, err := Compile(&Config{Default: []Policy{{"a", "deny", "true"}, {"a", "deny", "false"}}})
	if err == nil || !strings.Contains(err.Error(), `default policy "a": name is used twice`) {
		t.Errorf("duplicate name: %v", err)
	}
}

func caller(claims string, scopes ...string) *identity.Caller {
	c := &identity.Caller{Authenticated: true, Issuer: "https://idp", Subject: "alice", Scopes: scopes, Token: "secret"}
	if claims != "" {
		if err := json.Unmarshal([]byte(claims), &c.Claims); err != nil {
			panic(err)
		}
	}
	return c
}

func TestDecide(t *testing.T) {
	admin := caller(`{"roles":["admin","dev"]}`, "mcp:tools")
	dev := caller(`{"roles":["dev"],"tier":3}`, "mcp:tools")
	noRoles := caller(`{}`)
	mesh := &identity.Caller{MeshID: "spiffe://mesh/ns/billing/sa/worker"}
	destructive := NewTool("delete_user", "users", "", json.RawMessage(`{"destructiveHint":true}`))
	readOnly := NewTool("get_user", "users", "", json.RawMessage(`{"readOnlyHint":true}`))
	bare := NewTool("send_mail", "mail", "", nil)

	const adminsOnly = `tool.annotations.destructiveHint && !("admin" in caller.claims.roles)`
	tests := []struct {
		name     string
		policies []Policy
		kind     Kind
		in       Input
		args     string
		want     string // decision
		policy   string
		visible  bool // Visible's answer
	}{
		{"no policies", nil, KindTool, Input{Tool: destructive}, "", DecisionAllow, "", true},
		{"admin destructive", []Policy{{"admins", "deny", adminsOnly}}, KindTool,
			Input{Caller: NewCaller(admin), Tool: destructive}, "", DecisionAllow, "", true},
		{"dev destructive", []Policy{{"admins", "deny", adminsOnly}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: destructive}, "", DecisionDeny, "admins", false},
		{"dev read-only", []Policy{{"admins", "deny", adminsOnly}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: readOnly}, "", DecisionAllow, "", true},
		{"no annotations is destructive (MCP default)", []Policy{{"admins", "deny", adminsOnly}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: bare}, "", DecisionDeny, "admins", false},
		{"missing claim fails closed", []Policy{{"admins", "deny", adminsOnly}}, KindTool,
			Input{Caller: NewCaller(noRoles), Tool: destructive}, "", DecisionError, "admins", false},
		{"missing claim, short-circuit false", []Policy{{"admins", "deny", adminsOnly}}, KindTool,
			Input{Caller: NewCaller(noRoles), Tool: readOnly}, "", DecisionAllow, "", true},
		{"anonymous", []Policy{{"authn", "allow", `caller.authenticated`}}, KindTool,
			Input{Tool: readOnly}, "", DecisionDeny, "", false},
		{"scope allow", []Policy{{"scope", "allow", `"mcp:tools" in caller.scopes`}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: readOnly}, "", DecisionAllow, "scope", true},
		{"scope missing", []Policy{{"scope", "allow", `"mcp:tools" in caller.scopes`}}, KindTool,
			Input{Caller: NewCaller(noRoles), Tool: readOnly}, "", DecisionDeny, "", false},
		{"one allow of two", []Policy{{"a", "allow", `caller.sub == "bob"`}, {"b", "allow", `caller.claims.tier >= 3`}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: readOnly}, "", DecisionAllow, "b", true},
		{"failing allow does not grant", []Policy{{"a", "allow", `caller.claims.tier >= 3`}}, KindTool,
			Input{Caller: NewCaller(admin), Tool: readOnly}, "", DecisionError, "a", false},
		{"deny wins over allow", []Policy{{"all", "allow", `true`}, {"none", "deny", `tool.name.startsWith("delete_")`}}, KindTool,
			Input{Caller: NewCaller(admin), Tool: destructive}, "", DecisionDeny, "none", false},
		{"mesh id", []Policy{{"billing", "allow", `caller.mesh_id.startsWith("spiffe://mesh/ns/billing/")`}}, KindTool,
			Input{Caller: NewCaller(mesh), Tool: bare}, "", DecisionAllow, "billing", true},
		{"mesh id other", []Policy{{"billing", "allow", `caller.mesh_id.startsWith("spiffe://mesh/ns/billing/")`}}, KindTool,
			Input{Caller: NewCaller(admin), Tool: bare}, "", DecisionDeny, "", false},
		{"args deny matches", []Policy{{"big", "deny", `args.amount > 1000.0 && !("admin" in caller.claims.roles)`}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: bare}, `{"amount":5000}`, DecisionDeny, "big", true},
		{"args deny not matching", []Policy{{"big", "deny", `args.amount > 1000.0 && !("admin" in caller.claims.roles)`}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: bare}, `{"amount":5}`, DecisionAllow, "", true},
		{"args deny, admin: list decides without args", []Policy{{"big", "deny", `args.amount > 1000.0 && !("admin" in caller.claims.roles)`}}, KindTool,
			Input{Caller: NewCaller(admin), Tool: bare}, `{"amount":5000}`, DecisionAllow, "", true},
		{"args missing key fails closed", []Policy{{"big", "deny", `args.amount > 1000.0`}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: bare}, `{}`, DecisionError, "big", true},
		{"args allow", []Policy{{"own", "allow", `args.user == caller.sub`}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: bare}, `{"user":"alice"}`, DecisionAllow, "own", true},
		{"era", []Policy{{"new", "deny", `era_kind == "legacy" && tool.name == "send_mail"`}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: bare, Era: "2025-11-25", EraKind: "legacy"}, "", DecisionDeny, "new", false},
		{"era version", []Policy{{"new", "deny", `era < "2025-06-18"`}}, KindTool,
			Input{Caller: NewCaller(dev), Tool: bare, Era: "2025-11-25", EraKind: "legacy"}, "", DecisionAllow, "", true},
		{"tool policy does not govern resources", []Policy{{"admins", "deny", adminsOnly}}, KindResource,
			Input{Caller: NewCaller(dev), Resource: NewResource("file:///a")}, "", DecisionAllow, "", true},
		{"resource policy", []Policy{{"public", "allow", `resource.uri.startsWith("file:///public/")`}}, KindResource,
			Input{Caller: NewCaller(dev), Resource: NewResource("file:///secret")}, "", DecisionDeny, "", false},
		{"prompt policy", []Policy{{"p", "deny", `prompt.name == "secret" && !("admin" in caller.claims.roles)`}}, KindPrompt,
			Input{Caller: NewCaller(dev), Prompt: NewPrompt("secret")}, "", DecisionDeny, "p", false},
		{"caller-only policy governs every kind", []Policy{{"authn", "allow", `caller.authenticated`}}, KindPrompt,
			Input{Prompt: NewPrompt("x")}, "", DecisionDeny, "", false},
		{"method", []Policy{{"m", "deny", `method == "resources/read"`}}, KindResource,
			Input{Method: "resources/read", Resource: NewResource("x")}, "", DecisionDeny, "m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Compile(&Config{Routes: map[string][]Policy{"core": tt.policies}})
			if err != nil {
				t.Fatal(err)
			}
			r := set.Route("core")
			in := tt.in
			if tt.args != "" {
				if in.Args, err = Args(json.RawMessage(tt.args)); err != nil {
					t.Fatal(err)
				}
			}
			d := r.Decide(tt.kind, &in)
			if d.Decision != tt.want || d.Policy != tt.policy || d.Allowed != (tt.want == DecisionAllow) {
				t.Errorf("Decide = %+v, want %s by %q", d, tt.want, tt.policy)
			}
			in.Args = nil
			if v := r.Visible(tt.kind, &in); v.Allowed != tt.visible {
				t.Errorf("Visible = %+v, want visible %v", v, tt.visible)
			}
		})
	}
}

func TestKey(t *testing.T) {
	set, err := Compile(&Config{
		Routes: map[string][]Policy{
			"roles":  {{"admins", "deny", `tool.annotations.destructiveHint && !("admin" in caller.claims.roles)`}},
			"tools":  {{"t", "deny", `tool.name == "x"`}},
			"whole":  {{"w", "allow", `caller == caller`}},
			"eraKey": {{"e", "deny", `era_kind == "legacy"`}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	alice := caller(`{"roles":["dev"],"email":"a@x"}`)
	bob := caller(`{"roles":["dev"],"email":"b@x"}`)
	bob.Subject = "bob"
	carol := caller(`{"roles":["admin"]}`)
	r := set.Route("roles")
	ka, kb, kc := r.Key(alice, "", ""), r.Key(bob, "", ""), r.Key(carol, "", "")
	if ka != kb {
		t.Errorf("callers with the same roles have keys %q and %q", ka, kb)
	}
	if ka == kc {
		t.Errorf("callers with other roles share key %q", ka)
	}
	if strings.Contains(ka, "secret") {
		t.Errorf("key %q contains the token", ka)
	}
	if k := r.Key(caller(`{}`), "", ""); k == ka {
		t.Errorf("a caller without roles shares key %q", k)
	}
	if k1, k2 := set.Route("tools").Key(alice, "", ""), set.Route("tools").Key(nil, "", ""); k1 != k2 {
		t.Errorf("policies that read no caller attribute: keys %q and %q", k1, k2)
	}
	w := set.Route("whole")
	if w.Key(alice, "", "") == w.Key(bob, "", "") {
		t.Error("a policy reading the whole caller: two callers share a key")
	}
	e := set.Route("eraKey")
	if e.Key(nil, "2025-11-25", "legacy") == e.Key(nil, "2026-07-28", "stateless") {
		t.Error("a policy reading the era: two eras share a key")
	}
}

// TestKeyComputedIndex: a policy indexing a claim by another caller
// attribute reads both; callers that differ only in the index must not
// share a cached list (issue 26).
func TestKeyComputedIndex(t *testing.T) {
	set, err := Compile(&Config{
		Routes: map[string][]Policy{
			"grants": {{"g", "allow", `has(caller.claims.grants) && tool.name in caller.claims.grants[caller.mesh_id]`}},
			"nested": {{"n", "allow", `tool.name == caller.claims.by[caller.claims.team].tool`}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := caller(`{"grants":{"spiffe://a":["x"],"spiffe://b":["y"]},"by":{"red":{"tool":"x"},"blue":{"tool":"y"}},"team":"red"}`)
	a.MeshID = "spiffe://a"
	b := caller(`{"grants":{"spiffe://a":["x"],"spiffe://b":["y"]},"by":{"red":{"tool":"x"},"blue":{"tool":"y"}},"team":"blue"}`)
	b.MeshID = "spiffe://b"
	x := &Input{Tool: NewTool("x", "s", "", nil)}
	for _, route := range []string{"grants", "nested"} {
		r := set.Route(route)
		if r.Key(a, "", "") == r.Key(b, "", "") {
			t.Errorf("route %s: callers whose computed index differs share key %q", route, r.Key(a, "", ""))
		}
		ia, ib := *x, *x
		ia.Caller, ib.Caller = NewCaller(a), NewCaller(b)
		if va, vb := r.Visible(KindTool, &ia), r.Visible(KindTool, &ib); !va.Allowed || vb.Allowed {
			t.Errorf("route %s: visible to a %v, to b %v; want a only", route, va.Allowed, vb.Allowed)
		}
	}
}

func TestRouteSelection(t *testing.T) {
	set, err := Compile(&Config{
		Default: []Policy{{"d", "deny", "true"}},
		Routes:  map[string][]Policy{"open": {}, "core": {{"c", "allow", "true"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if set.Route("open") != nil {
		t.Error("an empty route entry must replace the default with no policies")
	}
	if d := set.Route("other").Decide(KindTool, &Input{Tool: NewTool("x", "s", "", nil)}); d.Policy != "d" {
		t.Errorf("default policies not applied: %+v", d)
	}
	if d := set.Route("core").Decide(KindTool, &Input{Tool: NewTool("x", "s", "", nil)}); !d.Allowed || d.Policy != "c" {
		t.Errorf("route policies: %+v", d)
	}
	var nilSet *Set
	if nilSet.Route("x") != nil {
		t.Error("nil set has policies")
	}
}

// TestWorkedExample checks the table of docs/authorization.md.
func TestWorkedExample(t *testing.T) {
	set, err := Compile(&Config{Routes: map[string][]Policy{"core": {
		{"staff-only", "allow", `"dev" in caller.claims.roles || "admin" in caller.claims.roles`},
		{"admins-only-destructive", "deny", `tool.annotations.destructiveHint && !("admin" in caller.claims.roles)`},
	}}, Default: []Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	r := set.Route("core")
	del := NewTool("delete_customer", "crm", "", json.RawMessage(`{"destructiveHint":true}`))
	get := NewTool("get_customer", "crm", "", json.RawMessage(`{"readOnlyHint":true}`))
	for _, tc := range []struct {
		claims   string
		del, get bool
	}{
		{`{"roles":["admin"]}`, true, true},
		{`{"roles":["dev"]}`, false, true},
		{`{}`, false, false},
		{`{"roles":["sales"]}`, false, false},
	} {
		c := NewCaller(caller(tc.claims))
		for _, x := range []struct {
			tool *Tool
			want bool
		}{{del, tc.del}, {get, tc.get}} {
			in := &Input{Caller: c, Method: "tools/call", Tool: x.tool}
			if d := r.Decide(KindTool, in); d.Allowed != x.want {
				t.Errorf("%s calling %s: %+v, want allowed %v", tc.claims, x.tool.Name(), d, x.want)
			}
			if v := r.Visible(KindTool, in); v.Allowed != x.want {
				t.Errorf("%s listing %s: %+v, want visible %v", tc.claims, x.tool.Name(), v, x.want)
			}
		}
	}
	if set.Route("other") != nil {
		t.Error("default: [] must leave other routes without policies")
	}
}

// TestCondition: a condition compiles in the policies' environment (the
// same variables, the same type errors), says which variables it reads, and
// reports an evaluation error as such.
func TestCondition(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		compile string // substring of the compile error
		reads   []string
		in      Input
		want    bool
		evalErr string
	}{
		{expr: `args.amount > 1000`, reads: []string{"args"},
			in: Input{Args: mustArgs(t, `{"amount":1500}`)}, want: true},
		{expr: `args.amount > 1000`, reads: []string{"args"}, in: Input{}, evalErr: "no such key: amount"},
		{expr: `"admin" in caller.claims.roles`, reads: []string{"caller"},
			in: Input{Caller: NewCaller(&identity.Caller{Claims: map[string]any{"roles": []any{"admin"}}})}, want: true},
		{expr: `"admin" in caller.claims.roles`, reads: []string{"caller"}, in: Input{}, evalErr: "no such key: roles"},
		{expr: `era_kind == "stateless" && tool.annotations.destructiveHint`, reads: []string{"era_kind", "tool"},
			in: Input{EraKind: "stateless", Tool: NewTool("x", "s", "", nil)}, want: true},
		{expr: `method == "tools/call"`, reads: []string{"method"}, in: Input{Method: "resources/read"}},
		{expr: `caller.claim.roles == []`, compile: "undefined field 'claim'"},
		{expr: `tool.name`, compile: "when is of type string, not bool"},
		{expr: `args.x ==`, compile: "Syntax error"},
		{expr: "  ", compile: "when is empty"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			c, err := CompileCondition(tc.expr)
			if tc.compile != "" {
				if err == nil || !strings.Contains(err.Error(), tc.compile) {
					t.Fatalf("compile error %v, want %q", err, tc.compile)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"caller", "args", "era", "era_kind", "tool", "method"} {
				if got, want := c.Reads(v), slices.Contains(tc.reads, v); got != want {
					t.Errorf("Reads(%s) = %v, want %v", v, got, want)
				}
			}
			got, err := c.Eval(&tc.in)
			if tc.evalErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.evalErr) {
					t.Fatalf("eval: %v %v, want error %q", got, err, tc.evalErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("eval: %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

func mustArgs(t *testing.T, raw string) ref.Val {
	t.Helper()
	v, err := Args(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestView: policies in configured order, each with the subjects and
// methods it decides; a route without policies has none.
func TestView(t *testing.T) {
	set, err := Compile(&Config{Routes: map[string][]Policy{"r": {
		{Name: "prompts-only", Effect: EffectDeny, When: `prompt.name == "x"`},
		{Name: "everyone", Effect: EffectAllow, When: `method != ""`},
		{Name: "tools", Effect: EffectAllow, When: `tool.name == "t"`},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	got := set.View("r")
	want := []PolicyView{
		{Name: "prompts-only", Effect: EffectDeny, When: `prompt.name == "x"`, Subjects: []string{"prompt"},
			Methods: []string{"prompts/get", "prompts/list", "completion/complete"}},
		{Name: "everyone", Effect: EffectAllow, When: `method != ""`, Subjects: []string{"tool", "resource", "prompt"},
			Methods: []string{"tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list", "completion/complete", "prompts/get", "prompts/list"}},
		{Name: "tools", Effect: EffectAllow, When: `tool.name == "t"`, Subjects: []string{"tool"}, Methods: []string{"tools/call", "tools/list"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("View:\n got %+v\nwant %+v", got, want)
	}
	if v := set.View("other"); v != nil {
		t.Errorf("a route without policies: %+v", v)
	}
	if v := (*Set)(nil).View("r"); v != nil {
		t.Errorf("nil set: %+v", v)
	}
}
