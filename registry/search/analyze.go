package search

import (
	"strings"
	"unicode/utf8"
)

// token is one analysed word: a phrase joined into its canonical term, or a
// single word, with the flags the query gate looks at.
type token struct {
	text   string // lowercase surface form (or the canonical term of a phrase)
	phrase bool   // text is a phrase's canonical term
	upper  bool   // started with a capital letter
	digit  bool   // contains a digit
	first  bool   // starts a sentence
}

// analyze splits text into tokens, joining known phrases. With keepParts the
// words of a joined phrase are kept as well (for indexed text, so "roll back"
// in a description matches both "rollback" and "roll").
func analyze(text string, keepParts bool, emit func(token)) {
	var ws []word
	splitWords(text, func(w word) { ws = append(ws, w) })
	for i := 0; i < len(ws); {
		n, canon := matchPhrase(ws[i:])
		if n > 0 {
			emit(token{text: canon, phrase: true, first: ws[i].first})
			if keepParts {
				for _, w := range ws[i : i+n] {
					emit(token{text: w.text, upper: w.upper, digit: w.digit, first: w.first})
				}
			}
			i += n
			continue
		}
		w := ws[i]
		emit(token{text: w.text, upper: w.upper, digit: w.digit, first: w.first})
		i++
	}
}

// matchPhrase returns the length and canonical term of the longest phrase
// that starts ws, or 0.
func matchPhrase(ws []word) (int, string) {
	if !phraseStarts[ws[0].text] {
		return 0, ""
	}
	for n := min(maxPhraseWords, len(ws)); n >= 2; n-- {
		parts := make([]string, n)
		for i := range n {
			parts[i] = ws[i].text
		}
		if canon, ok := phrases[strings.Join(parts, " ")]; ok {
			return n, canon
		}
	}
	return 0, ""
}

// indexTerms returns the index terms of a text: analysed, without stopwords,
// normalised.
func indexTerms(text string, emit func(string)) {
	analyze(text, true, func(t token) {
		if !t.phrase && stopwords[t.text] {
			return
		}
		if utf8.RuneCountInString(t.text) < 2 && !t.digit {
			return
		}
		emit(normalize(t.text))
	})
}
