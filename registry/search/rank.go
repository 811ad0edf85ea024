package search

import (
	"math/bits"
	"slices"
	"sort"
)

// Search returns up to limit tools for query, best first, or none when the
// gate finds that nothing really matches. A limit of 0 or less, or above the
// index's shortlist size, means the shortlist size. Ties are broken by name.
func (ix *Index) Search(query string, limit int) []Hit {
	hits, _ := ix.search(query, limit, nil)
	return hits
}

// gateResult says why the gate accepted or rejected a shortlist.
type gateResult struct {
	coverage float64 // share of the query's weight the shortlist explains
	specific bool    // the shortlist matches a specific word in identifiers
	ok       bool
}

// search ranks query; when lx is not nil it also records there the
// candidate pool that semantic fusion re-ranks (fusion.go).
func (ix *Index) search(query string, limit int, lx *Lexical) ([]Hit, gateResult) {
	var gr gateResult
	if limit <= 0 || limit > ix.shortlist {
		limit = ix.shortlist
	}
	if len(ix.names) == 0 {
		return nil, gr
	}
	groups := ix.parse(query)
	if len(groups) == 0 {
		return nil, gr
	}
	sc := ix.scratch.Get().(*scratch)
	defer ix.scratch.Put(sc)
	ix.accumulate(groups, sc)

	cands := ix.topCandidates(sc)
	if len(cands) == 0 || float64(sc.score[cands[0]]) < ix.minScore {
		return nil, gr
	}

	if lx != nil {
		lx.pool = lx.pool[:0]
		for _, d := range cands {
			specific := false
			for gi, g := range groups {
				specific = specific || (g.specific && sc.ident[d]&(1<<gi) != 0)
			}
			lx.pool = append(lx.pool, poolEntry{doc: d, score: float64(sc.score[d]), specific: specific, matched: ix.matched(groups, sc, d)})
		}
	}

	floor := sc.score[cands[0]] * ix.p.relativeFloor
	for i, d := range cands {
		if sc.score[d] < floor {
			cands = cands[:i]
			break
		}
	}
	picked := ix.diversify(groups, cands, limit, sc)
	if gr = ix.accept(groups, picked, sc); !gr.ok {
		if !ix.p.headClause || !ix.acceptHead(query, groups, picked, sc) {
			return nil, gr
		}
		gr.ok = true
	}
	hits := make([]Hit, len(picked))
	for i, d := range picked {
		hits[i] = Hit{Name: ix.names[d], Doc: int(d), Score: float64(sc.score[d]), Matched: ix.matched(groups, sc, d)}
	}
	return hits, gr
}

// matched returns the query words that tool d matches, in query order.
func (ix *Index) matched(groups []group, sc *scratch, d int32) []string {
	var out []string
	for gi, g := range groups {
		if sc.any[d]&(1<<gi) != 0 {
			out = append(out, g.word)
		}
	}
	return out
}

// accumulate scores every tool that matches a group: per group, the best of
// its variants (so a word and its synonym are not counted twice), summed
// over groups; and records which groups each tool matches, in identifiers
// and anywhere.
func (ix *Index) accumulate(groups []group, sc *scratch) {
	q := sc.next()
	sc.touched = sc.touched[:0]
	for gi, g := range groups {
		gs := sc.next()
		bit := uint32(1) << gi
		for _, v := range g.variants {
			for _, p := range ix.postings[v.term] {
				d := p.doc
				if sc.seen[d] != q {
					sc.seen[d] = q
					sc.score[d], sc.ident[d], sc.any[d], sc.nameHit[d] = 0, 0, 0, 0
					sc.touched = append(sc.touched, d)
				}
				val := v.w * g.idf * p.sat
				if sc.gseen[d] != gs {
					sc.gseen[d] = gs
					sc.cur[d], sc.curName[d] = val, 0
					sc.glist = append(sc.glist, d)
				} else if val > sc.cur[d] {
					sc.cur[d] = val
				}
				if v.assoc {
					// A learned link scores but is not a match: it
					// neither makes a candidate nor counts in the gate.
					continue
				}
				sc.any[d] |= bit
				if p.flags&inIdent != 0 {
					sc.ident[d] |= bit
				}
				if p.flags&inName != 0 && v.w > sc.curName[d] {
					sc.curName[d] = v.w
				}
			}
		}
		for _, d := range sc.glist {
			sc.score[d] += sc.cur[d]
			sc.nameHit[d] += sc.curName[d]
		}
		sc.glist = sc.glist[:0]
	}
	for _, d := range sc.touched {
		sc.score[d] *= ix.nameFactor(sc, d)
	}
}

// nameFactor is 1 plus nameBoost times the share of d's name that the query
// matched.
func (ix *Index) nameFactor(sc *scratch, d int32) float32 {
	if ix.nameLen[d] == 0 {
		return 1
	}
	return 1 + ix.p.nameBoost*min(1, sc.nameHit[d]/ix.nameLen[d])
}

// better orders tools by score, then name, then position.
func (ix *Index) better(sc *scratch, a, b int32) bool {
	if sc.score[a] != sc.score[b] {
		return sc.score[a] > sc.score[b]
	}
	if ix.names[a] != ix.names[b] {
		return ix.names[a] < ix.names[b]
	}
	return a < b
}

// topCandidates returns the best candidatePool tools that match at least one
// group in their identifiers, or at least descMatchMin groups in their
// descriptions, best first. A single description word is the "best bad
// guess" the gate of ADR 0004 exists to avoid, and a shortlist still passes
// the gate only on identifier matches (accept).
func (ix *Index) topCandidates(sc *scratch) []int32 {
	h := sc.heap[:0]
	for _, d := range sc.touched {
		if sc.ident[d] == 0 && (ix.p.descMatchMin == 0 || bits.OnesCount32(sc.any[d]) < ix.p.descMatchMin) {
			continue
		}
		if len(h) < ix.p.candidatePool {
			h = append(h, d)
			// Sift up: h is a heap with the worst candidate at the root.
			for i := len(h) - 1; i > 0; {
				parent := (i - 1) / 2
				if !ix.better(sc, h[parent], h[i]) {
					break
				}
				h[parent], h[i] = h[i], h[parent]
				i = parent
			}
			continue
		}
		if !ix.better(sc, d, h[0]) {
			continue
		}
		h[0] = d
		for i := 0; ; {
			worst, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && ix.better(sc, h[worst], h[l]) {
				worst = l
			}
			if r < len(h) && ix.better(sc, h[worst], h[r]) {
				worst = r
			}
			if worst == i {
				break
			}
			h[i], h[worst] = h[worst], h[i]
			i = worst
		}
	}
	sc.heap = h
	out := append(sc.cands[:0], h...)
	slices.SortFunc(out, func(a, b int32) int {
		if ix.better(sc, a, b) {
			return -1
		}
		return 1
	})
	sc.cands = out
	return out
}

// contribution returns what group g adds to tool d's score.
func (ix *Index) contribution(g group, d int32) float32 {
	var best float32
	for _, v := range g.variants {
		ps := ix.postings[v.term]
		i := sort.Search(len(ps), func(i int) bool { return ps[i].doc >= d })
		if i < len(ps) && ps[i].doc == d {
			if val := v.w * g.idf * ps[i].sat; val > best {
				best = val
			}
		}
	}
	return best
}

// diversify picks up to limit tools from cands greedily: each next tool is
// the one with the best score after discounting the words that tools already
// picked match in their identifiers. The first pick is always the best tool.
func (ix *Index) diversify(groups []group, cands []int32, limit int, sc *scratch) []int32 {
	if len(cands) <= 1 || limit == 1 {
		return append([]int32(nil), cands[:min(limit, len(cands))]...)
	}
	contrib := sc.contrib[:0]
	for _, d := range cands {
		f := ix.nameFactor(sc, d)
		for _, g := range groups {
			contrib = append(contrib, f*ix.contribution(g, d))
		}
	}
	sc.contrib = contrib
	var covered uint32
	taken := make([]bool, len(cands))
	picked := make([]int32, 0, limit)
	for len(picked) < limit && len(picked) < len(cands) {
		best, bestAdj := -1, float32(0)
		for i, d := range cands {
			if taken[i] {
				continue
			}
			var adj float32
			for gi := range groups {
				c := contrib[i*len(groups)+gi]
				if covered&(1<<gi) != 0 {
					c *= 1 - ix.p.coveredDiscount
				}
				adj += c
			}
			if best < 0 || adj > bestAdj || (adj == bestAdj && ix.better(sc, d, cands[best])) {
				best, bestAdj = i, adj
			}
		}
		taken[best] = true
		picked = append(picked, cands[best])
		covered |= sc.ident[cands[best]]
	}
	return picked
}

// acceptHead runs the gate on the first clause of query alone
// (params.headClause): the groups outside it weigh nothing.
func (ix *Index) acceptHead(query string, groups []group, picked []int32, sc *scratch) bool {
	end := headClauseEnd(query)
	if end <= 0 {
		return false
	}
	inHead := map[string]bool{}
	for _, g := range ix.parse(query[:end]) {
		inHead[g.word] = true
	}
	if len(inHead) < 2 {
		return false
	}
	head := make([]group, len(groups)) // same positions as groups, for the match bits
	n := 0
	for gi, g := range groups {
		if inHead[g.word] {
			head[gi] = g
			n++
		} else {
			head[gi] = group{word: g.word}
		}
	}
	return n < len(groups) && ix.accept(head, picked, sc).ok
}

// headClauseEnd returns where the first clause of a request ends: at the
// first comma, colon or semicolon followed by a space (not "6:30" or
// "1,200"), opening parenthesis, or dash between words; or -1.
func headClauseEnd(q string) int {
	for i, r := range q {
		switch r {
		case ',', ':', ';':
			if i+1 < len(q) && q[i+1] == ' ' {
				return i
			}
		case '(', '—', '–':
			return i
		case '-':
			if i > 0 && q[i-1] == ' ' && i+1 < len(q) && q[i+1] == ' ' {
				return i
			}
		}
	}
	return -1
}

// accept is the no-route gate on a shortlist: together the picked tools must
// match a specific word in their identifiers and explain at least
// minCoverage of the query's weight, and on a longer query one of them must
// match two of its words (params.coherentWords).
func (ix *Index) accept(groups []group, picked []int32, sc *scratch) gateResult {
	var ident, any uint32
	for _, d := range picked {
		ident |= sc.ident[d]
		any |= sc.any[d]
	}
	var total, covered float64
	specific := false
	for gi, g := range groups {
		total += g.weight
		switch {
		case ident&(1<<gi) != 0:
			covered += g.weight
			specific = specific || g.specific
		case any&(1<<gi) != 0:
			covered += g.weight * ix.p.descriptionShare
		}
	}
	gr := gateResult{specific: specific}
	if total > 0 {
		gr.coverage = covered / total
	}
	gr.ok = specific && (ix.minCoverage < 0 || gr.coverage >= ix.minCoverage)
	if gr.ok && ix.minCoverage >= 0 && ix.p.coherentWords > 0 {
		// Only groups that weigh count (acceptHead zeroes the others).
		var mask uint32
		for gi, g := range groups {
			if g.weight > 0 {
				mask |= 1 << gi
			}
		}
		if bits.OnesCount32(mask) >= ix.p.coherentWords {
			gr.ok = slices.ContainsFunc(picked, func(d int32) bool { return bits.OnesCount32(sc.any[d]&mask) >= 2 })
		}
	}
	return gr
}
