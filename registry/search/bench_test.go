package search

import (
	"fmt"
	"testing"
)

// BenchmarkSearch measures one query (search only, index built beforehand)
// over the committed catalog and over the generator scaled to 10,000 tools,
// cycling through the labelled queries. ns/op is the per-query latency.
func BenchmarkSearch(b *testing.B) {
	qs := loadEvalQueries(b)
	for _, n := range []int{0, 10000} {
		docs := loadEvalCatalog(b)
		if n > 0 {
			docs = generateCatalog(len(evalRegions))[:n]
		}
		ix := New(docs, Options{})
		b.Run(fmt.Sprintf("tools=%d", ix.Len()), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ix.Search(qs[i%len(qs)].Query, 0)
				i++
			}
		})
	}
}

// BenchmarkNew measures building an index, which happens once per snapshot.
func BenchmarkNew(b *testing.B) {
	for _, n := range []int{0, 10000} {
		docs := loadEvalCatalog(b)
		if n > 0 {
			docs = generateCatalog(len(evalRegions))[:n]
		}
		b.Run(fmt.Sprintf("tools=%d", len(docs)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				New(docs, Options{})
			}
		})
	}
}
