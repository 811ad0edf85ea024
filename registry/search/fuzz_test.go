package search

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzSearch builds a small index around one fuzzed tool (name, description
// and raw input schema, so the schema reader is fuzzed too) and searches it
// with a fuzzed query, then searches the evaluation catalog with the same
// query. Whatever the input: no panic, at most the shortlist, every hit a
// real, distinct tool with a finite positive score and a reason.
func FuzzSearch(f *testing.F) {
	f.Add("crm.contacts.create", "Create a contact.", `{"type":"object","properties":{"email":{"type":"string"}}}`, "create a contact")
	f.Add("", "", "", "")
	f.Add("hr_employees_list", "List employees.", `{"properties":{"page_size":{"type":"integer"}}}`, "list all employees in Sales")
	f.Add("HTTPServerStart", "ÄÖÜ größe", `{"properties":{"x":{"properties":{"y":{"enum":["a",1,null]}}}}}`, "iCloud pH v2 HTTPServer")
	f.Add("a\xffb", "\xff\xfe", "[", "\"unterminated quote")
	f.Add("x", strings.Repeat("word ", 500), `{"anyOf":[{"$defs":{"d":{"properties":{"z":{}}}}}]}`, strings.Repeat("create ", 300))
	f.Add("iam_key_revoke", "case ticket", `{}`, "revoke the key ak_1, it leaked (again) - today: 6:30")
	f.Add("send.email", "Send an email.", `{"properties":{"to":{"description":"Recipient"}}}`, `email "Q3" to jane@example.com https://x.io`)

	f.Fuzz(func(t *testing.T, name, desc, schema, query string) {
		docs := []Doc{
			{Name: name, Description: desc, InputSchema: json.RawMessage(schema)},
			{Name: "crm.contacts.create", Title: "Create contact", Description: "Create a contact."},
			{Name: name, Title: desc}, // a duplicate name is indexed as its own tool
		}
		ix := New(docs, Options{Shortlist: 2, MinCoverage: -1})
		checkHits(t, docs, ix.Search(query, 0), 2)
		checkHits(t, docs, ix.Search(query, 1), 1)
		// Any text as the catalog's own synonym groups: validation never
		// panics, and the index takes what it can of them.
		groups := []string{desc, name + " " + query}
		_ = ValidateSynonyms(groups)
		own := New(docs, Options{Shortlist: 2, Synonyms: groups})
		checkHits(t, docs, own.Search(query, 0), 2)

		if big, err := evalIndex(); err == nil {
			checkHits(t, nil, big.Search(query, 0), DefaultShortlist)
		}
	})
}

func checkHits(t *testing.T, docs []Doc, hits []Hit, limit int) {
	t.Helper()
	if len(hits) > limit {
		t.Fatalf("%d hits, limit %d", len(hits), limit)
	}
	seen := map[int]bool{}
	for _, h := range hits {
		if seen[h.Doc] {
			t.Fatalf("doc %d listed twice", h.Doc)
		}
		seen[h.Doc] = true
		if docs != nil && (h.Doc < 0 || h.Doc >= len(docs) || docs[h.Doc].Name != h.Name) {
			t.Fatalf("hit %+v does not point at its doc", h)
		}
		if math.IsNaN(h.Score) || math.IsInf(h.Score, 0) || h.Score <= 0 {
			t.Fatalf("hit %s has score %v", h.Name, h.Score)
		}
		if len(h.Matched) == 0 {
			t.Fatalf("hit %s matched nothing", h.Name)
		}
	}
}

// FuzzSplitWords checks the tokenizer's invariants: non-empty tokens of
// letters and digits only, bounded in length, and normalisable.
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"getV2Users", "HTTPServer", "crm.contact_create-bulk", "iCloud", "größeÄndern", "a\xffb", "", "Ab. Cd? ef"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		splitWords(s, func(w word) {
			if w.text == "" || utf8.RuneCountInString(w.text) > 2*maxTokenRunes {
				t.Fatalf("bad token %q from %q", w.text, s)
			}
			for _, r := range w.text {
				if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r) {
					t.Fatalf("token %q from %q holds %q", w.text, s, r)
				}
			}
			if normalize(w.text) == "" {
				t.Fatalf("token %q normalises to nothing", w.text)
			}
		})
	})
}
