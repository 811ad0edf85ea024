package search

import (
	"slices"
	"testing"
)

// TestDescriptionCandidates: a tool whose description, not its name,
// matches two of the query's words may join the shortlist; with one word,
// or with the rule off, it may not.
func TestDescriptionCandidates(t *testing.T) {
	docs := []Doc{
		{Name: "ci_runner_drain", Description: "Let running jobs finish and accept no new jobs."},
		{Name: "ci_build_create", Description: "Start a build."},
		{Name: "ci_build_get", Description: "Get a build."},
		{Name: "ci_build_cancel", Description: "Cancel a build."},
	}
	off := defaultParams
	off.descMatchMin = 0
	// Without the drain tool the gate finds too little to accept; it is
	// turned off so that the shortlist shows what the candidates are.
	noGate := Options{MinCoverage: -1}
	for _, tc := range []struct {
		name  string
		p     params
		opts  Options
		query string
		want  bool
	}{
		{"two description words", defaultParams, Options{}, "new jobs on the build farm", true},
		{"two description words, no gate", defaultParams, noGate, "new jobs on the build farm", true},
		{"rule off", off, noGate, "new jobs on the build farm", false},
		{"one description word", defaultParams, noGate, "new build", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := build(docs, tc.opts, tc.p).Search(tc.query, 0)
			if len(hits) == 0 {
				t.Fatalf("Search(%q) = no hits", tc.query)
			}
			if got := slices.Contains(hitNames(hits), "ci_runner_drain"); got != tc.want {
				t.Errorf("Search(%q) = %v; ci_runner_drain shortlisted %v, want %v", tc.query, hitNames(hits), got, tc.want)
			}
		})
	}
}

// TestCoherentGate: on a query of three or more words, a shortlist whose
// tools each match a different single word is rejected.
func TestCoherentGate(t *testing.T) {
	docs := []Doc{
		{Name: "data_table_export", Description: "Export a data table as CSV."},
		{Name: "room_book", Description: "Book a meeting room."},
		{Name: "room_get", Description: "Get a meeting room."},
		{Name: "user_get", Description: "Get a user."},
		{Name: "user_create", Description: "Create a user."},
	}
	off := defaultParams
	off.coherentWords = 0
	for _, tc := range []struct {
		name   string
		p      params
		opts   Options
		query  string
		accept bool
	}{
		{"scattered words", defaultParams, Options{}, "book a table for dinner", false},
		{"rule off", off, Options{}, "book a table for dinner", true},
		{"gate off", defaultParams, Options{MinCoverage: -1}, "book a table for dinner", true},
		{"one tool matches two words", defaultParams, Options{}, "book a meeting room for dinner", true},
		{"two words only", defaultParams, Options{}, "book dinner", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := build(docs, tc.opts, tc.p).Search(tc.query, 0)
			if got := len(hits) > 0; got != tc.accept {
				t.Errorf("Search(%q) = %v, accepted %v, want %v", tc.query, hitNames(hits), got, tc.accept)
			}
		})
	}
}

// TestOwnSynonymsDropped: when the query itself says both "create" and
// "add", the word "add" does not also match through its synonym "create".
func TestOwnSynonymsDropped(t *testing.T) {
	ix := build([]Doc{
		{Name: "group_create", Description: "Create a group."},
		{Name: "group_add_member", Description: "Add a member to a group."},
		{Name: "employee_create", Description: "Create an employee."},
	}, Options{}, defaultParams)
	create := ix.terms[normalize("create")]
	for _, g := range ix.parse("create an employee and add them to a group") {
		if g.word == "add" && slices.ContainsFunc(g.variants, func(v variant) bool { return v.term == create }) {
			t.Errorf("add still matches through create: %+v", g.variants)
		}
	}
	for _, g := range ix.parse("add an employee") {
		if g.word == "add" && !slices.ContainsFunc(g.variants, func(v variant) bool { return v.term == create }) {
			t.Errorf("alone, add should match create: %+v", g.variants)
		}
	}
	hits := ix.Search("create an employee and add them to a group", 2)
	if names := hitNames(hits); !slices.Contains(names, "employee_create") || !slices.Contains(names, "group_add_member") {
		t.Errorf("shortlist of 2 = %v, want employee_create and group_add_member", names)
	}
}

// TestHeadClause: a request that states what it wants and then goes on with
// details passes the gate on its first clause; a first clause of one word,
// or one that does not pass on its own, does not help.
func TestHeadClause(t *testing.T) {
	docs := []Doc{
		{Name: "iam_api_key_revoke", Description: "Revoke an API key."},
		{Name: "iam_api_key_create", Description: "Create an API key."},
		{Name: "iam_user_get", Description: "Get a user."},
		{Name: "billing_invoice_void", Description: "Void an invoice."},
	}
	off := defaultParams
	off.headClause = false
	const long = "revoke api key ak_live_72 now, it leaked in a public repository on the internet yesterday evening"
	for _, tc := range []struct {
		name   string
		p      params
		query  string
		accept bool
	}{
		{"details after a comma", defaultParams, long, true},
		{"rule off", off, long, false},
		{"details after a dash", defaultParams, "revoke api key ak_live_72 - it leaked in a public repository on the internet yesterday evening", true},
		{"one-word head", defaultParams, "revoke: it leaked in a public repository on the internet yesterday evening", false},
		{"head does not pass", defaultParams, "order a pizza, then revoke the key", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := build(docs, Options{}, tc.p).Search(tc.query, 0)
			if got := len(hits) > 0; got != tc.accept {
				t.Errorf("Search(%q) = %v, accepted %v, want %v", tc.query, hitNames(hits), got, tc.accept)
			}
		})
	}
}
