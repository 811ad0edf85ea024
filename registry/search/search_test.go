package search

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// evalIndex is the index of the committed evaluation catalog, built once:
// gate and ranking behaviour depend on catalog-wide statistics, so they are
// tested on a realistic catalog.
var evalIndex = sync.OnceValues(func() (*Index, error) {
	docs, err := readEvalCatalog()
	if err != nil {
		return nil, err
	}
	return New(docs, Options{}), nil
})

func requireEvalIndex(t *testing.T) *Index {
	t.Helper()
	ix, err := evalIndex()
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func hitNames(hits []Hit) []string {
	var names []string
	for _, h := range hits {
		names = append(names, h.Name)
	}
	return names
}

func TestGate(t *testing.T) {
	ix := requireEvalIndex(t)
	tests := []struct {
		name   string
		query  string
		reject bool
	}{
		{"empty", "", true},
		{"blank", "  \t\n ", true},
		{"stopwords only", "could you please do this for me", true},
		{"punctuation only", "?!… -- ##", true},
		{"unknown words only", "weather forecast for Berlin", true},
		{"a generic verb alone", "create something", true},
		{"generic verbs alone", "list and update everything", true},
		{"mostly unknown words", "create a playlist of jazz songs", true},
		{"description-only match", "cardholder", true},
		{"values only", `"Q3 results" jane@example.com https://example.com/x 12345`, true},
		{"identifier match", "create a contact", false},
		{"identifier match among values", `send an email to jane@example.com with subject "hello"`, false},
		{"synonym of an identifier", "reboot the server", false},
		{"description word plus identifier", "cardholder dispute", false},
		{"tool name as typed", "hr_employee_get", false},
		{"tool name in camelCase", "billingInvoiceVoid", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := ix.Search(tt.query, 0)
			if tt.reject && len(hits) != 0 {
				t.Errorf("Search(%q) = %v, want no hits", tt.query, hitNames(hits))
			}
			if !tt.reject && len(hits) == 0 {
				t.Errorf("Search(%q) = no hits, want some", tt.query)
			}
		})
	}
}

func TestNearDuplicates(t *testing.T) {
	ix := requireEvalIndex(t)
	tests := []struct {
		query, top string
	}{
		{"create a contact", "crm.contacts.create"},
		{"bulk create contacts", "crm.contact_create_bulk"},
		{"get an employee by id", "hr_employee_get"},
		{"list employees", "hr_employees_list"},
		{"rotate an api key", "iam.api_keys.rotate"},
		{"revoke an api key", "iam.api_keys.revoke"},
		{"hr_employees_list", "hr_employees_list"},
		{"billingInvoiceSend", "billingInvoiceSend"},
	}
	for _, tt := range tests {
		hits := ix.Search(tt.query, 0)
		if len(hits) == 0 || hits[0].Name != tt.top {
			t.Errorf("Search(%q) = %v, want %s first", tt.query, hitNames(hits), tt.top)
		}
	}
}

func TestMultiIntentGetsBoth(t *testing.T) {
	ix := requireEvalIndex(t)
	hits := hitNames(ix.Search("create an invoice and email it to the customer", 0))
	for _, want := range []string{"billingInvoiceCreate", "billingInvoiceSend"} {
		if !slices.Contains(hits, want) {
			t.Errorf("shortlist %v lacks %s", hits, want)
		}
	}
}

func fax(name string) Doc {
	return Doc{Name: name, Description: "Send a fax.", InputSchema: json.RawMessage(`{"type":"object","properties":{"number":{"type":"string"}}}`)}
}

func TestTiesBrokenByName(t *testing.T) {
	docs := []Doc{fax("fax_c"), fax("fax_a"), fax("fax_b"), {Name: "print_page", Description: "Print a page."}}
	want := []string{"fax_a", "fax_b", "fax_c"}
	for i := range 20 {
		shuffled := slices.Clone(docs)
		rand.New(rand.NewPCG(uint64(i), 1)).Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		ix := New(shuffled, Options{})
		hits := ix.Search("send a fax", 0)
		if got := hitNames(hits); !slices.Equal(got, want) {
			t.Fatalf("order %d: Search = %v, want %v", i, got, want)
		}
		for _, h := range hits {
			if shuffled[h.Doc].Name != h.Name {
				t.Errorf("hit %s points at doc %d (%s)", h.Name, h.Doc, shuffled[h.Doc].Name)
			}
			if h.Score != hits[0].Score {
				t.Errorf("tied docs scored %v and %v", h.Score, hits[0].Score)
			}
		}
	}
}

func TestSearchIsDeterministic(t *testing.T) {
	ix := requireEvalIndex(t)
	for _, q := range []string{"create a shipment and track it", "list employees", "void the invoice"} {
		first := ix.Search(q, 0)
		for range 5 {
			if got := ix.Search(q, 0); !slices.EqualFunc(got, first, func(a, b Hit) bool {
				return a.Name == b.Name && a.Score == b.Score && slices.Equal(a.Matched, b.Matched)
			}) {
				t.Fatalf("Search(%q) changed between calls: %v then %v", q, first, got)
			}
		}
	}
}

func TestShortlistBound(t *testing.T) {
	docs := loadEvalCatalog(t)
	tests := []struct {
		name      string
		shortlist int
		limit     int
		want      int
	}{
		{"default shortlist", 0, 0, DefaultShortlist},
		{"limit below shortlist", 0, 2, 2},
		{"limit above shortlist is capped", 0, 50, DefaultShortlist},
		{"negative limit", 0, -1, DefaultShortlist},
		{"configured shortlist", 8, 0, 8},
		{"configured shortlist caps limit", 3, 10, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := New(docs, Options{Shortlist: tt.shortlist})
			if got := len(ix.Search("export contacts", tt.limit)); got != tt.want {
				t.Errorf("got %d hits, want %d", got, tt.want)
			}
		})
	}
}

// TestOnlyDeclaredText checks schema honesty: a tool is found through what
// its Tool Service declared (name, title, description, schema property names
// and descriptions, nested ones included) and through nothing else, and a
// hit carries the declared name and position only.
func TestOnlyDeclaredText(t *testing.T) {
	docs := []Doc{
		{Name: "geo.lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{"place":{"type":"object","properties":{"postcode":{"type":"string","description":"Zip or postal code"}}}}}`)},
		{Name: "weather.now", Title: "Current conditions", Description: "Temperature and wind at a station."},
		{Name: "opaque_tool"},
		{Name: "broken.schema", Description: "Converts currencies.", InputSchema: json.RawMessage(`{"properties": {"amount": `)},
	}
	ix := New(docs, Options{MinCoverage: -1})
	tests := []struct {
		query string
		want  []string
	}{
		{"postcode lookup", []string{"geo.lookup"}},             // nested property name
		{"geo zip", []string{"geo.lookup"}},                     // nested property description
		{"current conditions weather", []string{"weather.now"}}, // title
		{"opaque tool", []string{"opaque_tool"}},                // the name is all it declared
		{"amount", nil},                                         // unreadable schema: not indexed
		{"temperature", nil},                                    // description only: no identifier match
	}
	for _, tt := range tests {
		hits := ix.Search(tt.query, 0)
		if got := hitNames(hits); !slices.Equal(got, tt.want) {
			t.Errorf("Search(%q) = %v, want %v", tt.query, got, tt.want)
		}
		for _, h := range hits {
			if h.Doc < 0 || h.Doc >= len(docs) || docs[h.Doc].Name != h.Name {
				t.Errorf("hit %+v does not point at its doc", h)
			}
		}
	}
}

func TestMatchedWords(t *testing.T) {
	ix := requireEvalIndex(t)
	hits := ix.Search("Please void invoice INV-2041 now", 0)
	if len(hits) == 0 || hits[0].Name != "billingInvoiceVoid" {
		t.Fatalf("Search = %v, want billingInvoiceVoid first", hitNames(hits))
	}
	// "INV" is an unknown capitalised word (a value), so it matches nothing.
	if want := []string{"void", "invoice"}; !slices.Equal(hits[0].Matched, want) {
		t.Errorf("Matched = %q, want %q", hits[0].Matched, want)
	}
}

func TestQueryValuesDropped(t *testing.T) {
	ix := requireEvalIndex(t)
	var words []string
	for _, g := range ix.parse(`Email “Q3 numbers” to jane@example.com and post it at https://wiki.example.com/x, order 12345`) {
		words = append(words, g.word)
	}
	if want := []string{"email", "post", "order"}; !slices.Equal(words, want) {
		t.Errorf("query words = %q, want %q", words, want)
	}
}

func TestEmptyIndex(t *testing.T) {
	ix := New(nil, Options{})
	if ix.Len() != 0 || ix.Shortlist() != DefaultShortlist {
		t.Errorf("Len %d Shortlist %d", ix.Len(), ix.Shortlist())
	}
	if hits := ix.Search("create a contact", 0); hits != nil {
		t.Errorf("Search on an empty index = %v", hits)
	}
}

func TestConcurrentSearch(t *testing.T) {
	ix := requireEvalIndex(t)
	queries := []string{"create a contact", "list employees", "reboot the server", "tell me a joke", "create a shipment and track it"}
	want := make([][]string, len(queries))
	for i, q := range queries {
		want[i] = hitNames(ix.Search(q, 0))
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := (w + i) % len(queries)
				if got := hitNames(ix.Search(queries[k], 0)); !slices.Equal(got, want[k]) {
					t.Errorf("concurrent Search(%q) = %v, want %v", queries[k], got, want[k])
					return
				}
			}
		})
	}
	wg.Wait()
}
