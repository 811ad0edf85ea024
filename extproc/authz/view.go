package authz

import (
	"cmp"
	"maps"
	"slices"
)

// PolicyView is one policy of a route in force, for the operator console.
type PolicyView struct {
	Name   string `json:"name"`
	Effect string `json:"effect"`
	When   string `json:"when"`
	// Subjects are what the policy governs: tool, resource and prompt, or a
	// subset (see the package comment).
	Subjects []string `json:"subjects"`
	// Methods are the methods it decides, lists included: a list shows
	// what the call, read or get it leads to would allow.
	Methods []string `json:"methods"`
}

var kindNames = [kinds]string{KindTool: "tool", KindResource: "resource", KindPrompt: "prompt"}

var kindMethods = [kinds][]string{
	KindTool:     {"tools/call", "tools/list"},
	KindResource: {"resources/read", "resources/list", "resources/templates/list", "completion/complete"},
	KindPrompt:   {"prompts/get", "prompts/list", "completion/complete"},
}

// View lists the policies in force for route in their configured order;
// nil when the route has none (everything is allowed).
func (s *Set) View(route string) []PolicyView {
	r := s.Route(route)
	if r == nil {
		return nil
	}
	views := map[*policy]*PolicyView{}
	for k := range kinds {
		for _, p := range r.policies[k] {
			v := views[p]
			if v == nil {
				v = &PolicyView{Name: p.name, Effect: EffectAllow, When: p.when}
				if p.deny {
					v.Effect = EffectDeny
				}
				views[p] = v
			}
			v.Subjects = append(v.Subjects, kindNames[k])
			for _, m := range kindMethods[k] {
				if !slices.Contains(v.Methods, m) {
					v.Methods = append(v.Methods, m)
				}
			}
		}
	}
	ps := slices.SortedFunc(maps.Keys(views), func(a, b *policy) int { return cmp.Compare(a.pos, b.pos) })
	out := make([]PolicyView, len(ps))
	for i, p := range ps {
		out[i] = *views[p]
	}
	return out
}
