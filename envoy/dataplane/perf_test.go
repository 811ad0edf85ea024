package dataplane

import (
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/proto"
)

// TestNewRequestID: a random UUID v4 in its canonical lower-case text form,
// as Envoy's default request ID extension generates.
func TestNewRequestID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 64 {
		id := newRequestID()
		if !uuid.MatchString(id) {
			t.Fatalf("request id %q is not a UUID v4", id)
		}
		if seen[id] {
			t.Fatalf("request id %q generated twice", id)
		}
		seen[id] = true
	}
}

// TestCopyMode: the per-request copy of a processing mode has every field
// of the original and is independent of it.
func TestCopyMode(t *testing.T) {
	m := &extprocfilterv3.ProcessingMode{
		RequestHeaderMode:   extprocfilterv3.ProcessingMode_SKIP,
		ResponseHeaderMode:  extprocfilterv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocfilterv3.ProcessingMode_STREAMED,
		ResponseBodyMode:    extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL,
		RequestTrailerMode:  extprocfilterv3.ProcessingMode_SEND,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
	}
	c := copyMode(m)
	if !proto.Equal(c, m) {
		t.Fatalf("copy %v, want %v", c, m)
	}
	// Every field is covered: a field copyMode missed would differ here.
	if n := m.ProtoReflect().Descriptor().Fields().Len(); n != 6 {
		t.Fatalf("ProcessingMode has %d fields, copyMode copies 6", n)
	}
	c.RequestBodyMode = extprocfilterv3.ProcessingMode_NONE
	if m.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_STREAMED {
		t.Fatal("changing the copy changed the original")
	}
}

// TestHTTPHeader: regular headers in Go's form, repeated names keeping
// their order, pseudo and hop-by-hop headers left out, and each name's
// values independent of the others'.
func TestHTTPHeader(t *testing.T) {
	m := &headerMap{}
	for _, kv := range [][2]string{{":status", "200"}, {"x-a", "1"}, {"connection", "close"}, {"x-b", "2"}, {"x-a", "3"}, {"content-type", "t"}} {
		m.add(kv[0], kv[1])
	}
	h := m.httpHeader()
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
