package search

// scratch is the per-query working memory of a search, pooled per Index so
// a query allocates almost nothing. Dense per-tool arrays are invalidated by
// stamps instead of being cleared.
type scratch struct {
	stamp   uint32
	seen    []uint32 // query stamp per tool: score/ident/any are valid
	gseen   []uint32 // group stamp per tool: cur is valid
	score   []float32
	cur     []float32 // best variant of the current group
	curName []float32 // best variant weight of the current group in the name
	nameHit []float32 // name terms matched, weighted by variant
	ident   []uint32  // groups matched in identifiers
	any     []uint32  // groups matched anywhere
	touched []int32   // tools with a valid score
	glist   []int32   // tools touched by the current group
	heap    []int32
	cands   []int32
	contrib []float32
}

func newScratch(n int) *scratch {
	return &scratch{
		seen:    make([]uint32, n),
		gseen:   make([]uint32, n),
		score:   make([]float32, n),
		cur:     make([]float32, n),
		curName: make([]float32, n),
		nameHit: make([]float32, n),
		ident:   make([]uint32, n),
		any:     make([]uint32, n),
	}
}

// next returns a fresh stamp, clearing the stamp arrays when the counter
// wraps so an old stamp can never look current.
func (sc *scratch) next() uint32 {
	sc.stamp++
	if sc.stamp == 0 {
		clear(sc.seen)
		clear(sc.gseen)
		sc.stamp = 1
	}
	return sc.stamp
}
