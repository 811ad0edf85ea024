package approval

import (
	"path"
	"slices"
)

// RuleView is the approval rule in force for a route, for the operator
// console; the keys are never part of it.
type RuleView struct {
	Annotations []string `json:"annotations,omitempty"`
	Tools       []string `json:"tools,omitempty"`
	Exempt      []string `json:"exempt,omitempty"`
	When        string   `json:"when,omitempty"`
	// NotReadOnly: the rule names nothing, so it selects every tool not
	// declared read-only (the default).
	NotReadOnly bool `json:"notReadOnly,omitempty"`
}

// View returns the rule in force for route (its own, else the default);
// ok is false when none of the route's calls needs approval.
func (a *Approver) View(route string) (v RuleView, ok bool) {
	r, ok := a.rule(route)
	if !ok {
		return RuleView{}, false
	}
	return RuleView{Annotations: slices.Clone(r.Annotations), Tools: slices.Clone(r.Tools),
		Exempt: slices.Clone(r.Exempt), When: r.When, NotReadOnly: r.notReadOnly}, true
}

// Selects reports whether route's rule selects t by its name or
// annotations, and why, as Needs would before evaluating a when condition;
// conditional is true when a when condition then decides per call.
func (a *Approver) Selects(route string, t Tool) (why string, conditional bool) {
	r, ok := a.rule(route)
	if !ok {
		return "", false
	}
	if r.exempts(t) {
		return "", false
	}
	why = r.selects(t)
	if why == whenOnly {
		why = "the when condition"
	}
	return why, why != "" && r.when != nil
}

// exempts reports whether an Exempt pattern matches t's name.
func (r *Rule) exempts(t Tool) bool {
	for _, p := range r.Exempt {
		if m, _ := path.Match(p, t.Name); m {
			return true
		}
	}
	return false
}

// rule is the rule of route in force; ok is false when it has none.
func (a *Approver) rule(route string) (Rule, bool) {
	if a == nil {
		return Rule{}, false
	}
	if r, ok := a.routes[route]; ok {
		return r, true
	}
	if a.def == nil {
		return Rule{}, false
	}
	return *a.def, true
}
