package search

// params are the ranking and gate knobs. They are fixed (defaultParams);
// they are a struct rather than constants so the evaluation can measure
// alternatives on the dev split. docs/decisions/0004-tool-search-ranking.md
// records how the values were chosen.
type params struct {
	// BM25F: per-field weights and length normalisation, and saturation.
	// Identifiers weigh most: a word in a tool's name is strong evidence, a
	// word in a parameter's description is weak evidence.
	fieldWeight [numFields]float64
	fieldB      [numFields]float64
	k1          float64

	// synonymWeight is how much a synonym counts against the word itself.
	synonymWeight float32
	// nameBoost scales a tool's score by up to 1+nameBoost according to the
	// share of its name the query matches, which is what separates
	// near-duplicates such as hr_employee_get and hr_employees_list.
	nameBoost float32

	// candidatePool is how many of the best-scoring tools the shortlist is
	// chosen from; relativeFloor drops tools scoring below this share of
	// the best one.
	candidatePool int
	relativeFloor float32
	// coveredDiscount is how much of a word's contribution a tool loses once
	// a tool already on the shortlist matched that word in its identifiers:
	// a request for two things should get both, not five variants of one.
	coveredDiscount float32

	// Gate. descriptionShare is how much a word matched only in
	// descriptions counts towards coverage, against one matched in
	// identifiers; upperOOVShare is the weight of an unknown capitalised
	// word that does not start a sentence (probably a value, such as a name
	// or a place, but maybe the very thing no tool does), against an
	// unknown word; a word in at most specificDFShare of the tools is
	// specific, and a shortlist must match a specific word in its
	// identifiers; words in more than capDFShare of the tools count less
	// towards coverage, all rarer and unknown words count the same.
	descriptionShare float64
	upperOOVShare    float64
	specificDFShare  float64
	capDFShare       float64

	// Learned associations (assoc.go). A query word also scores, weakly,
	// on the tools whose names contain a term that the catalog itself
	// uses together with that word: for a word w and a name term n, the
	// strength is the share of the tools using w (anywhere) that have n in
	// their names. Links weaker than assocMin are dropped, at most assocTop
	// are kept per word, and name terms in more than assocMaxDF of the
	// tools (generic verbs such as "get") are never targets. A link scores
	// assocWeight × strength of the word itself; it never counts as a match
	// (neither for the gate nor for Hit.Matched), so it can reorder
	// candidates but not make one. Zero assocWeight turns it off.
	assocWeight float32
	assocMin    float64
	assocTop    int
	assocMaxDF  float64

	// descMatchMin lets a tool that matches at least this many query words,
	// all of them only in its description, be a candidate too ("stop new
	// jobs from going to a build machine" and a runner that "takes no new
	// jobs"). One word in a description is too weak to shortlist on; and
	// the gate still needs an identifier match from the shortlist. Zero
	// turns it off.
	descMatchMin int

	// coherentWords: a query of at least this many meaningful words is
	// accepted only if one shortlisted tool matches two of them (anywhere
	// in its declared text). A request whose words each hit a different,
	// unrelated tool ("reserve a table at an Italian restaurant": a data
	// table here, a room booking there) is not served by any of them. Zero
	// turns it off.
	coherentWords int

	// headClause: when a whole request falls short of the gate, its first
	// clause (up to the first comma, colon, semicolon, parenthesis or
	// dash) is tried alone, if it has two meaningful words or more.
	// Requests tend to say what they want first and then go on with
	// details and values ("revoke API key ak_live_72 now, it leaked in a
	// public GitHub repo"), which would otherwise count against coverage.
	headClause bool
}

var defaultParams = params{
	fieldWeight:      [numFields]float64{3.0, 2.0, 1.2, 1.0, 0.4},
	fieldB:           [numFields]float64{0.5, 0.5, 0.5, 0.75, 0.75},
	k1:               1.2,
	synonymWeight:    0.6,
	nameBoost:        0.5,
	candidatePool:    48,
	relativeFloor:    0.2,
	coveredDiscount:  0.5,
	descriptionShare: 0.5,
	upperOOVShare:    0.5,
	specificDFShare:  0.05,
	capDFShare:       0.01,
	assocWeight:      0.3,
	assocMin:         0.5,
	assocTop:         3,
	assocMaxDF:       0.05,
	descMatchMin:     2,
	coherentWords:    3,
	headClause:       true,
}
