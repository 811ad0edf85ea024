package search

import (
	"fmt"
	"slices"
	"time"
)

// Query is one labelled request of an evaluation set: the tools it needs,
// or none when no tool should be shortlisted.
type Query struct {
	ID    string   `json:"id"`
	Kind  string   `json:"kind,omitempty"`  // free text for grouping, e.g. single, multi, paraphrase, unsupported
	Split string   `json:"split,omitempty"` // free text for grouping, e.g. dev, holdout
	Query string   `json:"query"`
	Want  []string `json:"want"` // every one must be shortlisted; empty: the query must be rejected
}

// Supported reports whether some tool should serve q.
func (q Query) Supported() bool { return len(q.Want) > 0 }

// Stats are the quality figures of a set of queries (ADR 0004).
type Stats struct {
	Queries     int
	Supported   int // queries that want tools
	Unsupported int // queries that want none
	Required    int // tools wanted, over supported queries
	Found       int // of those, how many were shortlisted
	AllFound    int // supported queries with every wanted tool shortlisted
	Rejected    int // unsupported queries with an empty shortlist
	Shortlisted int // tools returned over supported queries
}

// Add counts one query and its shortlist, and reports whether the query
// was served: every wanted tool shortlisted, or nothing for an unsupported
// query.
func (s *Stats) Add(q Query, hits []Hit) bool {
	s.Queries++
	if !q.Supported() {
		s.Unsupported++
		if len(hits) == 0 {
			s.Rejected++
			return true
		}
		return false
	}
	s.Supported++
	s.Shortlisted += len(hits)
	ok := true
	for _, w := range q.Want {
		s.Required++
		if slices.ContainsFunc(hits, func(h Hit) bool { return h.Name == w }) {
			s.Found++
		} else {
			ok = false
		}
	}
	if ok {
		s.AllFound++
	}
	return ok
}

// Merge adds the counts of o.
func (s *Stats) Merge(o Stats) {
	s.Queries += o.Queries
	s.Supported += o.Supported
	s.Unsupported += o.Unsupported
	s.Required += o.Required
	s.Found += o.Found
	s.AllFound += o.AllFound
	s.Rejected += o.Rejected
	s.Shortlisted += o.Shortlisted
}

// Recall is the share of wanted tools that were shortlisted (recall@k for
// a shortlist of k).
func (s Stats) Recall() float64 { return ratio(s.Found, s.Required) }

// Rejection is the share of unsupported queries that got no shortlist.
func (s Stats) Rejection() float64 { return ratio(s.Rejected, s.Unsupported) }

func (s Stats) String() string {
	return fmt.Sprintf("queries %3d | required-tool recall %.3f (%d/%d) | queries fully served %.3f (%d/%d) | rejection %.3f (%d/%d) | mean shortlist %.2f",
		s.Queries, s.Recall(), s.Found, s.Required, ratio(s.AllFound, s.Supported), s.AllFound, s.Supported,
		s.Rejection(), s.Rejected, s.Unsupported, ratio(s.Shortlisted, s.Supported))
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Result is one query's shortlist.
type Result struct {
	Query Query
	Hits  []Hit
	OK    bool // served: see Stats.Add
}

// Evaluate runs each query once against ix and counts it into the returned
// totals.
func Evaluate(ix *Index, qs []Query) (Stats, []Result) {
	var st Stats
	rs := make([]Result, len(qs))
	for i, q := range qs {
		hits := ix.Search(q.Query, 0)
		rs[i] = Result{Query: q, Hits: hits, OK: st.Add(q, hits)}
	}
	return st, rs
}

// Latency runs every query rounds times, timing each Search call on its
// own, and returns the median and the 99th percentile.
func Latency(ix *Index, qs []Query, rounds int) (p50, p99 time.Duration) {
	ds := make([]time.Duration, 0, rounds*len(qs))
	for range rounds {
		for _, q := range qs {
			start := time.Now()
			ix.Search(q.Query, 0)
			ds = append(ds, time.Since(start))
		}
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}
