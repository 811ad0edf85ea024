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
	evalShow    = flag.String("eval.show", "dev,dev2", "which splits' misses TestEvalReport lists: dev, dev2, holdout, comma-separated, or all or none")
	evalTargets = flag.Bool("eval.targets", false, "fail TestEvalReport when the search-mode targets (ADR 0004) are not met, not only below the regression floors")
)

// The ADR 0004 targets, and the regression floors TestEvalReport always
// enforces, per split. The floors sit just under the figures measured when
// the ranking was frozen (docs/decisions/0004-tool-search-ranking.md): the
// targets are not met yet, and a change that makes things worse must not go
// unnoticed.
const (
	targetRecall    = 0.95
	targetRejection = 0.9
)

// evalFloor is what one split must not fall below: recall on supported
// queries, rejection of unsupported ones, recall on single-tool queries.
type evalFloor struct{ recall, rejection, single float64 }

var evalFloors = map[string]evalFloor{
	"dev":     {recall: 0.92, rejection: 0.91, single: 0.98},
	"dev2":    {recall: 0.73, rejection: 0.68, single: 0.94},
	"holdout": {recall: 0.77, rejection: 0.68, single: 0.92},
}

// evalQueryFiles hold the labelled requests: queries.json (split dev) was
// written by the engine's author and tuned on; queries-dev2.json (dev2) was
// written by someone who saw only the catalog, and tuned on after that;
// queries-holdout.json (holdout) too, but never tuned on: its misses are
// not listed unless asked (-eval.show=holdout), and whoever asks burns it. Kind is one of
// single, multi, paraphrase and unsupported.
var evalQueryFiles = []string{"queries.json", "queries-dev2.json", "queries-holdout.json"}

func loadEvalQueries(t testing.TB) []Query {
	t.Helper()
	var qs []Query
	for _, f := range evalQueryFiles {
		raw, err := os.ReadFile(filepath.Join(evalDir, f))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Queries []Query `json:"queries"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("decode %s: %v", f, err)
		}
		qs = append(qs, m.Queries...)
	}
	return qs
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
	kinds := map[string]map[string]int{"dev": {}, "dev2": {}, "holdout": {}}
	ids := map[string]bool{}
	for _, q := range qs {
		if kinds[q.Split] == nil {
			t.Errorf("%s: split %q, want dev, dev2 or holdout", q.ID, q.Split)
			continue
		}
		kinds[q.Split][q.Kind]++
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
	// Each split alone has the size and mix ADR 0004 sets for an evaluation set.
	for split, ks := range kinds {
		n := 0
		for _, c := range ks {
			n += c
		}
		if n < 200 || ks["unsupported"] < 40 {
			t.Errorf("split %s: %d queries with %d unsupported, want at least 200 and 40", split, n, ks["unsupported"])
		}
		for _, k := range []string{"single", "multi", "paraphrase"} {
			if ks[k] < 20 {
				t.Errorf("split %s: only %d %s queries", split, ks[k], k)
			}
		}
	}
}

// TestEvalReport runs the labelled queries against the evaluation catalog
// and prints the figures of ADR 0004: catalog size, shortlist size, recall of
// the required tools at 5, rejection of unsupported requests and routing
// latency, per split. It fails below the regression floors, and with
// -eval.targets below the targets (recall@5 ≥ 0.95 on supported queries,
// rejection ≥ 0.9 on unsupported ones). Latency is reported, never asserted.
func TestEvalReport(t *testing.T) {
	docs := loadEvalCatalog(t)
	qs := loadEvalQueries(t)
	start := time.Now()
	ix := New(docs, Options{})
	build := time.Since(start)

	bySplit := map[string]*Stats{"dev": {}, "dev2": {}, "holdout": {}, "all": {}}
	byKind := map[string]*Stats{}
	var misses []string
	_, results := Evaluate(ix, qs)
	for _, r := range results {
		q := r.Query
		key := q.Split + " " + q.Kind
		if byKind[key] == nil {
			byKind[key] = &Stats{}
		}
		byKind[key].Add(q, r.Hits)
		bySplit["all"].Add(q, r.Hits)
		bySplit[q.Split].Add(q, r.Hits)
		if !r.OK && (*evalShow == "all" || slices.Contains(strings.Split(*evalShow, ","), q.Split)) {
			var got []string
			for _, h := range r.Hits {
				got = append(got, fmt.Sprintf("%s(%.2f %v)", h.Name, h.Score, h.Matched))
			}
			misses = append(misses, fmt.Sprintf("  %s %-11s %q want %v got %v", q.ID, q.Kind, q.Query, q.Want, got))
		}
	}

	t.Logf("catalog: %d tools (testdata/search/catalog.json), index built in %v", ix.Len(), build.Round(time.Millisecond))
	t.Logf("shortlist size: at most %d", ix.Shortlist())
	for _, s := range []string{"dev", "dev2", "holdout", "all"} {
		t.Logf("%-7s %v", s, bySplit[s])
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("  %-16s %v", k, byKind[k])
	}
	p50, p99 := Latency(ix, qs, 20)
	t.Logf("latency, %d tools, search only, %d queries x 20: p50 %v p99 %v", ix.Len(), len(qs), p50, p99)
	big := New(generateCatalog(len(evalRegions))[:10000], Options{})
	p50, p99 = Latency(big, qs, 20)
	t.Logf("latency, %d tools, search only, %d queries x 20: p50 %v p99 %v", big.Len(), len(qs), p50, p99)
	if len(misses) > 0 {
		t.Logf("misses (splits %s):\n%s", *evalShow, strings.Join(misses, "\n"))
	}

	for _, split := range []string{"dev", "dev2", "holdout", "all"} {
		st := bySplit[split]
		var single Stats
		for k, ks := range byKind {
			if (split == "all" || strings.HasPrefix(k, split+" ")) && strings.HasSuffix(k, " single") {
				single.Merge(*ks)
			}
		}
		floor, hasFloor := evalFloors[split]
		for _, c := range []struct {
			name          string
			got           float64
			target, floor float64
		}{
			{"required-tool recall@5 (supported queries)", st.Recall(), targetRecall, floor.recall},
			{"unsupported rejection", st.Rejection(), targetRejection, floor.rejection},
			{"required-tool recall@5 (single-tool queries)", single.Recall(), targetRecall, floor.single},
		} {
			verdict := "target met"
			if c.got < c.target {
				verdict = "TARGET NOT MET"
				if *evalTargets {
					t.Errorf("%s: %s = %.3f, target %.2f", split, c.name, c.got, c.target)
				}
			}
			if !hasFloor {
				t.Logf("%-7s %s = %.3f: %s (target %.2f)", split, c.name, c.got, verdict, c.target)
				continue
			}
			t.Logf("%-7s %s = %.3f: %s (target %.2f, floor %.2f)", split, c.name, c.got, verdict, c.target, c.floor)
			if c.got < c.floor {
				t.Errorf("%s: %s = %.3f, below the regression floor %.2f", split, c.name, c.got, c.floor)
			}
		}
	}
}
