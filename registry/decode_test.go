package registry

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestListingDecoderPositions checks that every kind of invalid listing is
// reported at the line and column of what is wrong, in YAML and JSON.
func TestListingDecoderPositions(t *testing.T) {
	svc := "  toolServices: [{name: s, url: 'http://a'}]\n"
	tests := []struct {
		name, doc string
		strict    bool
		want      []string // one entry per problem, in document order
	}{
		{name: "yaml syntax", doc: "routes:\n  - key: a\n    bad: [\n",
			want: []string{"line 3: decode listing yaml: did not find expected node content"}},
		{name: "json syntax", doc: "{\"routes\": [\n  {\"key\": \"a\",}\n]}",
			want: []string{"line 2, column 15: decode listing json: invalid character '}'"}},
		{name: "json truncated", doc: "{\"routes\": [\n",
			want: []string{"line 2, column 1: decode listing json: unexpected EOF"}},
		{name: "json trailing data", doc: "{\"routes\":[]}\n {}",
			want: []string{"line 2, column 2: decode listing json: trailing data"}},
		{name: "yaml bad url", doc: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: gopher://a\n",
			want: []string{`line 5, column 5: route "a": tool service "s": url: "gopher://a": scheme must be http or https`}},
		{name: "json bad url", doc: "{\"routes\": [{\"key\": \"a\",\n  \"toolServices\": [{\"name\": \"s\",\n    \"url\": \"ftp://a\"}]}]}",
			want: []string{`line 3, column 5: route "a": tool service "s": url: "ftp://a"`}},
		{name: "strict typo", strict: true, doc: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://a\n    colour: red\n",
			want: []string{`line 6, column 5: routes[0].toolServices[0].colour: unknown field "colour"`}},
		{name: "strict typo json", strict: true, doc: "{\"routes\": [],\n \"extra\": 1}",
			want: []string{`line 2, column 2: extra: unknown field "extra"`}},
		{name: "no tool services", doc: "routes:\n- key: a\n",
			want: []string{`line 2, column 3: route "a": toolServices: at least one is required`}},
		{name: "list expected", doc: "routes:\n- key: a\n  toolServices: x\n",
			want: []string{`line 3, column 17: routes[0].toolServices: want a list, got "x"`}},
		{name: "scalars", doc: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://a\n    cluster: {connectTimeout: 1, maxConnections: lots, http2: yes}\n",
			want: []string{
				`line 6, column 31: routes[0].toolServices[0].cluster.connectTimeout: duration must be a string`,
				`line 6, column 50: routes[0].toolServices[0].cluster.maxConnections: want an integer`,
				`line 6, column 63: routes[0].toolServices[0].cluster.http2: want true or false`,
			}},
		{name: "bad duration", doc: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://a\n    cluster:\n      requestTimeout: -1s\n",
			want: []string{`line 7, column 23: routes[0].toolServices[0].cluster.requestTimeout: invalid duration "-1s": negative`}},
		{name: "json type", doc: "{\"routes\": [{\"key\": 1, \"toolServices\": []}]}",
			want: []string{`line 1, column 21: routes[0].key: want a string, got 1`}},
		{name: "duplicate key is placed on the second route", doc: "routes:\n- key: a\n" + svc + "- key: a\n" + svc,
			want: []string{`line 4, column 3: route "a": key: duplicate route key`, `line 4, column 3: route "a": publicPath: "/mcp/a" is already used`}},
		{name: "synonym index", doc: "routes:\n- key: a\n  catalog:\n    synonyms: [\"a b\", \"x\"]\n" + svc,
			want: []string{`line 4, column 23: route "a": catalog.synonyms[1]: 1 words`}},
		{name: "route without key", doc: "routes:\n- key: a\n" + svc + "- toolServices: [{name: s, url: 'http://a'}]\n",
			want: []string{`line 4, column 3: routes[1]: key: must match`, `line 4, column 3: routes[1]: publicPath: required`}},
		{name: "nested cluster field", doc: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://a\n    cluster:\n      outlierDetection:\n        maxEjectionPercent: 101\n",
			want: []string{`line 8, column 9: route "a": tool service "s": cluster.outlierDetection.maxEjectionPercent: 101 is over 100`}},
		{name: "service listed twice", doc: "routes:\n- key: a\n  toolServices:\n  - {name: s, url: 'http://a'}\n  - {name: s, url: 'http://a'}\n",
			want: []string{`line 5, column 6: route "a": tool service "s": name: listed twice`}},
		{name: "yaml duplicate field", doc: "routes: []\nroutes: []\n",
			want: []string{`line 2, column 1: routes: field is set twice`}},
		{name: "missing routes", doc: "\n{}",
			want: []string{`line 2, column 1: decode listing: missing "routes"`}},
		{name: "not an object", doc: "just text",
			want: []string{`line 1, column 1: listing: want an object, got "just text"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ListingDecoder{Strict: tc.strict}.Decode([]byte(tc.doc))
			var le *ListingError
			if !errors.As(err, &le) {
				t.Fatalf("Decode() = %v, want a *ListingError", err)
			}
			if len(le.Problems) != len(tc.want) {
				t.Fatalf("Decode() problems:\n%v\nwant %d", err, len(tc.want))
			}
			lines := strings.Split(err.Error(), "\n")
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i, lines[i], w)
				}
			}
			le.Source = "portal.yaml"
			if got := le.Error(); !strings.HasPrefix(got, "portal.yaml:") {
				t.Errorf("with a source: %q", got)
			}
		})
	}
}

// TestListingDecoderAliasBomb: aliases are walked where they are used, so
// a document that multiplies them is stopped, not walked for hours.
func TestListingDecoderAliasBomb(t *testing.T) {
	const n = 3000 // n routes of n services: 9e6 services from a 30 KB document
	var b strings.Builder
	b.WriteString("routes:\n- &r\n  key: a\n  toolServices: [&s {name: s, url: 'http://s'}")
	b.WriteString(strings.Repeat(", *s", n))
	b.WriteString("]\n")
	b.WriteString(strings.Repeat("- *r\n", n))
	_, err := ListingDecoder{}.Decode([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "the document expands too many aliases") || strings.Count(err.Error(), "\n") != 0 {
		t.Fatalf("Decode() = %v", err)
	}
}

// TestListingDecoderUnknownFields checks forward compatibility: by default
// an unknown field is reported and ignored, and the listing decodes as if
// it were absent; Strict rejects it.
func TestListingDecoderUnknownFields(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []UnknownField
	}{
		{name: "yaml service field",
			doc: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://a\n    retryBudget: {percent: 20}\n- key: b\n  toolServices:\n  - name: t\n    url: http://b\n    retryBudget: {percent: 20}\n",
			want: []UnknownField{
				{Path: "routes[0].toolServices[0].retryBudget", Field: "routes.toolServices.retryBudget", Line: 6, Column: 5},
				{Path: "routes[1].toolServices[0].retryBudget", Field: "routes.toolServices.retryBudget", Line: 11, Column: 5},
			}},
		{name: "json top and cluster fields",
			doc: `{"version": 2, "routes": [{"key": "a", "toolServices": [{"name": "s", "url": "http://a", "cluster": {"zone": "x"}}]}]}`,
			want: []UnknownField{
				{Path: "version", Field: "version", Line: 1, Column: 2},
				{Path: "routes[0].toolServices[0].cluster.zone", Field: "routes.toolServices.cluster.zone", Line: 1, Column: 102},
			}},
		{name: "none", doc: `{"routes": [{"key": "a", "toolServices": [{"name": "s", "url": "http://a"}]}]}`},
		{name: "route instructions and service priority are known",
			doc: "routes:\n- key: a\n  instructions: Ask first.\n  toolServices:\n  - name: s\n    url: http://a\n    priority: -2\n"},
		{name: "anchors and merge keys are not fields",
			doc: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://s\n    cluster: &c {connectTimeout: 2s}\n- key: b\n  toolServices:\n  - name: t\n    url: http://t\n    cluster:\n      <<: *c\n      maxRetries: 0x10\n"},
		{name: "unknown field in a merged mapping",
			doc: "routes:\n- key: a\n  toolServices:\n  - name: s\n    url: http://s\n    cluster: &c {zone: x}\n- key: b\n  toolServices:\n  - name: t\n    url: http://t\n    cluster:\n      <<: [*c]\n",
			want: []UnknownField{
				{Path: "routes[0].toolServices[0].cluster.zone", Field: "routes.toolServices.cluster.zone", Line: 6, Column: 18},
				{Path: "routes[1].toolServices[0].cluster.zone", Field: "routes.toolServices.cluster.zone", Line: 6, Column: 18},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []UnknownField
			l, err := ListingDecoder{OnUnknownField: func(u UnknownField) { got = append(got, u) }}.Decode([]byte(tc.doc))
			if err != nil {
				t.Fatalf("lenient Decode() = %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("unknown fields = %+v\nwant %+v", got, tc.want)
			}
			if len(l.Routes) == 0 || l.Routes[0].ToolServices[0].Name != "s" {
				t.Errorf("listing not decoded: %+v", l)
			}
			_, err = ListingDecoder{Strict: true}.Decode([]byte(tc.doc))
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("strict Decode() of a listing without unknown fields = %v", err)
				}
				return
			}
			var le *ListingError
			if !errors.As(err, &le) || len(le.Problems) != len(tc.want) || !strings.Contains(err.Error(), "unknown field") {
				t.Errorf("strict Decode() = %v, want %d unknown-field problems", err, len(tc.want))
			}
		})
	}
	// An invalid listing reports no unknown field: it is not used.
	called := false
	_, err := ListingDecoder{OnUnknownField: func(UnknownField) { called = true }}.Decode([]byte("routes:\n- key: A\n  extra: 1\n"))
	if err == nil || called {
		t.Errorf("invalid listing: err %v, reported %v", err, called)
	}
}

func TestUnknownFieldReporter(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewPedanticRegistry()
	report := NewUnknownFieldReporter(slog.New(slog.NewTextHandler(&logs, nil)), reg)
	for range 3 { // three refreshes of the same listing
		report(UnknownField{Path: "routes[0].toolServices[0].protocol", Field: "routes.toolServices.protocol"})
		report(UnknownField{Path: "routes[1].toolServices[0].protocol", Field: "routes.toolServices.protocol"})
	}
	if n := strings.Count(logs.String(), "field=routes.toolServices.protocol"); n != 1 {
		t.Errorf("warned %d times, want once:\n%s", n, logs.String())
	}
	if got := unknownFieldCounts(t, reg); fmt.Sprint(got) != "map[routes.toolServices.protocol:6]" {
		t.Errorf("counter = %v, want 6 for routes.toolServices.protocol", got)
	}
	// The label set is bounded.
	for i := range 2 * maxUnknownFieldLabels {
		report(UnknownField{Field: fmt.Sprintf("f%d", i)})
	}
	got := unknownFieldCounts(t, reg)
	if len(got) != maxUnknownFieldLabels+1 || got[unknownFieldOther] != maxUnknownFieldLabels+1 {
		t.Errorf("%d series (%v), want %d: the bound, then %q", len(got), got[unknownFieldOther], maxUnknownFieldLabels+1, unknownFieldOther)
	}
}

func unknownFieldCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "toolmesh_portal_unknown_fields_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			counts[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return counts
}
