package search

import "strings"

// stem is a deliberately light suffix stripper for English. It folds the
// inflections that separate a query from a tool name ("contacts" / "contact",
// "creating" / "created" / "create", "entries" / "entry") and a few
// derivations ("deployment" / "deploy", "deletion" / "delete", "ownership" /
// "owner", "availability" / "available"). It does not
// aim at linguistic roots: both sides of a comparison go through the same
// function, so only consistency matters. Words of three letters or fewer are
// left alone except for a plain plural ("ids" → "id").
func stem(w string) string {
	n := len(w)
	if n <= 2 || !isASCIILower(w) {
		return w
	}
	if n == 3 {
		if w[2] == 's' && w[1] != 's' && w[1] != 'u' && w[1] != 'i' {
			return w[:2]
		}
		return w
	}
	w, done := stripVerb(stripPlural(w))
	if done {
		return w
	}
	w = stripDerivation(w)
	// A final e, so that "create", "created" and "creating" meet at "creat".
	if n = len(w); n > 4 && w[n-1] == 'e' {
		w = w[:n-1]
	}
	return w
}

// stripPlural folds plurals and the third person.
func stripPlural(w string) string {
	n := len(w)
	switch {
	case strings.HasSuffix(w, "ies") && n > 4:
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "sses"):
		return w[:n-2]
	case strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "zzes"):
		return w[:n-2]
	case strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "us") || strings.HasSuffix(w, "is"):
		return w
	case strings.HasSuffix(w, "s"):
		return w[:n-1]
	}
	return w
}

// stripVerb folds the verb forms -ied, -ing and -ed. done is true when the
// result is final (no derivation or final e to strip).
func stripVerb(w string) (_ string, done bool) {
	n := len(w)
	stripped := ""
	switch {
	case strings.HasSuffix(w, "ied") && n > 4:
		return w[:n-3] + "y", true
	case strings.HasSuffix(w, "ing") && hasVowel(w[:n-3]) && n-3 >= 3:
		stripped = w[:n-3]
	case strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed") && hasVowel(w[:n-2]) && n-2 >= 3:
		stripped = w[:n-2]
	}
	if stripped == "" {
		return w, false
	}
	m := len(stripped)
	switch {
	case m >= 4 && stripped[m-1] == stripped[m-2] && undoubles(stripped[m-1]):
		// "getting" → get, "planned" → plan; "billing" keeps its l.
		return stripped[:m-1], true
	case m == 3 && isCVC(stripped):
		// "filed" → file, "rated" → rate: the e that -ed/-ing ate.
		return stripped + "e", true
	}
	return stripped, false
}

// stripDerivation folds -ment and -tion on long stems, -ship on nouns, and
// -ability back to -able ("availability" meets "available").
func stripDerivation(w string) string {
	n := len(w)
	switch {
	case strings.HasSuffix(w, "ship") && n-4 >= 5:
		// "ownership" → owner, "membership" → member.
		return w[:n-4]
	case strings.HasSuffix(w, "ability") && n-7 >= 3:
		return w[:n-7] + "able"
	case strings.HasSuffix(w, "ibility") && n-7 >= 3:
		return w[:n-7] + "ible"
	case strings.HasSuffix(w, "ment") && n-4 >= 5:
		return w[:n-4]
	case n-3 >= 5 && (strings.HasSuffix(w, "ation") || strings.HasSuffix(w, "etion") ||
		strings.HasSuffix(w, "ition") || strings.HasSuffix(w, "ution")):
		// Only Latinate -ate/-ete/-ite/-ute verbs: "creation" → creat, but
		// "production" stays apart from "product", "collection" from
		// "collect".
		return w[:n-3]
	}
	return w
}

func isASCIILower(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

func isVowel(c byte) bool { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' }

func hasVowel(s string) bool {
	for i := 0; i < len(s); i++ {
		if isVowel(s[i]) || (s[i] == 'y' && i > 0) {
			return true
		}
	}
	return false
}

// isCVC reports whether a three-letter stem is consonant-vowel-consonant
// with a final consonant that takes a silent e (not w, x or y).
func isCVC(s string) bool {
	return !isVowel(s[0]) && isVowel(s[1]) && !isVowel(s[2]) && s[2] != 'w' && s[2] != 'x' && s[2] != 'y'
}

func undoubles(c byte) bool {
	switch c {
	case 'b', 'd', 'g', 'm', 'n', 'p', 'r', 't':
		return true
	}
	return false
}
