package search

import "slices"

// assocLink is one association learned from the catalog: a term and a name
// term that the catalog's tools use together.
type assocLink struct {
	term     int32   // the name term
	strength float32 // share of the tools using the word whose name has term
}

// buildAssoc learns, from the catalog alone and once per index, which name
// terms each term goes with. Tool Services describe a tool in other words
// than its name ("Drain a runner: take no new jobs"), and those words recur
// across the tools of one object or family; a request that uses them but
// not the tool's own words still points at that family. all holds each
// doc's terms, names each doc's name terms.
//
// For a term t used by at least two tools and a name term n, the strength is
// the share of the tools using t whose name contains n. Name terms in more
// than assocMaxDF of the tools (generic verbs, big domain prefixes) are
// never targets, links under assocMin are dropped and the assocTop
// strongest are kept. The cost is linear in the sum over tools of terms ×
// name terms.
func (ix *Index) buildAssoc(all, names [][]int32) {
	p := ix.p
	maxDF := int32(max(minSpecificDF, p.assocMaxDF*float64(len(all))))
	counts := map[uint64]int32{}
	for i := range all {
		for _, t := range all[i] {
			if ix.df[t] < 2 {
				continue
			}
			for _, n := range names[i] {
				if n != t && ix.df[n] <= maxDF {
					counts[uint64(t)<<32|uint64(n)]++
				}
			}
		}
	}
	ix.assoc = make([][]assocLink, len(ix.df))
	for k, c := range counts {
		t, n := int32(k>>32), int32(k&0xffffffff)
		if s := float64(c) / float64(ix.df[t]); s >= p.assocMin {
			ix.assoc[t] = append(ix.assoc[t], assocLink{term: n, strength: float32(s)})
		}
	}
	for t, ls := range ix.assoc {
		// Map order is random: sort so the kept links are deterministic.
		slices.SortFunc(ls, func(a, b assocLink) int {
			switch {
			case a.strength > b.strength:
				return -1
			case a.strength < b.strength:
				return 1
			}
			return int(a.term - b.term)
		})
		if len(ls) > p.assocTop {
			ix.assoc[t] = slices.Clip(ls[:p.assocTop])
		}
	}
}
