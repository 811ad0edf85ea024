package search

import (
	"cmp"
	"math"
	"slices"
)

// Fields of a tool, in the order of params.fieldWeight and params.fieldB.
const (
	fieldName     = iota // tool name, split into words
	fieldTitle           // declared title
	fieldProp            // input-schema property names, split into words
	fieldDesc            // declared description
	fieldPropDesc        // schema descriptions, titles and enum values
	numFields
)

// New builds the index of docs. Docs keep their positions (Hit.Doc); they
// need not be sorted, and a duplicate name is indexed as a separate tool.
func New(docs []Doc, opts Options) *Index {
	return build(docs, opts, defaultParams)
}

func build(docs []Doc, opts Options, p params) *Index {
	ix := newIndex(len(docs), opts, p)
	per, totalLen := ix.countTerms(docs)
	ix.weigh(per, totalLen)
	if p.assocWeight > 0 {
		ix.assocFrom(per)
	}
	size := len(docs)
	ix.scratch.New = func() any { return newScratch(size) }
	return ix
}

// newIndex is an empty index for n docs with opts' settings and synonyms.
func newIndex(n int, opts Options, p params) *Index {
	ix := &Index{
		p:           p,
		names:       make([]string, n),
		shortlist:   opts.Shortlist,
		minCoverage: opts.MinCoverage,
		minScore:    opts.MinScore,
		terms:       map[string]int32{},
	}
	if ix.shortlist <= 0 {
		ix.shortlist = DefaultShortlist
	}
	ix.minCoverage = cmp.Or(ix.minCoverage, DefaultMinCoverage)
	if len(opts.Synonyms) > 0 {
		// Built-in synonyms first, then the catalog's own, merged once
		// here so that a query looks a word up in one map.
		ix.synonyms = map[string][]string{}
		for _, g := range opts.Synonyms {
			terms := synonymTerms(g)
			for _, t := range terms {
				if _, ok := ix.synonyms[t]; !ok {
					ix.synonyms[t] = slices.Clone(synonyms[t])
				}
			}
			addSynonymGroup(ix.synonyms, terms)
		}
	}
	return ix
}

// docTerms are one doc's term frequencies per field and its field lengths.
type docTerms struct {
	tf  map[int32]*[numFields]float32
	len [numFields]float64
}

// countTerms is pass 1: it assigns term ids and counts term frequencies per
// field, field lengths and document frequencies.
func (ix *Index) countTerms(docs []Doc) (per []docTerms, totalLen [numFields]float64) {
	per = make([]docTerms, len(docs))
	for i, d := range docs {
		ix.names[i] = d.Name
		dt := docTerms{tf: map[int32]*[numFields]float32{}}
		add := func(f int) func(string) {
			return func(term string) {
				id, ok := ix.terms[term]
				if !ok {
					id = int32(len(ix.df))
					ix.terms[term] = id
					ix.df = append(ix.df, 0)
				}
				c := dt.tf[id]
				if c == nil {
					c = new([numFields]float32)
					dt.tf[id] = c
				}
				c[f]++
				dt.len[f]++
			}
		}
		for _, w := range identifierWords(d.Name) {
			indexTerms(w, add(fieldName))
		}
		indexTerms(d.Title, add(fieldTitle))
		indexTerms(d.Description, add(fieldDesc))
		st := readSchema(d.InputSchema)
		for _, name := range st.names {
			for _, w := range identifierWords(name) {
				indexTerms(w, add(fieldProp))
			}
		}
		for _, t := range st.texts {
			indexTerms(t, add(fieldPropDesc))
		}
		for id := range dt.tf {
			ix.df[id]++
		}
		for f := range numFields {
			totalLen[f] += dt.len[f]
		}
		per[i] = dt
	}
	return per, totalLen
}

// weigh is pass 2: IDF and postings, in doc order so each list is sorted
// by doc.
func (ix *Index) weigh(per []docTerms, totalLen [numFields]float64) {
	p := &ix.p
	n := float64(len(per))
	ix.idf = make([]float32, len(ix.df))
	for id, df := range ix.df {
		ix.idf[id] = float32(idf(n, float64(df)))
	}
	// Words in more than 1% of the tools count less towards coverage; all
	// rarer words, and words the catalog never uses, count the same.
	ix.capIDF = idf(n, max(1, n*p.capDFShare))
	ix.nameLen = make([]float32, len(per))

	var avgLen [numFields]float64
	for f := range numFields {
		if n > 0 {
			avgLen[f] = totalLen[f] / n
		}
	}
	ix.postings = make([][]posting, len(ix.df))
	for id, df := range ix.df {
		ix.postings[id] = make([]posting, 0, df)
	}
	for i, dt := range per {
		for id, tf := range dt.tf {
			ix.postings[id] = append(ix.postings[id], ix.posting(i, dt, tf, avgLen))
		}
	}
	// Map iteration above is unordered; postings must be sorted by doc,
	// which they are because the outer loop runs in doc order.
}

// posting is doc i's posting for a term with frequencies tf; it counts the
// doc's name terms.
func (ix *Index) posting(i int, dt docTerms, tf *[numFields]float32, avgLen [numFields]float64) posting {
	p := &ix.p
	var w float64
	for f := range numFields {
		if tf[f] == 0 {
			continue
		}
		norm := 1.0
		if avgLen[f] > 0 {
			norm = 1 - p.fieldB[f] + p.fieldB[f]*dt.len[f]/avgLen[f]
		}
		w += p.fieldWeight[f] * float64(tf[f]) / norm
	}
	post := posting{doc: int32(i), sat: float32(w * (p.k1 + 1) / (p.k1 + w))}
	if tf[fieldName] > 0 || tf[fieldTitle] > 0 || tf[fieldProp] > 0 {
		post.flags |= inIdent
	}
	if tf[fieldName] > 0 {
		post.flags |= inName
		ix.nameLen[i]++
	}
	return post
}

// assocFrom builds the term associations from each doc's terms and name
// terms.
func (ix *Index) assocFrom(per []docTerms) {
	all := make([][]int32, len(per))
	names := make([][]int32, len(per))
	for i, dt := range per {
		for id, tf := range dt.tf {
			all[i] = append(all[i], id)
			if tf[fieldName] > 0 {
				names[i] = append(names[i], id)
			}
		}
	}
	ix.buildAssoc(all, names)
}

// idf is the BM25 inverse document frequency, always positive.
func idf(n, df float64) float64 {
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}
