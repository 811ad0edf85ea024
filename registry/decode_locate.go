package registry

import (
	"regexp"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// Validation errors name what they are about in a fixed form (see
// Route.normalize and Listing.Validate):
//
//	route "core": tool service "calc": cluster.lbPolicy: ...
//	routes[2]: toolServices[0]: url: ...
//
// validationRE splits that prefix so locate can find the field's node.
var validationRE = regexp.MustCompile(`^(?:route "((?:[^"\\]|\\.)*)"|routes\[(\d+)\]): (?:(?:tool service "((?:[^"\\]|\\.)*)"|toolServices\[(\d+)\]): )?(?:([A-Za-z][A-Za-z0-9]*(?:\[\d+\])*(?:\.[A-Za-z][A-Za-z0-9]*(?:\[\d+\])*)*)(?::|\[| ))?`)

var fieldSegRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*)((?:\[\d+\])*)$`)

// locate turns the joined errors of Listing.Validate into a *ListingError
// that places each on the field it names in the document root (nil: no
// positions). An error it cannot place keeps no position, never a wrong one.
func locate(root *yaml3.Node, err error) *ListingError {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	le := &ListingError{}
	for _, e := range errs {
		p := ListingProblem{Err: e}
		if root != nil {
			if n := findValidated(root, e.Error()); n != nil {
				p.Line, p.Column = n.Line, n.Column
			}
		}
		le.Problems = append(le.Problems, p)
	}
	sortProblems(le.Problems)
	return le
}

// findValidated returns the node a validation message is about: the key
// node of the field it names, else the closest enclosing object.
func findValidated(root *yaml3.Node, msg string) *yaml3.Node {
	m := validationRE.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	routes := seqItems(mapValue(root, "routes"))
	// A duplicate is reported on its second occurrence.
	nth := 0
	if strings.Contains(msg, "duplicate route key") || strings.Contains(msg, "is already used by route") {
		nth = 1
	}
	var route *yaml3.Node
	switch {
	case m[2] != "":
		i, _ := strconv.Atoi(m[2])
		if i < len(routes) {
			route = routes[i]
		}
	default:
		key, _ := strconv.Unquote(`"` + m[1] + `"`)
		route = nthWith(routes, "key", key, nth)
	}
	if route == nil {
		return nil
	}
	at, obj := route, route
	if m[3] != "" || m[4] != "" {
		services := seqItems(mapValue(route, "toolServices"))
		var svc *yaml3.Node
		if m[4] != "" {
			i, _ := strconv.Atoi(m[4])
			if i < len(services) {
				svc = services[i]
			}
		} else {
			name, _ := strconv.Unquote(`"` + m[3] + `"`)
			n := 0
			if strings.Contains(msg, "listed twice in the route") {
				n = 1
			}
			svc = nthWith(services, "name", name, n)
		}
		if svc == nil {
			return route
		}
		at, obj = svc, svc
	}
	if m[5] == "" {
		return at
	}
	// Walk the dotted field path; stop at the deepest part that exists.
	for _, seg := range strings.Split(m[5], ".") {
		sm := fieldSegRE.FindStringSubmatch(seg)
		if sm == nil {
			break
		}
		key, val := mapEntry(obj, sm[1])
		if key == nil {
			break
		}
		at, obj = key, val
		for _, idx := range strings.Split(strings.Trim(sm[2], "[]"), "][") {
			if idx == "" {
				continue
			}
			i, _ := strconv.Atoi(idx)
			items := seqItems(obj)
			if i >= len(items) {
				break
			}
			at, obj = items[i], items[i]
		}
	}
	return at
}

func deref(n *yaml3.Node) *yaml3.Node {
	for n != nil && n.Kind == yaml3.AliasNode {
		n = n.Alias
	}
	return n
}

// mapEntry returns the key and value nodes of field name in mapping n.
func mapEntry(n *yaml3.Node, name string) (key, val *yaml3.Node) {
	n = deref(n)
	if n == nil || n.Kind != yaml3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			key, val = n.Content[i], deref(n.Content[i+1])
		}
	}
	return key, val // the last one wins, as in decoding
}

func mapValue(n *yaml3.Node, name string) *yaml3.Node {
	_, v := mapEntry(n, name)
	return v
}

func seqItems(n *yaml3.Node) []*yaml3.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml3.SequenceNode {
		return nil
	}
	items := make([]*yaml3.Node, len(n.Content))
	for i, c := range n.Content {
		items[i] = deref(c)
	}
	return items
}

// nthWith returns the nth (0-based) item whose field has value v, or the
// last such item when there are fewer.
func nthWith(items []*yaml3.Node, field, v string, nth int) *yaml3.Node {
	var found *yaml3.Node
	for _, it := range items {
		if f := mapValue(it, field); f != nil && f.Kind == yaml3.ScalarNode && f.Value == v {
			found = it
			if nth == 0 {
				return it
			}
			nth--
		}
	}
	return found
}
