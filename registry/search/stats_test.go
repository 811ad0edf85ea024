package search

import "testing"

func TestStatsAdd(t *testing.T) {
	hits := func(names ...string) []Hit {
		var hs []Hit
		for _, n := range names {
			hs = append(hs, Hit{Name: n})
		}
		return hs
	}
	tests := []struct {
		name string
		q    Query
		hits []Hit
		ok   bool
		want Stats
	}{
		{"found", Query{Want: []string{"a"}}, hits("b", "a"), true,
			Stats{Queries: 1, Supported: 1, Required: 1, Found: 1, AllFound: 1, Shortlisted: 2}},
		{"one of two", Query{Want: []string{"a", "c"}}, hits("a", "b"), false,
			Stats{Queries: 1, Supported: 1, Required: 2, Found: 1, Shortlisted: 2}},
		{"missed", Query{Want: []string{"a"}}, nil, false,
			Stats{Queries: 1, Supported: 1, Required: 1}},
		{"rejected", Query{}, nil, true,
			Stats{Queries: 1, Unsupported: 1, Rejected: 1}},
		{"wrongly accepted", Query{Want: []string{}}, hits("a"), false,
			Stats{Queries: 1, Unsupported: 1}},
	}
	var total Stats
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Stats
			if ok := s.Add(tt.q, tt.hits); ok != tt.ok {
				t.Errorf("Add = %v, want %v", ok, tt.ok)
			}
			if s != tt.want {
				t.Errorf("stats %+v, want %+v", s, tt.want)
			}
			total.Merge(s)
		})
	}
	if total.Recall() != 0.5 || total.Rejection() != 0.5 {
		t.Errorf("merged recall %.2f rejection %.2f, want 0.50 and 0.50 (%+v)", total.Recall(), total.Rejection(), total)
	}
}
