package search

import (
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// fusionDocs is a small catalog for the fusion tests.
var fusionDocs = []Doc{
	{Name: "cache_purge", Description: "Drop every cached entry of a CDN zone."},
	{Name: "cache_stats", Description: "Hit ratio and size of the CDN cache."},
	{Name: "cache_warm", Description: "Load pages into the cache before a launch."},
	{Name: "user_delete", Description: "Delete a user account."},
	{Name: "invoice_send", Description: "Email an invoice to a customer."},
}

func simOf(m map[string]float64, ix *Index) func(int) (float64, bool) {
	return func(doc int) (float64, bool) {
		s, ok := m[ix.names[doc]]
		return s, ok
	}
}

// TestFuseArithmetic checks the reciprocal-rank fusion scores on a pool
// whose lexical and semantic orders are opposite.
func TestFuseArithmetic(t *testing.T) {
	ix := New(fusionDocs, Options{})
	lx := &Lexical{ix: ix, limit: 5, Hits: []Hit{{Name: "x"}}, pool: []poolEntry{{doc: 0}, {doc: 1}, {doc: 2}, {doc: 3}}}
	sims := map[string]float64{"cache_purge": 0.1, "cache_stats": 0.5, "cache_warm": 0.9} // user_delete: no vector
	hits := lx.Fuse(simOf(sims, ix), FuseOptions{})
	want := []struct {
		name  string
		score float64
	}{
		// purge: lexical 1, semantic 3; warm: lexical 3, semantic 1: a
		// tie, kept in lexical order. stats: 2 and 2. user_delete: lexical
		// 4 only.
		{"cache_purge", 1.0/61 + 1.0/63},
		{"cache_warm", 1.0/63 + 1.0/61},
		{"cache_stats", 1.0/62 + 1.0/62},
		{"user_delete", 1.0 / 64},
	}
	if len(hits) != len(want) {
		t.Fatalf("got %d hits, want %d", len(hits), len(want))
	}
	for i, w := range want {
		if hits[i].Name != w.name || math.Abs(hits[i].Score-w.score) > 1e-12 {
			t.Errorf("hit %d = %s %.6f, want %s %.6f", i, hits[i].Name, hits[i].Score, w.name, w.score)
		}
	}
	// k changes the arithmetic.
	hits = lx.Fuse(simOf(sims, ix), FuseOptions{K: 1})
	if hits[0].Name != "cache_purge" || math.Abs(hits[0].Score-(1.0/2+1.0/4)) > 1e-12 {
		t.Errorf("k=1: first hit %s %.6f, want cache_purge %.6f", hits[0].Name, hits[0].Score, 1.0/2+1.0/4)
	}
	// The limit bounds the shortlist.
	lx.limit = 2
	if n := len(lx.Fuse(simOf(sims, ix), FuseOptions{})); n != 2 {
		t.Errorf("limit 2: %d hits", n)
	}
}

// TestRankMatchesSearch: the lexical outcome kept for fusion is Search's
// answer, for served and rejected requests alike.
func TestRankMatchesSearch(t *testing.T) {
	ix := New(fusionDocs, Options{})
	for _, q := range []string{"purge the cache", "cache", "delete a user", "book a flight to Rome", "send invoice 42", ""} {
		got, want := ix.Rank(q, 0).Hits, ix.Search(q, 0)
		if !slices.Equal(hitNames(got), hitNames(want)) {
			t.Errorf("Rank(%q).Hits = %v, Search = %v", q, hitNames(got), hitNames(want))
		}
	}
}

// TestFuseReorders: a served request's shortlist is re-ordered by the
// similarity, among lexical candidates only.
func TestFuseReorders(t *testing.T) {
	ix := New(fusionDocs, Options{})
	lx := ix.Rank("cache before launch", 0)
	if !lx.Accepted() {
		t.Fatal("lexical gate rejected the request; the test needs a served one")
	}
	// Similarity favours cache_stats and also, strongly, invoice_send,
	// which no query word matches.
	sims := map[string]float64{"cache_stats": 0.99, "invoice_send": 1, "cache_warm": 0.2, "cache_purge": 0.1}
	fused := lx.Fuse(simOf(sims, ix), FuseOptions{})
	names := hitNames(fused)
	if slices.Contains(names, "invoice_send") {
		t.Fatalf("fused shortlist %v admits a tool without lexical evidence", names)
	}
	// Lexical order warm, purge, stats; similarity stats > warm > purge.
	// warm: 1/61+1/62; stats: 1/63+1/61; purge: 1/62+1/63.
	if lex := hitNames(lx.Hits); !slices.Equal(lex, []string{"cache_warm", "cache_purge", "cache_stats"}) {
		t.Fatalf("lexical shortlist %v changed; update the test", lex)
	}
	if want := []string{"cache_warm", "cache_stats", "cache_purge"}; !slices.Equal(names, want) {
		t.Fatalf("fused shortlist %v, want %v", names, want)
	}
}

// TestFuseGate: a request no tool serves stays rejected even when its
// embedding is identical to a tool's; MinSimilarity rescues only candidates
// with a specific word in their identifiers and enough similarity.
func TestFuseGate(t *testing.T) {
	// Seven cache tools: "cache" is not a specific word here (more than
	// minSpecificDF tools have it).
	docs := append(slices.Clone(fusionDocs),
		Doc{Name: "cache_get"}, Doc{Name: "cache_list"}, Doc{Name: "cache_keys"}, Doc{Name: "cache_flush"})
	ix := New(docs, Options{})
	all := func(int) (float64, bool) { return 1, true }
	for _, tc := range []struct {
		name, query string
		opts        FuseOptions
		want        []string
	}{
		{"unsupported, gate lexical", "book a flight to Rome", FuseOptions{}, nil},
		{"unsupported, rescue on", "book a flight to Rome", FuseOptions{MinSimilarity: 0.1}, nil},
		{"weak lexical, gate lexical", "purge my grandmother's recipes for apple pie tonight", FuseOptions{}, nil},
		{"weak lexical, rescue on", "purge my grandmother's recipes for apple pie tonight", FuseOptions{MinSimilarity: 0.5}, []string{"cache_flush", "cache_purge", "user_delete"}}, // purge: flush and delete are its synonyms
		// "cache" is in most tools' names: not specific, so no rescue.
		{"generic word, rescue on", "cache of my grandmother's recipes for apple pie tonight", FuseOptions{MinSimilarity: 0.5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lx := ix.Rank(tc.query, 0)
			if lx.Accepted() {
				t.Fatalf("lexical gate served %q: %v; the test needs a rejected request", tc.query, hitNames(lx.Hits))
			}
			got := hitNames(lx.Fuse(all, tc.opts))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Fuse = %v, want %v", got, tc.want)
			}
		})
	}
	// Below the threshold nothing is rescued.
	lx := ix.Rank("purge my grandmother's recipes for apple pie tonight", 0)
	low := func(int) (float64, bool) { return 0.4, true }
	if got := lx.Fuse(low, FuseOptions{MinSimilarity: 0.5}); len(got) != 0 {
		t.Fatalf("rescued below MinSimilarity: %v", hitNames(got))
	}
}

func TestDocText(t *testing.T) {
	d := Doc{Name: "hr_employeeGet", Title: "Get employee", Description: " Look one up. ", InputSchema: []byte(`{"type":"object","properties":{"employeeId":{"type":"string","description":"Badge number"}}}`)}
	want := "hr employee get\nGet employee\nLook one up.\nemployee id\nBadge number"
	if got := DocText(d); got != want {
		t.Fatalf("DocText = %q, want %q", got, want)
	}
}

func TestDocTextBounded(t *testing.T) {
	long := strings.Repeat("é", MaxDocText)                 // two bytes each
	got := DocText(Doc{Name: "x", Description: "a" + long}) // the cut falls inside a character
	if len(got) > MaxDocText || !utf8.ValidString(got) || !strings.HasPrefix(got, "x\naé") {
		t.Fatalf("DocText of a long description: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}
