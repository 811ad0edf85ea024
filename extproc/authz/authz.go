// Package authz decides, per request, whether a caller may use a tool,
// resource or prompt of a route: CEL policies (github.com/google/cel-go)
// from the `policies` configuration key, compiled and type-checked once when
// the configuration loads, evaluated against values prepared ahead
// (values.go). docs/authorization.md is the operator's guide.
//
// Semantics of one route's policies, for one subject (a tool, resource or
// prompt):
//
//   - A policy applies to the subjects it names: one that reads `tool` or
//     `args` governs tools only, `resource` resources only, `prompt` prompts
//     only; one that reads none of them governs every subject.
//   - A matching deny policy wins.
//   - Otherwise, when any allow policy applies, at least one must match.
//   - Otherwise the request is allowed.
//   - A policy whose evaluation fails (a missing claim, a wrong type) never
//     grants: a failing deny counts as matched, a failing allow as not
//     matched. The decision then names that policy with DecisionError.
//
// Lists decide visibility with the call's arguments unknown (CEL partial
// evaluation): a policy that depends on them cannot hide a tool, the call
// decides.
package authz

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/toolmesh/toolmesh/extproc/identity"
)

// Config is the `policies` configuration key.
type Config struct {
	// Routes are the policies of each route, by route key; a route's entry
	// replaces Default as a whole.
	Routes map[string][]Policy `json:"routes,omitempty"`
	// Default are the policies of every route without its own entry.
	Default []Policy `json:"default,omitempty"`
}

// Policy is one named CEL rule.
type Policy struct {
	// Name is unique per route; audit events and errors name it.
	Name string `json:"name"`
	// Effect is "allow" or "deny".
	Effect string `json:"effect"`
	// When is a CEL expression of type bool over the variables of
	// docs/authorization.md.
	When string `json:"when"`
}

// Effects.
const (
	EffectAllow = "allow"
	EffectDeny  = "deny"
)

// Decisions, the decision label of toolmesh_authz_decisions_total and of
// audit events.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	// DecisionError: a policy could not be evaluated, so access was refused.
	DecisionError = "error"
)

// Kind is what a decision is about.
type Kind uint8

// Kinds of subject.
const (
	KindTool Kind = iota
	KindResource
	KindPrompt
	kinds
)

// Set is a compiled `policies` configuration. It is immutable; a reload
// builds a new one.
type Set struct {
	routes map[string]*Route
	def    *Route // nil when Default is empty
}

// Route returns the policies of route, nil when it has none (everything is
// allowed).
func (s *Set) Route(route string) *Route {
	if s == nil {
		return nil
	}
	if r, ok := s.routes[route]; ok {
		return r
	}
	return s.def
}

// Route is the compiled policies of one route.
type Route struct {
	policies [kinds][]*policy // the policies that apply to each kind
	// callerPaths are the caller attributes the policies read (see Key);
	// wholeCaller is set when some policy reads the caller in a way no
	// path describes.
	callerPaths [][]string
	wholeCaller bool
	usesEra     bool
	usesArgs    bool
}

type policy struct {
	name    string
	deny    bool
	when    string      // as configured, for View
	pos     int         // index in the route's configured list, for View
	prg     cel.Program // OptOptimize
	partial cel.Program // OptPartialEval, for lists
}

// env is the one CEL environment every policy compiles in.
var env = func() *cel.Env {
	reg, err := types.NewRegistry()
	if err != nil {
		panic(err)
	}
	e, err := cel.NewEnv(
		cel.CustomTypeProvider(provider{reg}),
		cel.Variable("caller", types.NewObjectType(callerType)),
		cel.Variable("method", types.StringType),
		cel.Variable("era", types.StringType),
		cel.Variable("era_kind", types.StringType),
		cel.Variable("tool", types.NewObjectType(toolType)),
		cel.Variable("resource", types.NewObjectType(resourceType)),
		cel.Variable("prompt", types.NewObjectType(promptType)),
		cel.Variable("args", dynMap),
	)
	if err != nil {
		panic(err)
	}
	return e
}()

var argsUnknown = []*cel.AttributePatternType{cel.AttributePattern("args")}

// Compile compiles and type-checks every policy of c. The error names the
// route (or "default") and the policy of every problem found.
func Compile(c *Config) (*Set, error) {
	s := &Set{routes: map[string]*Route{}}
	if c == nil {
		return s, nil
	}
	var errs []error
	if len(c.Default) > 0 {
		r, err := compileRoute("default", c.Default)
		errs = append(errs, err)
		s.def = r
	}
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		r, err := compileRoute("routes."+name, c.Routes[name])
		errs = append(errs, err)
		s.routes[name] = r // nil for an empty list: the route has no policies
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func compileRoute(where string, ps []Policy) (*Route, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	r := &Route{}
	var errs []error
	seen := map[string]bool{}
	paths := map[string][]string{}
	for i, p := range ps {
		at := fmt.Sprintf("%s[%d]", where, i)
		if p.Name != "" {
			at = fmt.Sprintf("%s policy %q", where, p.Name)
		}
		switch {
		case p.Name == "":
			errs = append(errs, fmt.Errorf("%s: name is empty", at))
			continue
		case seen[p.Name]:
			errs = append(errs, fmt.Errorf("%s: name is used twice", at))
			continue
		case p.Effect != EffectAllow && p.Effect != EffectDeny:
			errs = append(errs, fmt.Errorf("%s: effect %q is not allow or deny", at, p.Effect))
			continue
		case strings.TrimSpace(p.When) == "":
			errs = append(errs, fmt.Errorf("%s: when is empty", at))
			continue
		}
		seen[p.Name] = true
		checked, prg, err := compileBool(p.When)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
			continue
		}
		partial, err := env.Program(checked, cel.EvalOptions(cel.OptPartialEval))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
			continue
		}
		pol := &policy{name: p.Name, deny: p.Effect == EffectDeny, when: p.When, pos: i, prg: prg, partial: partial}
		refs := references(checked.NativeRep())
		// Each kind's list keeps the configured order, so the first
		// matching allow is the one named.
		governs := [kinds]bool{
			KindTool:     refs.vars["tool"] || refs.vars["args"],
			KindResource: refs.vars["resource"],
			KindPrompt:   refs.vars["prompt"],
		}
		subject := governs != [kinds]bool{}
		for k := range kinds {
			if governs[k] || !subject {
				r.policies[k] = append(r.policies[k], pol)
			}
		}
		r.usesEra = r.usesEra || refs.vars["era"] || refs.vars["era_kind"]
		r.usesArgs = r.usesArgs || refs.vars["args"]
		r.wholeCaller = r.wholeCaller || refs.wholeCaller
		for _, p := range refs.callerPaths {
			paths[strings.Join(p, "\x00")] = p
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(paths)) {
		r.callerPaths = append(r.callerPaths, paths[k])
	}
	return r, nil
}

// compileBool parses and type-checks expr in the policy environment and
// plans it; expr must be of type bool.
func compileBool(expr string) (*cel.Ast, cel.Program, error) {
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, nil, iss.Err()
	}
	if !checked.OutputType().IsExactType(types.BoolType) {
		return nil, nil, fmt.Errorf("when is of type %s, not bool", checked.OutputType())
	}
	prg, err := env.Program(checked, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, nil, err
	}
	return checked, prg, nil
}

// Condition is one CEL expression of type bool compiled in the policies'
// environment, for another feature's rule (an approval route's `when`): it
// reads the same variables, prepared the same way, as policies do.
type Condition struct {
	prg   cel.Program
	reads map[string]bool // the variables it reads
}

// CompileCondition compiles and type-checks expr; the error is CEL's
// (callers name the configuration field).
func CompileCondition(expr string) (*Condition, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("when is empty")
	}
	checked, prg, err := compileBool(expr)
	if err != nil {
		return nil, err
	}
	return &Condition{prg: prg, reads: references(checked.NativeRep()).vars}, nil
}

// Reads reports whether the condition reads variable name (caller, args,
// era, ...): a caller that cannot supply it yet cannot evaluate it.
func (c *Condition) Reads(name string) bool { return c.reads[name] }

// Eval evaluates the condition on in. An error (a missing claim or
// argument, a wrong type) is returned as such: the caller decides which way
// it fails.
func (c *Condition) Eval(in *Input) (bool, error) {
	out, _, err := c.prg.Eval((*activation)(in))
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("result is %s, not bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// Governs reports whether any policy applies to subjects of kind k: when
// none does, everything of that kind is allowed and lists need no filtering.
func (r *Route) Governs(k Kind) bool { return r != nil && len(r.policies[k]) > 0 }

// UsesArgs reports whether a policy reads the call's arguments, so a call
// needs them converted (Args).
func (r *Route) UsesArgs() bool { return r != nil && r.usesArgs }

// Input is what one decision is about. It is filled by the caller of Decide
// and Visible and not retained.
type Input struct {
	Caller   *Caller
	Method   string // the JSON-RPC method decided: tools/call, resources/read, prompts/get, completion/complete
	Era      string // the protocol version of the request
	EraKind  string // legacy or stateless
	Tool     *Tool
	Resource *Resource
	Prompt   *Prompt
	Args     ref.Val // the call's arguments (Args); nil: an empty object
}

// Decision is the outcome of a route's policies for one input.
type Decision struct {
	Allowed bool
	// Decision is DecisionAllow, DecisionDeny or DecisionError.
	Decision string
	// Policy names the deciding policy: the deny that matched, the policy
	// that failed, or the first allow that matched; "" when no policy
	// decided (allowed by default, or no allow policy matched).
	Policy string
	// Err is the evaluation error of DecisionError.
	Err error
}

var allowed = Decision{Allowed: true, Decision: DecisionAllow}

// Decide evaluates the route's policies for a call, read or get.
func (r *Route) Decide(k Kind, in *Input) Decision {
	return r.decide(k, in, false)
}

// Visible decides whether the subject is listed to the caller: Decide with
// the arguments unknown. A policy whose outcome depends on them neither
// hides nor shows: a deny that might match does not hide, an allow that
// might match shows.
func (r *Route) Visible(k Kind, in *Input) Decision {
	return r.decide(k, in, true)
}

func (r *Route) decide(k Kind, in *Input, list bool) Decision {
	if r == nil {
		return allowed
	}
	act := (*activation)(in)
	var vars any = act
	if list {
		pv, err := cel.PartialVars(interpreter.Activation(act), argsUnknown...)
		if err != nil { // unreachable: the pattern is a plain variable name
			return Decision{Decision: DecisionError, Err: err}
		}
		vars = pv
	}
	var (
		anyAllow   bool
		allowedBy  string
		allowError *Decision
	)
	for _, p := range r.policies[k] {
		prg := p.prg
		if list {
			prg = p.partial
		}
		out, _, err := prg.Eval(vars)
		if err == nil && types.IsUnknown(out) {
			// Only args is unknown, and only lists: the call decides.
			if !p.deny && allowedBy == "" {
				allowedBy = p.name
			}
			anyAllow = anyAllow || !p.deny
			continue
		}
		b, isBool := out.(types.Bool)
		if err == nil && !isBool {
			err = fmt.Errorf("result is %s, not bool", out.Type().TypeName())
		}
		switch {
		case err != nil && p.deny:
			return Decision{Decision: DecisionError, Policy: p.name, Err: err}
		case err != nil:
			anyAllow = true
			if allowError == nil {
				allowError = &Decision{Decision: DecisionError, Policy: p.name, Err: err}
			}
		case p.deny && bool(b):
			return Decision{Decision: DecisionDeny, Policy: p.name}
		case !p.deny:
			anyAllow = true
			if b && allowedBy == "" {
				allowedBy = p.name
			}
		}
	}
	switch {
	case !anyAllow:
		return allowed
	case allowedBy != "":
		return Decision{Allowed: true, Decision: DecisionAllow, Policy: allowedBy}
	case allowError != nil:
		return *allowError
	}
	return Decision{Decision: DecisionDeny}
}

// activation resolves the policy variables from an Input without a map.
type activation Input

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "caller":
		if a.Caller == nil {
			return anonymous, true
		}
		return a.Caller, true
	case "method":
		return types.String(a.Method), true
	case "era":
		return types.String(a.Era), true
	case "era_kind":
		return types.String(a.EraKind), true
	case "tool":
		return a.Tool, a.Tool != nil
	case "resource":
		return a.Resource, a.Resource != nil
	case "prompt":
		return a.Prompt, a.Prompt != nil
	case "args":
		if a.Args == nil {
			return emptyMap, true
		}
		return a.Args, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

var anonymous = NewCaller(nil)

// refs is what a checked policy reads.
type refs struct {
	vars        map[string]bool
	callerPaths [][]string
	wholeCaller bool
}

// references walks a checked expression for the variables it reads and,
// for caller, the attribute paths (caller.claims.roles → [claims roles]):
// the longest prefix of field selections and constant-string indexes. A
// caller used otherwise (passed whole, indexed by a computed key at the
// top) makes the whole caller relevant.
func references(a *ast.AST) refs {
	r := refs{vars: map[string]bool{}}
	var walk func(e ast.Expr)
	walk = func(e ast.Expr) {
		var computed []ast.Expr
		if p, _, ok := callerPath(e, &computed); ok {
			r.vars["caller"] = true
			if len(p) == 0 {
				r.wholeCaller = true
			}
			r.callerPaths = append(r.callerPaths, p)
			// A computed index reads what it is computed from, such as
			// caller.mesh_id in caller.claims.grants[caller.mesh_id].
			for _, ix := range computed {
				walk(ix)
			}
			return
		}
		switch e.Kind() {
		case ast.IdentKind:
			r.vars[e.AsIdent()] = true
		case ast.SelectKind:
			walk(e.AsSelect().Operand())
		case ast.CallKind:
			c := e.AsCall()
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, arg := range c.Args() {
				walk(arg)
			}
		case ast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el)
			}
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				walk(en.AsMapEntry().Key())
				walk(en.AsMapEntry().Value())
			}
		case ast.StructKind:
			for _, f := range e.AsStruct().Fields() {
				walk(f.AsStructField().Value())
			}
		case ast.ComprehensionKind:
			c := e.AsComprehension()
			walk(c.IterRange())
			walk(c.AccuInit())
			walk(c.LoopCondition())
			walk(c.LoopStep())
			walk(c.Result())
		}
	}
	walk(a.Expr())
	return r
}

// callerPath returns the attribute path e reads when e is a chain of
// selections and constant indexes rooted at the caller variable. The path
// ends at the first computed index (the value there decides), whose index
// expression, and those of any index after it, are added to computed;
// cut reports that the path ended so.
func callerPath(e ast.Expr, computed *[]ast.Expr) (p []string, cut, ok bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return nil, false, e.AsIdent() == "caller"
	case ast.SelectKind:
		s := e.AsSelect()
		p, cut, ok := callerPath(s.Operand(), computed)
		if !ok || cut {
			return p, cut, ok
		}
		return append(slices.Clip(p), s.FieldName()), false, true
	case ast.CallKind:
		c := e.AsCall()
		if c.FunctionName() != operators.Index || len(c.Args()) != 2 {
			return nil, false, false
		}
		p, cut, ok := callerPath(c.Args()[0], computed)
		if !ok {
			return nil, false, false
		}
		lit := c.Args()[1]
		if !cut && lit.Kind() == ast.LiteralKind {
			if s, isStr := lit.AsLiteral().(types.String); isStr {
				return append(slices.Clip(p), string(s)), false, true
			}
		}
		*computed = append(*computed, lit)
		return p, true, true
	}
	return nil, false, false
}

// Key is the cache key of what the caller may see on this route: the values
// of exactly the caller attributes the policies read (and the era when they
// read it), so callers that differ only in attributes no policy reads share
// one filtered catalog. It contains claim values and is only ever a map key,
// never logged. c nil is anonymous.
func (r *Route) Key(c *identity.Caller, era, eraKind string) string {
	if r == nil {
		return ""
	}
	b := make([]byte, 0, 64)
	if r.usesEra {
		b = append(append(append(append(b, era...), 0), eraKind...), 0)
	}
	if r.wholeCaller {
		return string(appendKeyValue(b, callerJSON(c)))
	}
	for _, p := range r.callerPaths {
		v, ok := callerAttr(c, p)
		if !ok {
			b = append(b, 1)
			continue
		}
		b = appendKeyValue(b, v)
	}
	return string(b)
}

// appendKeyValue appends an unambiguous encoding of v: JSON, written
// directly for the shapes claims usually have.
func appendKeyValue(b []byte, v any) []byte {
	b = append(b, 2)
	return appendJSON(b, v)
}

func appendJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return strconv.AppendQuote(b, v)
	case bool:
		return strconv.AppendBool(b, v)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case nil:
		return append(b, "null"...)
	case []string:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, e)
		}
		return append(b, ']')
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	}
	j, err := json.Marshal(v) // maps are written with sorted keys
	if err != nil {
		j = fmt.Appendf(nil, "%#v", v)
	}
	return append(b, j...)
}

// callerAttr is the value at path p of the caller, as plain Go data.
func callerAttr(c *identity.Caller, p []string) (any, bool) {
	if c == nil {
		c = &identity.Caller{}
	}
	var v any
	switch p[0] {
	case "authenticated":
		v = c.Authenticated
	case "iss":
		v = c.Issuer
	case "sub":
		v = c.Subject
	case "mesh_id":
		v = c.MeshID
	case "aud":
		v = c.Audience
	case "scopes":
		v = c.Scopes
	case "claims":
		v = c.Claims
	default:
		return nil, false
	}
	for _, k := range p[1:] {
		m, ok := v.(map[string]any)
		if !ok {
			return v, true // an index into a list or scalar: the whole value decides
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func callerJSON(c *identity.Caller) any {
	if c == nil {
		c = &identity.Caller{}
	}
	return map[string]any{"authenticated": c.Authenticated, "iss": c.Issuer, "sub": c.Subject, "mesh_id": c.MeshID,
		"aud": c.Audience, "scopes": c.Scopes, "claims": c.Claims}
}
