package registry

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkBuildSnapshot10kRefresh rebuilds a 10,000-tool route while the
// previous snapshot is still held, as the refresher holds the current
// snapshot while it builds the next: unchanged schemas are not recompiled.
func BenchmarkBuildSnapshot10kRefresh(b *testing.B) {
	route := Route{Key: "big", ToolServices: []ToolService{{Name: "big", URL: "http://big"}}}
	ms := map[string]*Manifest{"big": bigManifest(10000)}
	prev, err := BuildSnapshot(route, ms, t0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s, err := BuildSnapshot(route, ms, t0)
		// Reading prev after the build keeps it alive during the build.
		if err != nil || len(s.Tools) != 10000 || s.Version != prev.Version {
			b.Fatalf("BuildSnapshot() = %v, %d tools", err, len(s.Tools))
		}
		prev = s
	}
}

// BenchmarkBuildSnapshot10kCold builds a 10,000-tool route whose schemas no
// earlier build has seen, so every schema compiles.
func BenchmarkBuildSnapshot10kCold(b *testing.B) {
	route := Route{Key: "big", ToolServices: []ToolService{{Name: "big", URL: "http://big"}}}
	base := bigManifest(10000)
	salt := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		salt++
		m := &Manifest{Tools: make([]ManifestTool, len(base.Tools))}
		for i, t := range base.Tools {
			t.InputSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","description":"build %d","properties":{"q%d":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1}},"required":["q%d"],"additionalProperties":false}`, salt, i, i))
			m.Tools[i] = t
		}
		ms := map[string]*Manifest{"big": m}
		b.StartTimer()
		s, err := BuildSnapshot(route, ms, t0)
		if err != nil || len(s.Tools) != 10000 {
			b.Fatalf("BuildSnapshot() = %v, %d tools", err, len(s.Tools))
		}
	}
}

// BenchmarkUnmarshalSnapshot10 restores a 10-tool snapshot from its stored
// form, as a warm start does for every route.
func BenchmarkUnmarshalSnapshot10(b *testing.B) {
	route := Route{Key: "small", ToolServices: []ToolService{{Name: "small", URL: "http://small"}}}
	s, err := BuildSnapshot(route, map[string]*Manifest{"small": bigManifest(10)}, t0)
	if err != nil {
		b.Fatal(err)
	}
	data, err := s.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		got, err := UnmarshalSnapshot(data)
		if err != nil || len(got.Tools) != 10 {
			b.Fatalf("UnmarshalSnapshot() = %v", err)
		}
	}
}
