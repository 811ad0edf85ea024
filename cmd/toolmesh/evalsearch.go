package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolmesh/toolmesh/registry/search"
)

// evalSearchOptions are the flags of `toolmesh eval-search`.
type evalSearchOptions struct {
	tools, queries string
	synonyms       string
	shortlist      int
	minCoverage    float64
	rounds         int
	misses         bool
	minRecall      float64
	minRejection   float64
}

func newEvalSearchCmd() *cobra.Command {
	var o evalSearchOptions
	c := &cobra.Command{
		Use:   "eval-search --tools FILE --queries FILE",
		Short: "Measure search mode on a catalog with labelled requests",
		Long: `eval-search builds the search-mode index over a catalog of tools, as a route
in search mode does, runs labelled requests through search_tools' ranking and
prints what ADR 0004 measures: catalog and shortlist size, recall of the
wanted tools in the shortlist, rejection of requests no tool serves, and
search latency (p50, p99).

--tools is a JSON file of tools in the shape of an MCP tools/list result
({"tools": [...]}, the whole JSON-RPC response, or a bare array); only name,
title, description and inputSchema are read.

--queries is a JSON file {"queries": [...]} (or a bare array) of
  {"id": "q1", "kind": "single", "split": "dev", "query": "refund order 1234",
   "want": ["shop_refund_create"]}
where want lists every tool the request needs (all must be shortlisted) and
is empty for a request that no tool serves (the shortlist must be empty).
kind and split are free text; figures are also given per kind and split.

--synonyms is a text file of the route's own synonym groups (catalog.synonyms
in the Portal), one group per line, words separated by spaces; blank lines
and lines starting with # are skipped.

With --min-recall or --min-rejection it exits with status 1 when a figure is
below, so it can guard a catalog in CI.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return evalSearch(cmd.OutOrStdout(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.tools, "tools", "", "JSON file of the catalog's tools (required)")
	f.StringVar(&o.queries, "queries", "", "JSON file of labelled requests (required)")
	f.StringVar(&o.synonyms, "synonyms", "", "text file of synonym groups, one per line, as catalog.synonyms")
	f.IntVar(&o.shortlist, "shortlist", 0, "shortlist size, as catalog.shortlist (0: the default, 5)")
	f.Float64Var(&o.minCoverage, "min-coverage", 0, "the gate's minimum coverage (0: the default, 0.5; negative turns the coverage checks off)")
	f.IntVar(&o.rounds, "latency-rounds", 20, "times each request is run to measure latency (0: no latency figures)")
	f.BoolVar(&o.misses, "misses", false, "list every request that was not served, with its shortlist")
	f.Float64Var(&o.minRecall, "min-recall", 0, "exit with status 1 when recall of wanted tools is below this")
	f.Float64Var(&o.minRejection, "min-rejection", 0, "exit with status 1 when rejection of unsupported requests is below this")
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	return c
}

func evalSearch(out io.Writer, o evalSearchOptions) error {
	if o.tools == "" || o.queries == "" {
		return errors.New("eval-search: --tools and --queries are required")
	}
	if o.shortlist < 0 || o.shortlist > 50 || o.rounds < 0 {
		return errors.New("eval-search: --shortlist must be 0..50 and --latency-rounds at least 0")
	}
	docs, err := readEvalTools(o.tools)
	if err != nil {
		return err
	}
	qs, err := readEvalQueries(o.queries)
	if err != nil {
		return err
	}
	var synonyms []string
	if o.synonyms != "" {
		if synonyms, err = readEvalSynonyms(o.synonyms); err != nil {
			return err
		}
	}

	start := time.Now()
	ix := search.New(docs, search.Options{Shortlist: o.shortlist, MinCoverage: o.minCoverage, Synonyms: synonyms})
	built := time.Since(start)
	all, results := search.Evaluate(ix, qs)

	fmt.Fprintf(out, "catalog: %d tools (%s), index built in %v\n", ix.Len(), o.tools, built.Round(time.Millisecond))
	fmt.Fprintf(out, "shortlist: at most %d\n", ix.Shortlist())
	if len(synonyms) > 0 {
		fmt.Fprintf(out, "synonyms: %d groups (%s)\n", len(synonyms), o.synonyms)
	}
	fmt.Fprintf(out, "all %v\n", all)
	for _, g := range []struct {
		name string
		key  func(search.Query) string
	}{
		{"kind", func(q search.Query) string { return q.Kind }},
		{"split", func(q search.Query) string { return q.Split }},
	} {
		groups := map[string]*search.Stats{}
		for _, r := range results {
			k := g.key(r.Query)
			if k == "" {
				continue
			}
			if groups[k] == nil {
				groups[k] = &search.Stats{}
			}
			groups[k].Add(r.Query, r.Hits)
		}
		if len(groups) < 2 {
			continue
		}
		keys := make([]string, 0, len(groups))
		for k := range groups {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(out, "  %s %-12s %v\n", g.name, k, groups[k])
		}
	}
	if o.rounds > 0 && len(qs) > 0 {
		p50, p99 := search.Latency(ix, qs, o.rounds)
		fmt.Fprintf(out, "latency, search only, %d requests x %d: p50 %v p99 %v\n", len(qs), o.rounds, p50, p99)
	}
	if o.misses {
		for _, r := range results {
			if r.OK {
				continue
			}
			got := make([]string, len(r.Hits))
			for i, h := range r.Hits {
				got[i] = fmt.Sprintf("%s(%.2f %s)", h.Name, h.Score, strings.Join(h.Matched, ","))
			}
			fmt.Fprintf(out, "miss %s %q want %v got %v\n", r.Query.ID, r.Query.Query, r.Query.Want, got)
		}
	}

	var below []string
	if all.Supported > 0 && all.Recall() < o.minRecall {
		below = append(below, fmt.Sprintf("recall %.3f < %.3f", all.Recall(), o.minRecall))
	}
	if all.Unsupported > 0 && all.Rejection() < o.minRejection {
		below = append(below, fmt.Sprintf("rejection %.3f < %.3f", all.Rejection(), o.minRejection))
	}
	if len(below) > 0 {
		return runtimeError{fmt.Errorf("eval-search: %s", strings.Join(below, ", "))}
	}
	return nil
}

// readEvalTools reads tools from a tools/list result, a JSON-RPC response
// carrying one, or a bare array.
func readEvalTools(path string) ([]search.Doc, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval-search: %w", err)
	}
	var docs []search.Doc
	if err := json.Unmarshal(raw, &docs); err == nil {
		return checkEvalTools(path, docs)
	}
	var m struct {
		Tools  []search.Doc `json:"tools"`
		Result *struct {
			Tools []search.Doc `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("eval-search: decode %s: %w", path, err)
	}
	if m.Result != nil {
		return checkEvalTools(path, m.Result.Tools)
	}
	return checkEvalTools(path, m.Tools)
}

func checkEvalTools(path string, docs []search.Doc) ([]search.Doc, error) {
	if len(docs) == 0 {
		return nil, fmt.Errorf("eval-search: %s holds no tools", path)
	}
	for i, d := range docs {
		if d.Name == "" {
			return nil, fmt.Errorf("eval-search: %s: tool %d has no name", path, i)
		}
	}
	return docs, nil
}

// readEvalQueries reads {"queries": [...]} or a bare array of queries.
func readEvalQueries(path string) ([]search.Query, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval-search: %w", err)
	}
	var qs []search.Query
	if err := json.Unmarshal(raw, &qs); err != nil {
		var m struct {
			Queries []search.Query `json:"queries"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("eval-search: decode %s: %w", path, err)
		}
		qs = m.Queries
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("eval-search: %s holds no queries", path)
	}
	for i, q := range qs {
		if strings.TrimSpace(q.Query) == "" {
			return nil, fmt.Errorf("eval-search: %s: query %d (%q) is empty", path, i, q.ID)
		}
	}
	return qs, nil
}

// readEvalSynonyms reads synonym groups, one per line.
func readEvalSynonyms(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval-search: %w", err)
	}
	var groups []string
	for line := range strings.Lines(string(raw)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			groups = append(groups, line)
		}
	}
	if errs := search.ValidateSynonyms(groups); len(errs) > 0 {
		return nil, fmt.Errorf("eval-search: %s: synonyms%w", path, errors.Join(errs...))
	}
	return groups, nil
}
