package search

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

var (
	evalShow    = flag.String("eval.show", "dev", "which split's misses TestEvalReport lists: dev, test, all or none")
	evalTargets = flag.Bool("eval.targets", false, "fail TestEvalReport when the SPEC §8 targets are not met, not only below the regression floors")
)

// The SPEC §8 targets, and the regression floors TestEvalReport always
// enforces. The floors sit just under the figures measured when the ranking
// was frozen (docs/decisions/0004-tool-search-ranking.md): the targets are
// not met yet, and a change that makes things worse must not go unnoticed.
const (
	targetRecall    = 0.95
	targetRejection = 0.9
	floorRecall     = 0.89
	floorRejection  = 0.87
	floorSingle     = 0.98 // recall on single-tool queries
)

// evalQuery is one labelled request of testdata/search/queries.json.
type evalQuery struct {
	ID    string   `json:"id"`
	Kind  string   `json:"kind"`  // single, multi, paraphrase, unsupported
	Split string   `json:"split"` // dev (tuned on) or test (held out)
	Query string   `json:"query"`
	Want  []string `json:"want"` // every one must be on the shortlist; none for unsupported
}

func loadEvalQueries(t testing.TB) []evalQuery {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(evalDir, "queries.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Queries []evalQuery `json:"queries"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode queries: %v", err)
	}
	return m.Queries
}

// TestEvalQueries checks the labelled set itself: its size and mix, that
// every label names a catalog tool, and that paraphrased queries really
// share no word with the name of the tool they want.
func TestEvalQueries(t *testing.T) {
	docs := loadEvalCatalog(t)
	qs := loadEvalQueries(t)
	names := map[string]bool{}
	for _, d := range docs {
		names[d.Name] = true
	}
	if len(docs) < 2000 {
		t.Errorf("catalog has %d tools, want at least 2000", len(docs))
	}
	kinds := map[string]int{}
	splits := map[string]int{}
	ids := map[string]bool{}
	for _, q := range qs {
		kinds[q.Kind]++
		splits[q.Split]++
		if ids[q.ID] {
			t.Errorf("duplicate query id %s", q.ID)
		}
		ids[q.ID] = true
		wantN := map[string]int{"single": 1, "paraphrase": 1, "multi": 2, "unsupported": 0}
		n, ok := wantN[q.Kind]
		if !ok {
			t.Errorf("%s: unknown kind %q", q.ID, q.Kind)
		} else if len(q.Want) != n {
			t.Errorf("%s: %s query wants %d tools, want %d", q.ID, q.Kind, len(q.Want), n)
		}
		if q.Split != "dev" && q.Split != "test" {
			t.Errorf("%s: split %q", q.ID, q.Split)
		}
		for _, w := range q.Want {
			if !names[w] {
				t.Errorf("%s: wants %q, which is not in the catalog", q.ID, w)
			}
		}
		if q.Kind == "paraphrase" {
			nameTerms := map[string]bool{}
			for _, w := range identifierWords(q.Want[0]) {
				nameTerms[normalize(w)] = true
			}
			splitWords(q.Query, func(w word) {
				if nameTerms[normalize(w.text)] {
					t.Errorf("%s: paraphrase %q uses %q from the tool name %s", q.ID, q.Query, w.text, q.Want[0])
				}
			})
		}
	}
	if len(qs) < 200 || kinds["unsupported"] < 40 {
		t.Errorf("%d queries with %d unsupported, want at least 200 and 40", len(qs), kinds["unsupported"])
	}
	for _, k := range []string{"single", "multi", "paraphrase"} {
		if kinds[k] < 20 {
			t.Errorf("only %d %s queries", kinds[k], k)
		}
	}
	if splits["dev"] == 0 || splits["test"] == 0 {
		t.Errorf("splits: %v", splits)
	}
}

// evalStats accumulates the quality figures of one slice of the query set.
type evalStats struct {
	queries, supported, unsupported int
	required, found                 int // required tools, and how many made the shortlist
	allFound                        int // supported queries with every required tool shortlisted
	rejected                        int // unsupported queries with an empty shortlist
	shortlisted                     int // tools returned over supported queries
}

func (s *evalStats) add(q evalQuery, hits []Hit) (ok bool) {
	s.queries++
	if q.Kind == "unsupported" {
		s.unsupported++
		if len(hits) == 0 {
			s.rejected++
			return true
		}
		return false
	}
	s.supported++
	s.shortlisted += len(hits)
	ok = true
	for _, w := range q.Want {
		s.required++
		if slices.ContainsFunc(hits, func(h Hit) bool { return h.Name == w }) {
			s.found++
		} else {
			ok = false
		}
	}
	if ok {
		s.allFound++
	}
	return ok
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (s *evalStats) recall() float64    { return ratio(s.found, s.required) }
func (s *evalStats) rejection() float64 { return ratio(s.rejected, s.unsupported) }

func (s *evalStats) String() string {
	return fmt.Sprintf("queries %3d | required-tool recall@5 %.3f (%d/%d) | queries fully served %.3f (%d/%d) | rejection %.3f (%d/%d) | mean shortlist %.2f",
		s.queries, s.recall(), s.found, s.required, ratio(s.allFound, s.supported), s.allFound, s.supported,
		s.rejection(), s.rejected, s.unsupported, ratio(s.shortlisted, s.supported))
}

// TestEvalReport runs the labelled queries against the evaluation catalog
// and prints the figures of SPEC §8: catalog size, shortlist size, recall of
// the required tools at 5, rejection of unsupported requests and routing
// latency. It fails below the targets (recall@5 ≥ 0.95 on supported
// queries, rejection ≥ 0.9 on unsupported ones). Latency is reported, never
// asserted.
func TestEvalReport(t *testing.T) {
	docs := loadEvalCatalog(t)
	qs := loadEvalQueries(t)
	start := time.Now()
	ix := New(docs, Options{})
	build := time.Since(start)

	bySplit := map[string]*evalStats{"dev": {}, "test": {}, "all": {}}
	byKind := map[string]*evalStats{}
	var misses []string
	for _, q := range qs {
		hits := ix.Search(q.Query, 0)
		key := q.Split + " " + q.Kind
		if byKind[key] == nil {
			byKind[key] = &evalStats{}
		}
		byKind[key].add(q, hits)
		bySplit["all"].add(q, hits)
		if !bySplit[q.Split].add(q, hits) && (*evalShow == "all" || *evalShow == q.Split) {
			var got []string
			for _, h := range hits {
				got = append(got, fmt.Sprintf("%s(%.2f %v)", h.Name, h.Score, h.Matched))
			}
			misses = append(misses, fmt.Sprintf("  %s %-11s %q want %v got %v", q.ID, q.Kind, q.Query, q.Want, got))
		}
	}

	t.Logf("catalog: %d tools (testdata/search/catalog.json), index built in %v", ix.Len(), build.Round(time.Millisecond))
	t.Logf("shortlist size: at most %d", ix.Shortlist())
	for _, s := range []string{"dev", "test", "all"} {
		t.Logf("%-5s %v", s, bySplit[s])
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("  %-16s %v", k, byKind[k])
	}
	p50, p99 := queryLatency(ix, qs, 20)
	t.Logf("latency, %d tools, search only, %d queries x 20: p50 %v p99 %v", ix.Len(), len(qs), p50, p99)
	big := New(generateCatalog(len(evalRegions))[:10000], Options{})
	p50, p99 = queryLatency(big, qs, 20)
	t.Logf("latency, %d tools, search only, %d queries x 20: p50 %v p99 %v", big.Len(), len(qs), p50, p99)
	if len(misses) > 0 {
		t.Logf("misses (%s split):\n%s", *evalShow, strings.Join(misses, "\n"))
	}

	all := bySplit["all"]
	single := evalStats{}
	for k, st := range byKind {
		if strings.HasSuffix(k, " single") {
			single.found += st.found
			single.required += st.required
		}
	}
	for _, c := range []struct {
		name          string
		got           float64
		target, floor float64
	}{
		{"required-tool recall@5 (supported queries)", all.recall(), targetRecall, floorRecall},
		{"unsupported rejection", all.rejection(), targetRejection, floorRejection},
		{"required-tool recall@5 (single-tool queries)", single.recall(), targetRecall, floorSingle},
	} {
		verdict := "target met"
		if c.got < c.target {
			verdict = "TARGET NOT MET"
			if *evalTargets {
				t.Errorf("%s = %.3f, target %.2f", c.name, c.got, c.target)
			}
		}
		t.Logf("%s = %.3f: %s (target %.2f, floor %.2f)", c.name, c.got, verdict, c.target, c.floor)
		if c.got < c.floor {
			t.Errorf("%s = %.3f, below the regression floor %.2f", c.name, c.got, c.floor)
		}
	}
}

// queryLatency times every query `rounds` times, one Search call per
// measurement, and returns the median and the 99th percentile.
func queryLatency(ix *Index, qs []evalQuery, rounds int) (p50, p99 time.Duration) {
	var ds []time.Duration
	for range rounds {
		for _, q := range qs {
			start := time.Now()
			ix.Search(q.Query, 0)
			ds = append(ds, time.Since(start))
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}
