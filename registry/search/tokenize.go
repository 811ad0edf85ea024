package search

import (
	"unicode"
	"unicode/utf8"
)

// maxTokenRunes bounds one token; longer runs of letters are cut, so a hostile
// description cannot make a single huge term.
const maxTokenRunes = 48

// word is one token of a text, before normalisation.
type word struct {
	text  string // lowercased
	upper bool   // the token started with an upper-case letter
	digit bool   // the token contains a digit
	first bool   // the token starts its sentence (or the text)
}

// splitWords splits s into lowercase words. Separators are every rune that is
// neither a letter nor a digit (so `_`, `.`, `-`, spaces and punctuation), and
// camelCase boundaries: a lower-case letter or digit followed by an upper-case
// one ("getUser" → get, user; but "iCloud" stays one word) and the last capital of an upper-case run that
// starts a capitalised word ("HTTPServer" → http, server). Digits stay with
// the letters around them ("v2", "s3", "base64"), because in identifiers they
// are part of the name, not a separate word.
func splitWords(s string, emit func(w word)) {
	var (
		buf      []rune
		hasDigit bool
		first    = true // next word starts a sentence
	)
	flush := func() {
		if len(buf) == 0 {
			return
		}
		if len(buf) > maxTokenRunes {
			buf = buf[:maxTokenRunes]
		}
		w := word{upper: unicode.IsUpper(buf[0]), digit: hasDigit, first: first}
		for i, r := range buf {
			buf[i] = unicode.ToLower(r)
		}
		w.text = string(buf)
		emit(w)
		buf, hasDigit, first = buf[:0], false, false
	}
	var prev rune
	for i, r := range s {
		if r == utf8.RuneError {
			// Invalid UTF-8 is a separator; it never makes a term.
			flush()
			prev = 0
			continue
		}
		isLetter, isDigit := unicode.IsLetter(r), unicode.IsDigit(r)
		if !isLetter && !isDigit {
			flush()
			if r == '.' || r == '?' || r == '!' || r == ';' || r == ':' {
				// Sentence punctuation, but not inside identifiers such as
				// crm.contacts.create: there the next rune is not a space.
				next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
				if next == ' ' || next == '\n' || next == '\t' || next == utf8.RuneError {
					first = true
				}
			}
			prev = 0
			continue
		}
		if unicode.IsUpper(r) && len(buf) > 0 {
			switch {
			case len(buf) == 1 && unicode.IsLower(prev):
				// "iCloud", "eBay", "pH": a one-letter prefix is not a
				// word of its own.
			case unicode.IsLower(prev) || unicode.IsDigit(prev):
				flush()
			case unicode.IsUpper(prev):
				// "HTTPServer": split before the S only if a lower-case
				// letter follows.
				next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
				if unicode.IsLower(next) {
					flush()
				}
			}
		}
		buf = append(buf, r)
		hasDigit = hasDigit || isDigit
		prev = r
	}
	flush()
}

// identifierWords returns the lowercase words of an identifier such as a tool
// name or a schema property name.
func identifierWords(s string) []string {
	var out []string
	splitWords(s, func(w word) { out = append(out, w.text) })
	return out
}

// normalize maps one lowercase word to its index term: irregular forms to
// their base, everything else through the light stemmer. Words with digits
// are kept as they are ("v2" is not a plural).
func normalize(w string) string {
	if base, ok := irregular[w]; ok {
		return base
	}
	for _, r := range w {
		if r >= '0' && r <= '9' {
			return w
		}
	}
	return stem(w)
}
