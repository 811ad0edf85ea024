package approval

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/identity"
)

var (
	secret1 = []byte("0123456789abcdef0123456789abcdef")
	secret2 = []byte("fedcba9876543210fedcba9876543210")
	t0      = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// clock is an injectable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newApprover(t *testing.T, c *clock, keys ...Key) *Approver {
	t.Helper()
	a, err := New(Config{Keys: keys, TTL: time.Minute, Now: c.now, Default: &Rule{}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func binding() Binding {
	return Binding{Route: "core", Tool: "delete_repo", Service: "github",
		Args: json.RawMessage(`{"repo":"x","force":true}`), Caller: "iss=a\x00sub=alice\x00mesh="}
}

func TestMintVerify(t *testing.T) {
	c := &clock{t0}
	a := newApprover(t, c, Key{"k1", secret1})
	state, err := a.Mint(binding())
	if err != nil {
		t.Fatal(err)
	}
	if !IsGatewayState(state) || len(state) > MaxStateBytes {
		t.Fatalf("state %q", state)
	}
	other := func(f func(*Binding)) Binding { b := binding(); f(&b); return b }
	cases := []struct {
		name  string
		state string
		b     Binding
		want  Reason
	}{
		{"same call", state, binding(), ""},
		{"same arguments, other order and spacing", state, other(func(b *Binding) { b.Args = json.RawMessage(` { "force" : true, "repo":"x" }`) }), ""},
		{"other route", state, other(func(b *Binding) { b.Route = "ops" }), ReasonOtherRoute},
		{"other tool", state, other(func(b *Binding) { b.Tool = "delete_org" }), ReasonOtherTool},
		{"other service", state, other(func(b *Binding) { b.Service = "gitlab" }), ReasonOtherService},
		{"other arguments", state, other(func(b *Binding) { b.Args = json.RawMessage(`{"repo":"y","force":true}`) }), ReasonOtherArguments},
		{"other caller", state, other(func(b *Binding) { b.Caller = "iss=a\x00sub=mallory\x00mesh=" }), ReasonOtherCaller},
		{"anonymous caller", state, other(func(b *Binding) { b.Caller = "" }), ReasonOtherCaller},
		{"repeated argument member", state, other(func(b *Binding) { b.Args = json.RawMessage(`{"repo":"y","repo":"x","force":true}`) }), ReasonBadArguments},
		{"empty", "", binding(), ReasonMalformed},
		{"foreign state", "eyJhbGciOi.abc", binding(), ReasonMalformed},
		{"other version", "tma2." + strings.TrimPrefix(state, statePrefix), binding(), ReasonMalformed},
		{"extra part", state + ".x", binding(), ReasonMalformed},
		{"unknown key id", strings.Replace(state, ".k1.", ".k9.", 1), binding(), ReasonUnknownKey},
		{"mac cut", state[:len(state)-2], binding(), ReasonMalformed},
		{"too long", state + strings.Repeat("A", MaxStateBytes), binding(), ReasonMalformed},
	}
	// Each payload field changed, the MAC kept: an attacker rebinding the
	// approval to another call.
	for _, f := range []struct {
		name string
		edit func(*statePayload)
	}{
		{"route", func(p *statePayload) { p.Route = "ops" }},
		{"tool", func(p *statePayload) { p.Tool = "x" }},
		{"service", func(p *statePayload) { p.Service = "x" }},
		{"args", func(p *statePayload) { p.Args = "AAAA" }},
		{"caller", func(p *statePayload) { p.Caller = "" }},
		{"issued", func(p *statePayload) { p.Issued++ }},
		{"expiry", func(p *statePayload) { p.Expires += 3600 }},
	} {
		cases = append(cases, struct {
			name  string
			state string
			b     Binding
			want  Reason
		}{"tampered " + f.name, tamper(t, state, f.edit), binding(), ReasonBadSignature})
	}
	// Flipping any one character of the MAC.
	last := strings.LastIndexByte(state, '.')
	for _, i := range []int{last + 1, last + 10, len(state) - 2} {
		s := []byte(state)
		if s[i] == 'A' {
			s[i] = 'B'
		} else {
			s[i] = 'A'
		}
		cases = append(cases, struct {
			name  string
			state string
			b     Binding
			want  Reason
		}{"mac byte changed", string(s), binding(), ReasonBadSignature})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReasonOf(a.Verify(tc.state, tc.b)); got != tc.want {
				t.Fatalf("Verify: got %q, want %q", got, tc.want)
			}
		})
	}
}

// tamper rewrites the payload of state and keeps its MAC.
func tamper(t *testing.T, state string, edit func(*statePayload)) string {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(state, statePrefix), ".")
	raw, err := b64.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var p statePayload
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	edit(&p)
	out, _ := json.Marshal(p)
	return statePrefix + parts[0] + "." + b64.EncodeToString(out) + "." + parts[2]
}

func TestExpiry(t *testing.T) {
	c := &clock{t0}
	a := newApprover(t, c, Key{"k1", secret1})
	state, err := a.Mint(binding())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after time.Duration
		want  Reason
	}{
		{0, ""},
		{59 * time.Second, ""},
		{time.Minute, ReasonExpired},
		{time.Hour, ReasonExpired},
	} {
		c.t = t0.Add(tc.after)
		if got := ReasonOf(a.Verify(state, binding())); got != tc.want {
			t.Errorf("after %s: got %q, want %q", tc.after, got, tc.want)
		}
	}
}

func TestKeyRotation(t *testing.T) {
	c := &clock{t0}
	old := newApprover(t, c, Key{"k1", secret1})
	both := newApprover(t, c, Key{"k2", secret2}, Key{"k1", secret1})
	newOnly := newApprover(t, c, Key{"k2", secret2})
	sameIDOtherSecret := newApprover(t, c, Key{"k1", secret2})

	fromOld, _ := old.Mint(binding())
	fromBoth, _ := both.Mint(binding())
	if !strings.HasPrefix(fromBoth, statePrefix+"k2.") {
		t.Fatalf("the first key signs: %q", fromBoth)
	}
	for _, tc := range []struct {
		name  string
		a     *Approver
		state string
		want  Reason
	}{
		{"old state, rotated config (new first, old kept)", both, fromOld, ""},
		{"new state, rotated config", both, fromBoth, ""},
		{"new state, new-only config", newOnly, fromBoth, ""},
		{"old state after the old key is dropped", newOnly, fromOld, ReasonUnknownKey},
		{"new state on a replica that has not rotated yet", old, fromBoth, ReasonUnknownKey},
		{"same key id, other secret", sameIDOtherSecret, fromOld, ReasonBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReasonOf(tc.a.Verify(tc.state, binding())); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewValidation(t *testing.T) {
	ok := Key{"k1", secret1}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no keys", Config{}, "approval.keys: at least one key"},
		{"short key", Config{Keys: []Key{{"k1", []byte("short")}}}, "approval.keys[0] (id k1): the key has 5 bytes, at least 32"},
		{"duplicate id", Config{Keys: []Key{ok, {"k1", secret2}}}, `approval.keys[1].id "k1": duplicate`},
		{"bad id", Config{Keys: []Key{{"k.1", secret1}}}, `approval.keys[0].id "k.1"`},
		{"ttl too short", Config{Keys: []Key{ok}, TTL: time.Second}, "approval.ttl 1s"},
		{"ttl too long", Config{Keys: []Key{ok}, TTL: 2 * time.Hour}, "approval.ttl 2h0m0s"},
		{"bad pattern", Config{Keys: []Key{ok}, Routes: map[string]Rule{"core": {Tools: []string{"["}}}}, "approval.routes.core.tools: pattern"},
		{"bad default", Config{Keys: []Key{ok}, Default: &Rule{Exempt: []string{"a["}}}, "approval.default.exempt: pattern"},
		{"empty annotation", Config{Keys: []Key{ok}, Routes: map[string]Rule{"core": {Annotations: []string{""}}}}, "approval.routes.core.annotations: empty"},
		{"when syntax", Config{Keys: []Key{ok}, Routes: map[string]Rule{"core": {When: "args.amount >"}}}, "approval.routes.core.when: ERROR: <input>:1:"},
		{"when field typo", Config{Keys: []Key{ok}, Routes: map[string]Rule{"core": {When: `"admin" in caller.claim.roles`}}},
			"approval.routes.core.when: ERROR: <input>:1:18: undefined field 'claim'"},
		{"when not bool", Config{Keys: []Key{ok}, Routes: map[string]Rule{"core": {When: "tool.name"}}}, "approval.routes.core.when: when is of type string, not bool"},
		{"when blank", Config{Keys: []Key{ok}, Routes: map[string]Rule{"core": {When: " "}}}, "approval.routes.core.when: when is empty"},
		{"default when", Config{Keys: []Key{ok}, Default: &Rule{When: "resource.nope"}}, "approval.default.when: ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	a, err := New(Config{Keys: []Key{ok}})
	if err != nil || a.TTL() != DefaultTTL {
		t.Fatalf("defaults: %v %v", a, err)
	}
}

func TestNeeds(t *testing.T) {
	a, err := New(Config{Keys: []Key{{"k1", secret1}}, Routes: map[string]Rule{
		"core":  {},
		"ops":   {Tools: []string{"delete_*"}, Exempt: []string{"delete_cache"}},
		"both":  {Annotations: []string{"openWorldHint"}, Tools: []string{"rm"}},
		"never": {Annotations: []string{}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	withDefault, err := New(Config{Keys: []Key{{"k1", secret1}}, Default: &Rule{Tools: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	destructive := json.RawMessage(`{"destructiveHint":true}`)
	for _, tc := range []struct {
		a     *Approver
		route string
		tool  Tool
		want  bool
		why   string
	}{
		// The default (an empty entry): every tool not declared read-only
		// (issue 26; before, only destructiveHint: true).
		{a, "core", Tool{Name: "drop", Annotations: destructive}, true, "no readOnlyHint: true annotation"},
		{a, "core", Tool{Name: "drop", Annotations: json.RawMessage(`{"destructiveHint":false}`)}, true, "no readOnlyHint: true annotation"},
		{a, "core", Tool{Name: "drop"}, true, "no readOnlyHint: true annotation"},
		{a, "core", Tool{Name: "get", Annotations: json.RawMessage(`{"readOnlyHint":"yes"}`)}, true, "no readOnlyHint: true annotation"},
		{a, "core", Tool{Name: "get", Annotations: json.RawMessage(`{"readOnlyHint":true}`)}, false, ""},
		// A federated server's annotations count only when its Portal
		// entry trusts them.
		{a, "core", Tool{Name: "get", Annotations: json.RawMessage(`{"readOnlyHint":true}`), Untrusted: true}, true, "untrusted annotations of a federated server"},
		{a, "both", Tool{Name: "fetch", Annotations: json.RawMessage(`{"openWorldHint":false}`), Untrusted: true}, true, "untrusted annotations of a federated server"},
		{a, "ops", Tool{Name: "list", Untrusted: true}, false, ""}, // names only: annotations not read
		{a, "ops", Tool{Name: "delete_repo"}, true, "tool pattern delete_*"},
		{a, "ops", Tool{Name: "delete_cache"}, false, ""},
		{a, "ops", Tool{Name: "drop", Annotations: destructive}, false, ""}, // tools given: no default annotation
		{a, "both", Tool{Name: "rm"}, true, "tool pattern rm"},
		{a, "both", Tool{Name: "fetch", Annotations: json.RawMessage(`{"openWorldHint":true}`)}, true, "annotation openWorldHint"},
		{a, "never", Tool{Name: "drop", Annotations: destructive}, false, ""},
		{a, "other", Tool{Name: "drop", Annotations: destructive}, false, ""}, // no entry, no default
		{withDefault, "other", Tool{Name: "x"}, true, "tool pattern *"},
		{nil, "core", Tool{Name: "x"}, false, ""},
	} {
		got, why := tc.a.Needs(tc.route, tc.tool, Call{})
		if got != tc.want || why != tc.why {
			t.Errorf("%s %s: got %v %q, want %v %q", tc.route, tc.tool.Name, got, why, tc.want, tc.why)
		}
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":[true,null,{"d":"x","c":1.50}]}`, `{"a":[true,null,{"c":1.50,"d":"x"}],"b":1}`},
		{` { "a" : "<&>\u00e9" } `, `{"a":"<&>é"}`},
		{`{}`, `{}`},
	} {
		got, err := Canonical(json.RawMessage(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`{"a":1,"a":1}`, `{"x":{"a":1,"a":2}}`, `{`, `{} {}`, ``} {
		if _, err := Canonical(json.RawMessage(bad)); ReasonOf(err) != ReasonBadArguments {
			t.Errorf("Canonical(%s): got %v, want bad_arguments", bad, err)
		}
	}
}

func TestSummary(t *testing.T) {
	if got := Summary(json.RawMessage(`{ "b":1, "a":2 }`), 100); got != `{"a":2,"b":1}` {
		t.Fatalf("short: %q", got)
	}
	long := json.RawMessage(`{"text":"` + strings.Repeat("é", 100) + `"}`)
	got := Summary(long, 20)
	if !strings.HasPrefix(got, `{"text":"ééééé`) || !strings.Contains(got, "more bytes not shown") {
		t.Fatalf("long: %q", got)
	}
	if cut := got[:strings.Index(got, "…")]; len(cut) > 20 || !json.Valid([]byte(`"`+strings.TrimPrefix(cut, `{"text":"`)+`"`)) {
		t.Fatalf("cut %q is over the limit or splits a character", cut)
	}
}

func TestCallerKey(t *testing.T) {
	for _, tc := range []struct {
		c    *identity.Caller
		want string
	}{
		{nil, ""},
		{&identity.Caller{}, ""},
		{&identity.Caller{Authenticated: true, Issuer: "i", Subject: "s"}, "iss=i\x00sub=s\x00mesh="},
		{&identity.Caller{MeshID: "spiffe://m"}, "\x00mesh=spiffe://m"},
	} {
		if got := CallerKey(tc.c); got != tc.want {
			t.Errorf("CallerKey(%+v) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

// FuzzVerify feeds arbitrary requestStates to the parser: it never panics,
// and nothing but the state minted for the call verifies.
func FuzzVerify(f *testing.F) {
	c := &clock{t0}
	a, err := New(Config{Keys: []Key{{"k1", secret1}, {"k2", secret2}}, TTL: time.Minute, Now: c.now})
	if err != nil {
		f.Fatal(err)
	}
	good, _ := a.Mint(binding())
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(strings.Replace(good, "k1", "k2", 1))
	f.Add("tma1.k1..")
	f.Add("tma1.k1.e30.AAAA")
	f.Add("tma1....")
	f.Fuzz(func(t *testing.T, s string) {
		err := a.Verify(s, binding())
		if err == nil && s != good {
			t.Fatalf("a state other than the minted one verified: %q", s)
		}
		if err != nil && ReasonOf(err) == "" {
			t.Fatalf("error without a reason: %v", err)
		}
	})
}

// prepared is a Call's Caller of c.
func prepared(c *identity.Caller) func() *authz.Caller {
	return func() *authz.Caller { return authz.NewCaller(c) }
}

// TestNeedsWhen: a rule's when condition, compiled in authorization's CEL
// environment, narrows what its names and annotations select (or selects
// alone); a condition that cannot be evaluated needs approval; one that
// reads the arguments or the caller needs approval while only the headers
// are known.
func TestNeedsWhen(t *testing.T) {
	a, err := New(Config{Keys: []Key{{"k1", secret1}}, Routes: map[string]Rule{
		"pay":    {Tools: []string{"transfer"}, When: "args.amount > 1000"},
		"roles":  {Annotations: []string{"destructiveHint"}, When: `!("admin" in caller.claims.roles)`},
		"era":    {When: `era_kind == "stateless" && tool.annotations.destructiveHint`},
		"ver":    {When: `era == "2026-07-28" && tool.name.startsWith("drop")`, Exempt: []string{"drop_cache"}},
		"method": {When: `method == "tools/call" && tool.service == "db"`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	destructive := Tool{Name: "drop", Service: "db", Annotations: json.RawMessage(`{"destructiveHint":true}`)}
	readOnly := Tool{Name: "list", Service: "db", Annotations: json.RawMessage(`{"readOnlyHint":true}`)}
	transfer := Tool{Name: "transfer", Service: "bank"}
	admin := prepared(&identity.Caller{Authenticated: true, Subject: "ann", Claims: map[string]any{"roles": []any{"admin"}}})
	dev := prepared(&identity.Caller{Authenticated: true, Subject: "dan", Claims: map[string]any{"roles": []any{"dev"}}})
	noRoles := prepared(&identity.Caller{Authenticated: true, Subject: "nora"})
	stateless := func(c Call) Call { c.Era, c.EraKind = "2026-07-28", "stateless"; return c }
	for _, tc := range []struct {
		name  string
		route string
		tool  Tool
		call  Call
		want  bool
		why   string
	}{
		{"amount over the threshold", "pay", transfer, Call{Args: json.RawMessage(`{"amount":5000}`)}, true, "tool pattern transfer and the when condition"},
		{"amount at the threshold", "pay", transfer, Call{Args: json.RawMessage(`{"amount":1000}`)}, false, ""},
		{"amount under, float", "pay", transfer, Call{Args: json.RawMessage(`{"amount":999.5}`)}, false, ""},
		{"amount missing: fail safe", "pay", transfer, Call{Args: json.RawMessage(`{}`)}, true,
			"tool pattern transfer and the when condition, which could not be evaluated (no such key: amount)"},
		{"amount of the wrong type: fail safe", "pay", transfer, Call{Args: json.RawMessage(`{"amount":"lots"}`)}, true,
			"tool pattern transfer and the when condition, which could not be evaluated (no such overload)"},
		{"arguments not an object: fail safe", "pay", transfer, Call{Args: json.RawMessage(`[1]`)}, true,
			"tool pattern transfer and the when condition, which could not be evaluated (arguments: json: cannot unmarshal array into Go value of type map[string]interface {})"},
		{"not selected by name: when not evaluated", "pay", Tool{Name: "balance"}, Call{Args: json.RawMessage(`{"amount":5000}`)}, false, ""},
		{"headers only, reads args", "pay", transfer, Call{HeadersOnly: true}, true,
			"tool pattern transfer and a when condition on the arguments or the caller, decided with the body"},
		{"headers only, not selected by name", "pay", Tool{Name: "balance"}, Call{HeadersOnly: true}, false, ""},

		{"dev, destructive", "roles", destructive, Call{Caller: dev}, true, "annotation destructiveHint and the when condition"},
		{"admin, destructive", "roles", destructive, Call{Caller: admin}, false, ""},
		{"dev, read-only: not selected", "roles", readOnly, Call{Caller: dev}, false, ""},
		{"no roles claim: fail safe", "roles", destructive, Call{Caller: noRoles}, true,
			"annotation destructiveHint and the when condition, which could not be evaluated (no such key: roles)"},
		{"anonymous: fail safe", "roles", destructive, Call{}, true,
			"annotation destructiveHint and the when condition, which could not be evaluated (no such key: roles)"},
		{"headers only, reads caller", "roles", destructive, Call{HeadersOnly: true, Caller: admin}, true,
			"annotation destructiveHint and a when condition on the arguments or the caller, decided with the body"},

		{"stateless era, destructive", "era", destructive, stateless(Call{}), true, "the when condition"},
		{"legacy era", "era", destructive, Call{Era: "2025-11-25", EraKind: "legacy"}, false, ""},
		{"stateless era, read-only", "era", readOnly, stateless(Call{}), false, ""},
		{"undeclared hints are destructive (MCP default)", "era", Tool{Name: "x"}, stateless(Call{}), true, "the when condition"},
		{"era decided from the headers", "era", destructive, stateless(Call{HeadersOnly: true}), true, "the when condition"},
		{"era decided from the headers, legacy", "era", destructive, Call{HeadersOnly: true, Era: "2025-11-25", EraKind: "legacy"}, false, ""},
		{"version", "ver", destructive, stateless(Call{}), true, "the when condition"},
		{"version, exempt", "ver", Tool{Name: "drop_cache"}, stateless(Call{}), false, ""},
		{"version, older", "ver", destructive, Call{Era: "2025-06-18", EraKind: "legacy"}, false, ""},
		{"method and service", "method", readOnly, Call{}, true, "the when condition"},
		{"method and service, other service", "method", transfer, Call{}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := a.Needs(tc.route, tc.tool, tc.call)
			if got != tc.want || why != tc.why {
				t.Fatalf("got %v %q, want %v %q", got, why, tc.want, tc.why)
			}
		})
	}
}

// TestViewSelects: the rule in force per route, the default one selecting
// every tool not declared read-only, and which tools a rule selects before
// any when condition.
func TestViewSelects(t *testing.T) {
	a, err := New(Config{Keys: []Key{{"k1", secret1}}, Routes: map[string]Rule{
		"ops":  {Tools: []string{"wipe_*"}, Exempt: []string{"wipe_safe"}, When: `caller.claims.sub != "root"`},
		"when": {When: `tool.name == "x"`},
	}, Default: &Rule{}})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := a.View("other"); !ok || !v.NotReadOnly || v.Annotations != nil {
		t.Errorf("default rule: %+v %v", v, ok)
	}
	destructive := json.RawMessage(`{"destructiveHint":true}`)
	tests := []struct {
		route, tool string
		ann         json.RawMessage
		why         string
		conditional bool
	}{
		{"ops", "wipe_cache", nil, "tool pattern wipe_*", true},
		{"ops", "wipe_safe", nil, "", false},
		{"ops", "drop", destructive, "", false},
		{"when", "anything", nil, "the when condition", true},
		{"other", "drop", destructive, "no readOnlyHint: true annotation", false},
		{"other", "read", json.RawMessage(`{"readOnlyHint":true}`), "", false},
	}
	for _, tt := range tests {
		why, cond := a.Selects(tt.route, Tool{Name: tt.tool, Annotations: tt.ann})
		if why != tt.why || cond != tt.conditional {
			t.Errorf("Selects(%s, %s) = %q, %v; want %q, %v", tt.route, tt.tool, why, cond, tt.why, tt.conditional)
		}
	}
	var off *Approver
	if _, ok := off.View("ops"); ok {
		t.Error("a nil Approver has a rule")
	}
}
