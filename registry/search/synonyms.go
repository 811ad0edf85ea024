package search

import (
	"fmt"
	"strings"
)

// Limits on Options.Synonyms, so that a catalog's own lexicon stays small
// next to the index.
const (
	MaxSynonymGroups    = 1000
	MaxSynonymGroupSize = 32
	maxSynonymWordBytes = 64
)

// ValidateSynonyms reports the problems of a catalog's synonym groups,
// each naming its group by index: too many groups, a group of fewer than
// two or more than MaxSynonymGroupSize words, or an entry that the
// tokenizer would not read as one word ("e-mail", "sign_in").
func ValidateSynonyms(groups []string) []error {
	var errs []error
	if len(groups) > MaxSynonymGroups {
		errs = append(errs, fmt.Errorf(": %d groups, at most %d", len(groups), MaxSynonymGroups))
	}
	for i, g := range groups {
		fields := strings.Fields(g)
		if len(fields) < 2 || len(fields) > MaxSynonymGroupSize {
			errs = append(errs, fmt.Errorf("[%d]: %d words, want 2..%d", i, len(fields), MaxSynonymGroupSize))
			continue
		}
		for _, f := range fields {
			if len(f) > maxSynonymWordBytes {
				errs = append(errs, fmt.Errorf("[%d]: %.20q… is longer than %d bytes", i, f, maxSynonymWordBytes))
				continue
			}
			if ws := identifierWords(f); len(ws) != 1 || ws[0] != strings.ToLower(f) {
				errs = append(errs, fmt.Errorf("[%d]: %q is not one word of letters and digits", i, f))
			}
		}
	}
	return errs
}

// synonymTerms returns the index terms of one group, skipping entries that
// are not single words.
func synonymTerms(group string) []string {
	var terms []string
	for _, f := range strings.Fields(group) {
		if ws := identifierWords(f); len(ws) == 1 && len(f) <= maxSynonymWordBytes {
			if t := normalize(ws[0]); !contains(terms, t) {
				terms = append(terms, t)
			}
		}
	}
	return terms
}
