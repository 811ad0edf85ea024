package search

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Query limits: the request path must stay cheap whatever a client sends.
const (
	maxQueryBytes = 1024 // longer queries are cut (at a rune boundary)
	maxGroups     = 32   // meaningful words considered per query
)

// minSpecificDF is the document frequency up to which a word is specific
// whatever the catalog size.
const minSpecificDF = 5

// group is one meaningful query word with the index terms it may match.
type group struct {
	word     string    // lowercase surface word, for Hit.Matched
	idf      float32   // IDF the word's matches score with
	weight   float64   // share of the query it stands for (capped IDF)
	specific bool      // rare enough to identify tools on its own
	variants []variant // the word itself and its synonyms, as known terms
}

type variant struct {
	term  int32
	w     float32
	assoc bool // learned association: scores, but is not a match
}

// parse turns a query into groups. Values a model or a person might paste
// into a request (quoted strings, e-mail addresses, URLs, numbers and codes
// the catalog does not know) are dropped: they say which record, not which
// tool.
func (ix *Index) parse(q string) []group {
	if len(q) > maxQueryBytes {
		cut := maxQueryBytes
		for cut > 0 && !utf8.RuneStart(q[cut]) {
			cut--
		}
		q = q[:cut]
	}
	q = stripValues(q)
	var groups []group
	seen := map[string]bool{}
	// In a small catalog every word is rare; a handful of tools is the floor.
	specificDF := max(minSpecificDF, int32(ix.p.specificDFShare*float64(len(ix.names))))
	analyze(q, false, func(t token) {
		if len(groups) >= maxGroups || (!t.phrase && stopwords[t.text]) {
			return
		}
		if utf8.RuneCountInString(t.text) < 2 && !t.digit {
			return
		}
		term := normalize(t.text)
		if seen[term] {
			return
		}
		g := group{word: t.text}
		known := false
		df := int32(0)
		if id, ok := ix.terms[term]; ok {
			g.variants = append(g.variants, variant{term: id, w: 1})
			g.idf, df, known = ix.idf[id], ix.df[id], true
		}
		for _, s := range ix.synonymsOf(term) {
			id, ok := ix.terms[s]
			if !ok {
				continue
			}
			g.variants = append(g.variants, variant{term: id, w: ix.p.synonymWeight})
			if !known && ix.df[id] > df {
				// The word is unknown but its synonyms are not: it is as
				// common as its most common known synonym.
				g.idf, df = ix.idf[id], ix.df[id]
			}
		}
		// Learned links of the word and of its synonyms, weaker still.
		if ix.assoc != nil {
			nv := len(g.variants)
			for _, v := range g.variants[:nv] {
				for _, l := range ix.assoc[v.term] {
					g.variants = append(g.variants, variant{term: l.term, w: v.w * ix.p.assocWeight * l.strength, assoc: true})
				}
			}
		}
		switch {
		case len(g.variants) > 0:
			g.weight = min(float64(g.idf), ix.capIDF)
			g.specific = df <= specificDF
		case t.digit:
			return // a number or a code: a value
		case t.upper && !t.first:
			g.weight = ix.capIDF * ix.p.upperOOVShare
		default:
			g.weight = ix.capIDF
		}
		seen[term] = true
		groups = append(groups, g)
	})
	dropOwnSynonyms(groups)
	return groups
}

// dropOwnSynonyms removes, from each group, the synonyms that another word
// of the query stands for itself. In "create an employee and add them to a
// group", add is a synonym of create; without this, one "create" in a tool
// name would count for both words and crowd out the tool that adds.
func dropOwnSynonyms(groups []group) {
	if len(groups) < 2 {
		return
	}
	var own []int32
	for _, g := range groups {
		if len(g.variants) > 0 && g.variants[0].w == 1 {
			own = append(own, g.variants[0].term)
		}
	}
	for i := range groups {
		vs := groups[i].variants
		if len(vs) < 2 {
			continue
		}
		kept := vs[:1]
		for _, v := range vs[1:] {
			if !slices.Contains(own, v.term) {
				kept = append(kept, v)
			}
		}
		groups[i].variants = kept
	}
}

// stripValues blanks out quoted strings and whitespace-separated chunks that
// are e-mail addresses or URLs.
func stripValues(q string) string {
	if strings.ContainsAny(q, "\"`“”") {
		var b strings.Builder
		for i := 0; i < len(q); {
			r, size := utf8.DecodeRuneInString(q[i:])
			closeQ := rune(0)
			switch r {
			case '"', '`':
				closeQ = r
			case '“':
				closeQ = '”'
			}
			if closeQ != 0 {
				if j := strings.IndexRune(q[i+size:], closeQ); j >= 0 {
					b.WriteByte(' ')
					i += size + j + utf8.RuneLen(closeQ)
					continue
				}
			}
			b.WriteString(q[i : i+size])
			i += size
		}
		q = b.String()
	}
	if !strings.Contains(q, "@") && !strings.Contains(q, "://") {
		return q
	}
	fields := strings.Fields(q)
	kept := fields[:0]
	for _, f := range fields {
		if !strings.Contains(f, "@") && !strings.Contains(f, "://") {
			kept = append(kept, f)
		}
	}
	return strings.Join(kept, " ")
}

// synonymsOf returns the built-in synonyms of term followed by the
// catalog's own (Options.Synonyms).
func (ix *Index) synonymsOf(term string) []string {
	if s, ok := ix.synonyms[term]; ok {
		return s
	}
	return synonyms[term]
}
