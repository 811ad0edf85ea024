// Package search ranks the tools of one route for a natural-language request.
// It backs the search mode of large catalogs (ADR 0004): an Index is built
// once per route snapshot from what the Tool Services declared (names,
// titles, descriptions, input-schema property names and descriptions), and
// each search_tools request asks it for a small shortlist.
//
// Ranking is BM25F over five fields with a light stemmer, a small table of
// generic synonyms and phrases, and weak links between words and name terms
// that the index learns from the catalog itself. A conservative gate returns
// no hits at all when the request's meaningful words do not match any tool's
// identifiers (name, title, property names) well enough, because a
// confident-looking wrong shortlist costs a model more than an honest
// "nothing matches".
//
// The package is pure: no I/O, no logging, no global state but read-only
// tables. An Index is immutable and safe for concurrent use.
package search

import (
	"encoding/json"
	"sync"
)

// Doc is one tool as its Tool Service declared it. Only these fields are
// read, and only as declared; nothing about a tool is inferred.
type Doc struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Options tune an Index. The zero value gives the documented defaults.
type Options struct {
	// Shortlist is the largest number of hits a search returns, and the
	// number returned when the caller asks for none in particular.
	// Default 5.
	Shortlist int
	// MinCoverage is the share of the query's weight (IDF of its meaningful
	// words, unknown words counting as rare ones) that the shortlisted tools'
	// identifiers must explain together; below it the search returns nothing.
	// Default 0.5; negative disables this check and the one that asks a
	// query of three or more words to have two of them matched by one tool.
	MinCoverage float64
	// MinScore is the BM25F score the best hit must reach. Default 0 (off).
	MinScore float64
	// Synonyms are the catalog owner's own groups of words that mean the
	// same thing in this catalog ("case ticket incident"), one group per
	// string, words separated by spaces; they extend the built-in lexicon
	// and count as its synonyms do. Check them with ValidateSynonyms: New
	// skips words that are not single words.
	Synonyms []string
}

// Defaults of Options.
const (
	DefaultShortlist   = 5
	DefaultMinCoverage = 0.5
)

// Hit is one shortlisted tool.
type Hit struct {
	// Name is the tool's declared name.
	Name string
	// Doc is the tool's position in the slice given to New.
	Doc int
	// Score is the tool's BM25F score for the query (higher is better).
	// Scores are comparable within one query only.
	Score float64
	// Matched are the query words (lowercased; the canonical word for a
	// phrase) that the tool's declared text matches, in query order.
	Matched []string
}

// Index is the search index of one catalog. It is immutable after New and
// safe for concurrent use; build a new one when the catalog changes.
type Index struct {
	p           params
	names       []string
	shortlist   int
	minCoverage float64
	minScore    float64

	terms    map[string]int32    // index term → term id
	df       []int32             // per term: number of docs that contain it
	idf      []float32           // per term
	postings [][]posting         // per term, sorted by doc
	nameLen  []float32           // per doc: index terms in its name
	capIDF   float64             // coverage weight of a specific or unknown word
	assoc    [][]assocLink       // per term: name terms it goes with
	synonyms map[string][]string // terms in Options.Synonyms → built-in and own synonyms

	scratch sync.Pool // *scratch sized for len(names)
}

// posting is one (term, doc) pair with its precomputed BM25F term weight.
// IDF is applied at query time, per query word, so that a synonym is
// weighed as the word the user typed (BM25 treats a word and its synonyms
// as one term).
type posting struct {
	doc   int32
	sat   float32 // saturated, field-weighted, length-normalised tf
	flags uint8
}

// Posting flags.
const (
	inIdent = 1 << iota // the term is in the doc's name, title or property names
	inName              // the term is in the doc's name
)

// Len returns the number of tools in the index.
func (ix *Index) Len() int { return len(ix.names) }

// Shortlist returns the configured shortlist size.
func (ix *Index) Shortlist() int { return ix.shortlist }
