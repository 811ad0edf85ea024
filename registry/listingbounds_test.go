package registry

import "testing"

// TestListingBoundsOver: a Portal entry's set fields replace the config
// file's, the rest stay; nil changes nothing.
func TestListingBoundsOver(t *testing.T) {
	base := Limits{Tools: 1, Resources: 2, ResourceTemplates: 3, Prompts: 4, Bytes: 5}
	for _, tc := range []struct {
		name string
		b    *ListingBounds
		want Limits
	}{
		{"nil", nil, base},
		{"empty", &ListingBounds{}, base},
		{"some", &ListingBounds{Tools: ptr(int64(10)), Bytes: ptr(int64(50))}, Limits{Tools: 10, Resources: 2, ResourceTemplates: 3, Prompts: 4, Bytes: 50}},
		{"all", &ListingBounds{Tools: ptr(int64(10)), Resources: ptr(int64(20)), ResourceTemplates: ptr(int64(30)), Prompts: ptr(int64(40)), Bytes: ptr(int64(50))},
			Limits{Tools: 10, Resources: 20, ResourceTemplates: 30, Prompts: 40, Bytes: 50}},
	} {
		if got := tc.b.Over(base); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := (*ListingBounds)(nil).Over(DefaultLimits()); got.Tools != DefaultListingItems || got.Bytes != DefaultListingBytes {
		t.Errorf("defaults %+v", got)
	}
	if !(*ListingBounds)(nil).Equal(&ListingBounds{}) || (&ListingBounds{Tools: ptr(int64(1))}).Equal(&ListingBounds{Tools: ptr(int64(2))}) {
		t.Error("Equal")
	}
}
