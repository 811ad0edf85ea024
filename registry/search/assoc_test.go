package search

import (
	"slices"
	"testing"
)

// TestAssociations checks the links learned from the catalog: a query word
// that a tool does not use scores on it through a name term the rest of
// the catalog uses with that word, reorders tools that tie otherwise, and
// is never reported as matched.
func TestAssociations(t *testing.T) {
	docs := []Doc{
		{Name: "pipeline_runner_drain", Description: "Drain a runner."},
		{Name: "pipeline_runner_get", Description: "Get a runner and its jobs."},
		{Name: "pipeline_runner_list", Description: "List runners and their jobs."},
		{Name: "mail_queue_drain", Description: "Drain a queue."},
	}
	off := defaultParams
	off.assocWeight = 0
	for _, tc := range []struct {
		name string
		p    params
		want string
	}{
		// Without links the two drain tools tie and the name decides.
		{"off", off, "mail_queue_drain"},
		// "jobs" goes with "runner" in this catalog.
		{"on", defaultParams, "pipeline_runner_drain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := build(docs, Options{}, tc.p)
			hits := ix.Search("drain the jobs", 0)
			if len(hits) == 0 || hits[0].Name != tc.want {
				t.Fatalf("hits %+v, want %s first", hits, tc.want)
			}
			for _, h := range hits {
				if h.Name == "pipeline_runner_drain" && slices.Contains(h.Matched, "jobs") {
					t.Errorf("%s reports a learned link as a match: %v", h.Name, h.Matched)
				}
			}
		})
	}
	ix := build(docs, Options{}, defaultParams)
	jobs, runner := ix.terms[normalize("jobs")], ix.terms[normalize("runner")]
	if !slices.ContainsFunc(ix.assoc[jobs], func(l assocLink) bool { return l.term == runner && l.strength == 1 }) {
		t.Errorf("links of jobs = %+v, want runner with strength 1", ix.assoc[jobs])
	}
}
