package search

import (
	"slices"
	"strings"
	"testing"
)

func TestValidateSynonyms(t *testing.T) {
	tests := []struct {
		name   string
		groups []string
		errs   []string // substrings, one per expected error
	}{
		{"none", nil, nil},
		{"good", []string{"case ticket incident", "Customer client"}, nil},
		{"one word", []string{"case"}, []string{"[0]: 1 words"}},
		{"blank", []string{"  "}, []string{"[0]: 0 words"}},
		{"two words in one", []string{"ok case e-mail", "sign_in login"}, []string{`[0]: "e-mail"`, `[1]: "sign_in"`}},
		{"camelCase", []string{"signIn login"}, []string{`"signIn"`}},
		{"too long a word", []string{"a " + strings.Repeat("x", 65)}, []string{"longer than 64"}},
		{"too many words", []string{strings.Repeat("w ", 33)}, []string{"33 words"}},
		{"too many groups", slices.Repeat([]string{"a b"}, MaxSynonymGroups+1), []string{"1001 groups"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateSynonyms(tt.groups)
			if len(errs) != len(tt.errs) {
				t.Fatalf("errors %v, want %d", errs, len(tt.errs))
			}
			for i, want := range tt.errs {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], want)
				}
			}
		})
	}
}

// TestCatalogSynonyms: a catalog's own synonyms reach tools that the
// built-in lexicon does not, in that index only.
func TestCatalogSynonyms(t *testing.T) {
	docs := []Doc{
		{Name: "helpdesk_case_open", Description: "Open a case for a caller."},
		{Name: "helpdesk_case_close", Description: "Close a case."},
		{Name: "billing_invoice_void", Description: "Void an invoice."},
	}
	plain := New(docs, Options{})
	own := New(docs, Options{Synonyms: []string{"case docket", "open lodge", "bad-entry ignored"}})
	const q = "lodge a docket about the printer"
	if hits := plain.Search(q, 0); len(hits) != 0 {
		t.Errorf("without synonyms: %v, want nothing", hitNames(hits))
	}
	hits := own.Search(q, 0)
	if len(hits) == 0 || hits[0].Name != "helpdesk_case_open" {
		t.Fatalf("with synonyms: %+v, want helpdesk_case_open first", hits)
	}
	if !slices.Contains(hits[0].Matched, "docket") || !slices.Contains(hits[0].Matched, "lodge") {
		t.Errorf("matched %v, want docket and lodge", hits[0].Matched)
	}
	// The built-in lexicon still applies, and other indexes are untouched.
	if got := own.synonymsOf(normalize("ticket")); !slices.Contains(got, normalize("case")) {
		t.Errorf("built-in synonyms of ticket lost: %v", got)
	}
	if got := plain.synonymsOf(normalize("docket")); len(got) != 0 {
		t.Errorf("another index's synonyms leaked: %v", got)
	}
}
