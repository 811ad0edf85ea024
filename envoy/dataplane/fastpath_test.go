package dataplane

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzNormalizePathShortcut checks that the shortcut of normalizePath
// (normalPath) only skips paths that rebuilding would leave unchanged.
func FuzzNormalizePathShortcut(f *testing.F) {
	for _, s := range []string{"/", "/mcp/x", "/a//b", "/a/./b", "/a/../b", "/a/%41", `/a\b`, "a/b", "/.", "/..", "//", "/a/", "/a/b?c=..//", "/a/..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, full string) {
		for _, c := range []struct{ canonical, merge bool }{{true, true}, {true, false}, {false, true}} {
			p, q, hasQuery := strings.Cut(full, "?")
			want := rebuildPath(p, q, hasQuery, c.canonical, c.merge)
			if got := normalizePath(full, c.canonical, c.merge); got != want {
				t.Fatalf("normalizePath(%q, %v, %v) = %q, rebuilt %q", full, c.canonical, c.merge, got, want)
			}
		}
	})
}

func TestNormalPath(t *testing.T) {
	for _, tt := range []struct {
		p     string
		merge bool
		want  bool
	}{
		{"/", true, true},
		{"/mcp/route", true, true},
		{"/a/", true, true},
		{"/a/...", true, true},
		{"/a//b", false, true},
		{"/a//b", true, false},
		{"//", true, false},
		{"/a/./b", true, false},
		{"/a/..", true, false},
		{"/.", true, false},
		{"/a%2e", true, false},
		{`/a\b`, true, false},
		{"a", true, false},
		{"", true, false},
	} {
		if got := normalPath(tt.p, tt.merge); got != tt.want {
			t.Errorf("normalPath(%q, %v) = %v, want %v", tt.p, tt.merge, got, tt.want)
		}
	}
}

func TestLowerKey(t *testing.T) {
	for _, k := range []string{"Content-Type", "content-type", "X-Request-Id", "", "ÄÖ-X"} {
		for range 2 { // the second time from the cache
			if got, want := lowerKey(k), strings.ToLower(k); got != want {
				t.Errorf("lowerKey(%q) = %q, want %q", k, got, want)
			}
		}
	}
	m := &headerMap{}
	addSorted(m, http.Header{"X-B": {"1"}, "Host": {"h"}, "X-A": {"2", "3"}})
	want := []header{{"x-a", "2"}, {"x-a", "3"}, {"x-b", "1"}}
	if len(m.h) != len(want) {
		t.Fatalf("addSorted: %v, want %v", m.h, want)
	}
	for i := range want {
		if m.h[i] != want[i] {
			t.Fatalf("addSorted: %v, want %v", m.h, want)
		}
	}
}
