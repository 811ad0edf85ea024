package search

import (
	"slices"
	"strings"
)

// Semantic re-ranking (docs/decisions/0007-semantic-reranking.md). The
// lexical ranking decides which tools may be shortlisted at all and whether
// the request is served; an embedding model's cosine similarity only
// re-orders those tools, by reciprocal-rank fusion. A similarity alone never
// admits a tool: a tool must be a lexical candidate (a query word in its
// identifiers, or several in its description), and a request the lexical
// gate rejects stays rejected unless FuseOptions.MinSimilarity rescues it,
// which takes a specific query word in the tool's identifiers as well: the
// similarity may stand in for the gate's coverage (a paraphrased request),
// never for its evidence that the catalog has the thing asked for.

// DefaultFusionK is the k of reciprocal-rank fusion: a tool at rank r of a
// ranking scores 1/(k+r). 60 is the value of the original RRF paper
// (Cormack, Clarke and Büttcher, SIGIR 2009); it keeps the top of each
// ranking from drowning the other.
const DefaultFusionK = 60

// FuseOptions tune Lexical.Fuse. The zero value gives the defaults.
type FuseOptions struct {
	// K is the RRF constant (default DefaultFusionK).
	K float64
	// MinSimilarity, when above 0, lets a request that the lexical gate
	// rejected be served by the lexical candidates that match a specific
	// query word (one in few tools, as the gate means it) in their
	// identifiers AND have at least this cosine similarity to the request. It depends on the model, so it has no default: an operator
	// calibrates it with eval-search on labelled requests. 0 keeps the gate
	// purely lexical.
	MinSimilarity float64
}

// Lexical is the lexical outcome of one request, kept so that it can be
// fused with a semantic signal: the answer Search would give, and the pool
// of candidates it was chosen from.
type Lexical struct {
	// Hits is what Search returns for the request (none: rejected).
	Hits  []Hit
	ix    *Index
	limit int
	pool  []poolEntry // candidates by lexical score, best first
}

type poolEntry struct {
	doc      int32
	score    float64
	specific bool // a specific query word is in the tool's identifiers
	matched  []string
}

// Rank is Search, keeping what Fuse needs.
func (ix *Index) Rank(query string, limit int) *Lexical {
	if limit <= 0 || limit > ix.shortlist {
		limit = ix.shortlist
	}
	lx := &Lexical{ix: ix, limit: limit}
	lx.Hits, _ = ix.search(query, limit, lx)
	if len(lx.Hits) > 0 {
		// The shortlist first, in its diversified order, then the rest of
		// the pool by score: this is the lexical ranking that is fused.
		first := make(map[int32]bool, len(lx.Hits))
		order := make([]poolEntry, 0, len(lx.pool))
		for _, h := range lx.Hits {
			first[int32(h.Doc)] = true
			for _, p := range lx.pool {
				if p.doc == int32(h.Doc) {
					order = append(order, p)
					break
				}
			}
		}
		for _, p := range lx.pool {
			if !first[p.doc] {
				order = append(order, p)
			}
		}
		lx.pool = order
	}
	return lx
}

// Candidates is the number of tools a semantic signal could re-order or
// rescue; with none, no embedding is worth computing.
func (lx *Lexical) Candidates() int { return len(lx.pool) }

// WantsSemantic reports whether a similarity could change the answer, so
// that the request is worth embedding: there are candidates to re-order
// (two or more on a served request), or to rescue with minSimilarity.
func (lx *Lexical) WantsSemantic(minSimilarity float64) bool {
	if lx.Accepted() {
		return len(lx.pool) > 1
	}
	return len(lx.pool) > 0 && minSimilarity > 0
}

// Accepted reports whether the lexical gate served the request.
func (lx *Lexical) Accepted() bool { return len(lx.Hits) > 0 }

// Fuse re-ranks the lexical candidates with sim, the cosine similarity of
// the request to tool doc (ok false: the tool has no embedding, and gets no
// semantic share). Each eligible tool scores 1/(k+lexical rank) +
// 1/(k+semantic rank) (ranks from 1, among eligible tools); ties keep the
// lexical order. Eligible are all candidates when the lexical gate accepted
// the request; otherwise, with MinSimilarity set, the candidates with a
// specific query word in their identifiers and a similarity of at least
// MinSimilarity; otherwise none. Hit.Score is the fused score.
func (lx *Lexical) Fuse(sim func(doc int) (float64, bool), o FuseOptions) []Hit {
	k := o.K
	if k <= 0 {
		k = DefaultFusionK
	}
	type cand struct {
		p      poolEntry
		lexPos int
		sim    float64
		has    bool
		fused  float64
	}
	var cs []cand
	for _, p := range lx.pool {
		s, ok := sim(int(p.doc))
		if !lx.Accepted() && (o.MinSimilarity <= 0 || !p.specific || !ok || s < o.MinSimilarity) {
			continue
		}
		cs = append(cs, cand{p: p, lexPos: len(cs), sim: s, has: ok})
	}
	if len(cs) == 0 {
		return nil
	}
	bySim := make([]int, 0, len(cs))
	for i, c := range cs {
		if c.has {
			bySim = append(bySim, i)
		}
	}
	slices.SortStableFunc(bySim, func(a, b int) int {
		switch {
		case cs[a].sim > cs[b].sim:
			return -1
		case cs[a].sim < cs[b].sim:
			return 1
		}
		return 0
	})
	for i := range cs {
		cs[i].fused = 1 / (k + float64(cs[i].lexPos+1))
	}
	for r, i := range bySim {
		cs[i].fused += 1 / (k + float64(r+1))
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		switch {
		case a.fused > b.fused:
			return -1
		case a.fused < b.fused:
			return 1
		}
		return a.lexPos - b.lexPos
	})
	n := min(lx.limit, len(cs))
	hits := make([]Hit, n)
	for i, c := range cs[:n] {
		hits[i] = Hit{Name: lx.ix.names[c.p.doc], Doc: int(c.p.doc), Score: c.fused, Matched: c.p.matched}
	}
	return hits
}

// DocText is what an embedding model reads of a tool: its name as words,
// title, description, and its input schema's property names (as words),
// descriptions, titles and enum values, one per line. Only declared text;
// its hash names the tool's vector, so a tool whose text did not change is
// not embedded again. It is cut at MaxDocText bytes (on a character
// boundary): embedding models read a few hundred tokens, and some services
// refuse a longer input instead of truncating it, which would fail the
// whole batch.
func DocText(d Doc) string {
	var b strings.Builder
	line := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s)
		}
	}
	line(strings.Join(identifierWords(d.Name), " "))
	line(d.Title)
	line(d.Description)
	st := readSchema(d.InputSchema)
	var props []string
	for _, n := range st.names {
		props = append(props, strings.Join(identifierWords(n), " "))
	}
	line(strings.Join(props, ", "))
	for _, t := range st.texts {
		if b.Len() >= MaxDocText {
			break
		}
		line(t)
	}
	out := b.String()
	if len(out) > MaxDocText {
		out = strings.ToValidUTF8(out[:MaxDocText], "")
	}
	return out
}

// MaxDocText bounds DocText, in bytes.
const MaxDocText = 2048
