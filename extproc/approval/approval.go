// Package approval decides which tool calls need a human's approval at the
// gateway and binds an approval to one exact call with a stateless,
// HMAC-authenticated requestState (docs/decisions/0011-gateway-approval.md).
//
// The gateway keeps no server-side state: the state it hands the client
// says which call it approves (route, tool, Tool Service, a hash of the
// canonical arguments, the caller) and until when, under the operator's
// key. Any replica holding the key verifies it. What is remembered is
// which states were used (Ledger): an approval runs one call, in one
// process or, with a shared ledger, across replicas.
package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"time"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/internal/hmactoken"
)

// Limits of the configuration.
const (
	// MinKeyBytes is the shortest HMAC key accepted (RFC 2104 section 3:
	// at least the hash output, 32 bytes for SHA-256).
	MinKeyBytes = hmactoken.MinKeyBytes
	// DefaultTTL is how long an approval request stays answerable.
	DefaultTTL = 5 * time.Minute
	// MinTTL and MaxTTL bound TTL: long enough for a person to read and
	// answer, short enough to keep the replay window small.
	MinTTL = 10 * time.Second
	MaxTTL = time.Hour
	// ReadOnlyAnnotation exempts a tool from a route entry that names
	// neither annotations, tools nor when: such an entry asks for every
	// tool that does not declare it true (the MCP specification's default
	// reading of a tool without annotations: it may write and destroy).
	ReadOnlyAnnotation = "readOnlyHint"
)

// Key is one HMAC-SHA256 key.
type Key struct {
	ID     string
	Secret []byte
}

// Rule says which calls of a route need approval: a tool whose annotation
// named in Annotations is true, or whose name matches a Tools pattern
// (path.Match), unless its name matches an Exempt pattern; and, when the
// rule has a When condition, only if it is true. A rule with When and
// neither Annotations nor Tools selects by When alone.
type Rule struct {
	Annotations []string
	Tools       []string
	Exempt      []string
	// When is a CEL expression of type bool over the variables of
	// authorization policies (docs/authorization.md: caller, method, era,
	// era_kind, tool, args), compiled in extproc/authz's environment. An
	// evaluation error counts as true: the call needs approval (fail safe).
	When string

	when        *authz.Condition
	notReadOnly bool // the default: every tool not declared read-only
}

// Config is a validated approval configuration's input.
type Config struct {
	// Keys: the first signs, every one verifies (rotation).
	Keys []Key
	// TTL is how long a minted state is accepted (DefaultTTL when 0).
	TTL time.Duration
	// Routes replaces Default, as a whole, for the routes it names.
	Routes map[string]Rule
	// Default applies to every route without an entry; nil: none needs
	// approval.
	Default *Rule
	// Now is the clock (time.Now when nil); tests inject their own.
	Now func() time.Time
	// Ledger remembers used approvals (Spend). Nil: a new MemoryLedger,
	// forgotten when the configuration is reloaded; pass the same one to
	// every New of a process, or a shared one across replicas.
	Ledger Ledger
}

// Approver decides and mints/verifies states. It is immutable: a new
// configuration builds a new Approver, swapped in atomically.
type Approver struct {
	keys   *hmactoken.Keys
	ttl    time.Duration
	routes map[string]Rule
	def    *Rule
	now    func() time.Time
	ledger Ledger
}

func hmacKeys(keys []Key) []hmactoken.Key {
	out := make([]hmactoken.Key, len(keys))
	for i, k := range keys {
		out[i] = hmactoken.Key(k)
	}
	return out
}

// New validates cfg and builds its Approver. Errors name the field.
func New(cfg Config) (*Approver, error) {
	keys, err := hmactoken.New("approval.keys", macLabel, hmacKeys(cfg.Keys))
	if err != nil {
		return nil, err
	}
	a := &Approver{keys: keys, ttl: cfg.TTL, now: cfg.Now, ledger: cfg.Ledger}
	if a.ttl == 0 {
		a.ttl = DefaultTTL
	}
	if a.ttl < MinTTL || a.ttl > MaxTTL {
		return nil, fmt.Errorf("approval.ttl %s: must be between %s and %s", a.ttl, MinTTL, MaxTTL)
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.ledger == nil {
		a.ledger = NewMemoryLedger(a.now)
	}
	a.routes = make(map[string]Rule, len(cfg.Routes))
	for _, route := range slices.Sorted(maps.Keys(cfg.Routes)) { // the first error is the same every time
		r, err := cfg.Routes[route].compile()
		if err != nil {
			return nil, fmt.Errorf("approval.routes.%s.%w", route, err)
		}
		a.routes[route] = r
	}
	if cfg.Default != nil {
		d, err := cfg.Default.compile()
		if err != nil {
			return nil, fmt.Errorf("approval.default.%w", err)
		}
		a.def = &d
	}
	return a, nil
}

// compile checks r and compiles its When.
func (r Rule) compile() (Rule, error) {
	if err := r.check(); err != nil {
		return r, err
	}
	r.when = nil
	if r.When != "" {
		c, err := authz.CompileCondition(r.When)
		if err != nil {
			return r, fmt.Errorf("when: %w", err)
		}
		r.when = c
	}
	return r.withDefaults(), nil
}

func (r Rule) check() error {
	for field, pats := range map[string][]string{"tools": r.Tools, "exempt": r.Exempt} {
		for _, p := range pats {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("%s: pattern %q: %w", field, p, err)
			}
		}
	}
	for _, a := range r.Annotations {
		if a == "" {
			return errors.New("annotations: empty annotation name")
		}
	}
	return nil
}

// withDefaults makes an entry that names neither annotations, tools nor a
// when condition select every tool not declared read-only (trusted
// readOnlyHint: true). An explicit empty list (annotations: []) stays
// empty.
func (r Rule) withDefaults() Rule {
	if r.Annotations == nil && r.Tools == nil && r.When == "" {
		r.notReadOnly = true
	}
	return r
}

// TTL is how long a minted state is accepted.
func (a *Approver) TTL() time.Duration { return a.ttl }

// Tool is what the policy looks at of a resolved tool.
type Tool struct {
	Name    string
	Service string
	Title   string
	// Annotations is the tool's annotations object as listed (may be nil).
	Annotations json.RawMessage
	// Untrusted: Annotations come from a federated server whose Portal
	// entry does not trust them. The rule then reads them as the MCP
	// defaults say of a tool that declares nothing (not read-only,
	// destructive, open-world): every annotation rule selects it.
	Untrusted bool
}

// Call is what a When condition reads of a call besides its tool.
type Call struct {
	// HeadersOnly: only the request headers are known (the ext_proc
	// request-headers phase). A When that reads args or caller cannot be
	// decided then, so the call may need approval.
	HeadersOnly bool
	// Caller returns the caller prepared for evaluation, called only when a
	// condition reads it (nil func or result: anonymous).
	Caller  func() *authz.Caller
	Era     string // the call's protocol version
	EraKind string // legacy or stateless
	Args    json.RawMessage
}

// Needs reports whether a call of t on route needs approval, and why (the
// annotation, pattern or condition that matched), for audit events and the
// approval message.
func (a *Approver) Needs(route string, t Tool, c Call) (bool, string) {
	r, ok := a.rule(route)
	if !ok || r.exempts(t) {
		return false, ""
	}
	why := r.selects(t)
	if why == "" {
		return false, ""
	}
	if r.when == nil {
		return true, why
	}
	if why == whenOnly {
		why = ""
	} else {
		why += " and "
	}
	if c.HeadersOnly && (r.when.Reads("args") || r.when.Reads("caller")) {
		return true, why + "a when condition on the arguments or the caller, decided with the body"
	}
	ann := t.Annotations
	if t.Untrusted {
		ann = nil // the effective defaults of authz.NewTool
	}
	in := authz.Input{Method: "tools/call", Era: c.Era, EraKind: c.EraKind,
		Tool: authz.NewTool(t.Name, t.Service, t.Title, ann)}
	if c.Caller != nil && r.when.Reads("caller") {
		in.Caller = c.Caller()
	}
	if r.when.Reads("args") {
		args, err := authz.Args(c.Args)
		if err != nil {
			return true, why + "the when condition, which could not be evaluated (" + err.Error() + ")"
		}
		in.Args = args
	}
	match, err := r.when.Eval(&in)
	switch {
	case err != nil:
		// Fail safe: a condition that cannot be evaluated (a missing claim
		// or argument, a wrong type) asks a person.
		return true, why + "the when condition, which could not be evaluated (" + err.Error() + ")"
	case match:
		return true, why + "the when condition"
	}
	return false, ""
}

// whenOnly is what selects says of a rule that selects by When alone.
const whenOnly = "\x00when"

// selects is why r's names and annotations select t ("" when they do not).
func (r *Rule) selects(t Tool) string {
	if len(r.Annotations) == 0 && len(r.Tools) == 0 && r.when != nil {
		return whenOnly
	}
	for _, p := range r.Tools {
		if m, _ := path.Match(p, t.Name); m {
			return "tool pattern " + p
		}
	}
	if t.Untrusted && (r.notReadOnly || len(r.Annotations) > 0) {
		return "untrusted annotations of a federated server"
	}
	if r.notReadOnly {
		var ann map[string]any
		if len(t.Annotations) > 0 && json.Unmarshal(t.Annotations, &ann) == nil {
			if v, _ := ann[ReadOnlyAnnotation].(bool); v {
				return ""
			}
		}
		return "no " + ReadOnlyAnnotation + ": true annotation"
	}
	if len(r.Annotations) > 0 && len(t.Annotations) > 0 {
		var ann map[string]any
		if json.Unmarshal(t.Annotations, &ann) == nil {
			for _, name := range r.Annotations {
				if v, _ := ann[name].(bool); v {
					return "annotation " + name
				}
			}
		}
	}
	return ""
}
