package headers

import (
	"net/http"
	"reflect"
	"strconv"
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
			if got := NormalizePath(full, c.canonical, c.merge); got != want {
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
	m := &Map{}
	addSorted(m, http.Header{"X-B": {"1"}, "Host": {"h"}, "X-A": {"2", "3"}})
	want := []Header{{Key: "x-a", Value: "2"}, {Key: "x-a", Value: "3"}, {Key: "x-b", Value: "1"}}
	if len(m.H) != len(want) {
		t.Fatalf("addSorted: %v, want %v", m.H, want)
	}
	for i := range want {
		if m.H[i] != want[i] {
			t.Fatalf("addSorted: %v, want %v", m.H, want)
		}
	}
}

// TestHTTPHeader: regular headers in Go's form, repeated names keeping
// their order, pseudo and hop-by-hop headers left out, and each name's
// values independent of the others'.
func TestHTTPHeader(t *testing.T) {
	m := &Map{}
	for _, kv := range [][2]string{{":status", "200"}, {"x-a", "1"}, {"connection", "close"}, {"x-b", "2"}, {"x-a", "3"}, {"content-type", "t"}} {
		m.Add(kv[0], kv[1])
	}
	h := m.HTTPHeader()
	want := http.Header{"X-A": {"1", "3"}, "X-B": {"2"}, "Content-Type": {"t"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("httpHeader = %v, want %v", h, want)
	}
	h["X-B"] = append(h["X-B"], "more")
	if got := h.Get("Content-Type"); got != "t" || len(h["Content-Type"]) != 1 {
		t.Errorf("appending to X-B changed Content-Type: %v", h["Content-Type"])
	}
}

// TestCanonicalKey: the cached canonical form is Go's, a name seen before
// costs no allocation, and the cache stops growing at its bound.
func TestCanonicalKey(t *testing.T) {
	for _, k := range []string{"x-request-id", "content-type", "x-envoy-expected-rq-timeout-ms", "mcp-protocol-version", "x_under", "X-Already"} {
		for range 2 { // computed, then cached
			if got, want := canonicalKey(k), http.CanonicalHeaderKey(k); got != want {
				t.Errorf("canonicalKey(%q) = %q, want %q", k, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = canonicalKey("x-forwarded-proto") }); n != 0 {
		t.Errorf("a cached name allocated %v times", n)
	}
	for i := range 2 * maxCanonicalKeys {
		canonicalKey("x-made-up-" + strconv.Itoa(i))
	}
	if n := canonicalKeys.n.Load(); n > maxCanonicalKeys {
		t.Errorf("the cache holds %d names, bound %d", n, maxCanonicalKeys)
	}
	if got := canonicalKey("x-after-the-bound"); got != "X-After-The-Bound" {
		t.Errorf("past the bound: %q", got)
	}
}
