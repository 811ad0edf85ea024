package dataplane

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/headers"
)

// TestReadUpTo: whatever length the headers announce, readUpTo returns
// what io.ReadAll(io.LimitReader(r, n)) returns (for readers whose data and
// errors do not depend on the size of each read, as a body's do not).
func TestReadUpTo(t *testing.T) {
	body := strings.Repeat("0123456789", 30) // 300 bytes
	boom := errors.New("boom")
	readers := map[string]func() io.Reader{
		"plain":    func() io.Reader { return strings.NewReader(body) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
		"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(body)) },
		"error":    func() io.Reader { return io.MultiReader(strings.NewReader(body[:100]), iotest.ErrReader(boom)) },
		"empty":    func() io.Reader { return strings.NewReader("") },
	}
	for name, mk := range readers {
		for _, n := range []int64{1, 100, 299, 300, 301, 1000} {
			for _, size := range []int64{-1, 0, 1, 100, 299, 300, 301, 999, 1000, 5000} {
				want, werr := io.ReadAll(io.LimitReader(mk(), n))
				got, gerr := readUpTo(mk(), n, size)
				if !bytes.Equal(got, want) || !errors.Is(gerr, werr) && (werr == nil || gerr == nil || gerr.Error() != werr.Error()) {
					t.Errorf("%s, n %d, size %d: %d bytes, %v; want %d bytes, %v", name, n, size, len(got), gerr, len(want), werr)
				}
			}
		}
	}
}

func TestContentLength(t *testing.T) {
	for v, want := range map[string]int64{"": -1, "12": 12, "0": 0, "-3": -1, "x": -1} {
		h := &headers.Map{}
		if v != "" {
			h.Set("content-length", v)
		}
		if got := contentLength(h); got != want {
			t.Errorf("content-length %q: %d, want %d", v, got, want)
		}
	}
}
