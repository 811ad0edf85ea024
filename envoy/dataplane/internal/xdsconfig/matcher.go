package xdsconfig

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
)

// stringMatcher emulates Matchers::StringMatcherImpl
// (source/common/common/matchers.cc): exact, prefix, suffix, contains and
// safe_regex (a full match, RE2 syntax — Go's regexp is RE2), with
// ignore_case for all but regex.
type stringMatcher struct {
	kind       int // 0 exact, 1 prefix, 2 suffix, 3 contains, 4 regex
	s          string
	re         *regexp.Regexp
	ignoreCase bool
}

func compileStringMatcher(m *matcherv3.StringMatcher) (*stringMatcher, error) {
	if m == nil {
		return nil, errors.New("missing string matcher")
	}
	sm := &stringMatcher{ignoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		sm.kind, sm.s = 0, p.Exact
	case *matcherv3.StringMatcher_Prefix:
		sm.kind, sm.s = 1, p.Prefix
	case *matcherv3.StringMatcher_Suffix:
		sm.kind, sm.s = 2, p.Suffix
	case *matcherv3.StringMatcher_Contains:
		sm.kind, sm.s = 3, p.Contains
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := compileRegex(p.SafeRegex)
		if err != nil {
			return nil, err
		}
		sm.kind, sm.re = 4, re
	default:
		return nil, fmt.Errorf("string matcher %T is not emulated", p)
	}
	if sm.ignoreCase {
		sm.s = strings.ToLower(sm.s)
	}
	return sm, nil
}

// compileRegex compiles a RegexMatcher for full matches.
func compileRegex(r *matcherv3.RegexMatcher) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + r.GetRegex() + `)$`)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", r.GetRegex(), err)
	}
	return re, nil
}

func (m *stringMatcher) match(v string) bool {
	if m.kind == 4 {
		return m.re.MatchString(v)
	}
	if m.ignoreCase {
		v = strings.ToLower(v)
	}
	switch m.kind {
	case 0:
		return v == m.s
	case 1:
		return strings.HasPrefix(v, m.s)
	case 2:
		return strings.HasSuffix(v, m.s)
	default:
		return strings.Contains(v, m.s)
	}
}

// headerMatcher emulates HeaderUtility::HeaderData
// (source/common/http/header_utility.cc): a missing header never matches
// (whatever invert_match says) unless treat_missing_header_as_empty; a
// repeated header matches when one of its values does (rules.go, "Route
// header matchers"), and invert_match inverts that result; present_match
// compares presence.
type headerMatcher struct {
	name           string
	present        *bool
	rangeStart     int64
	rangeEnd       int64
	isRange        bool
	str            *stringMatcher
	invert         bool
	missingIsEmpty bool
}

func compileHeaderMatcher(h *routev3.HeaderMatcher) (*headerMatcher, error) {
	hm := &headerMatcher{
		name:           strings.ToLower(h.GetName()),
		invert:         h.GetInvertMatch(),
		missingIsEmpty: h.GetTreatMissingHeaderAsEmpty(),
	}
	var err error
	switch s := h.GetHeaderMatchSpecifier().(type) {
	case nil:
		// No specifier: Envoy treats it as a present match.
		hm.present = new(true)
	case *routev3.HeaderMatcher_PresentMatch:
		hm.present = new(s.PresentMatch)
	case *routev3.HeaderMatcher_RangeMatch:
		hm.isRange = true
		hm.rangeStart, hm.rangeEnd = s.RangeMatch.GetStart(), s.RangeMatch.GetEnd()
	case *routev3.HeaderMatcher_StringMatch:
		hm.str, err = compileStringMatcher(s.StringMatch)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", h.GetName(), err)
		}
	default:
		// The deprecated exact, prefix, suffix, contains and safe_regex
		// fields too: string_match does what they did.
		return nil, fmt.Errorf("header matcher %T is not emulated", s)
	}
	return hm, nil
}

func (m *headerMatcher) match(h *headers.Map) bool {
	if m.present != nil {
		return (h.Has(m.name) == *m.present) != m.invert
	}
	seen, r := false, false
	for _, e := range h.H {
		if e.Key != m.name {
			continue
		}
		seen = true
		if m.matchValue(e.Value) {
			r = true
			break
		}
	}
	if !seen {
		if !m.missingIsEmpty {
			return false
		}
		r = m.matchValue("")
	}
	return r != m.invert
}

// matchValue matches one value of the header.
func (m *headerMatcher) matchValue(v string) bool {
	if m.isRange {
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && n >= m.rangeStart && n < m.rangeEnd
	}
	return m.str.match(v)
}

func matchHeaders(ms []*headerMatcher, h *headers.Map) bool {
	for _, m := range ms {
		if !m.match(h) {
			return false
		}
	}
	return true
}
