package eventstream

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestSSETranslatorChunking: however the stream is cut (one byte at a
// time included, blank lines split across chunks, CRLF and LF), the
// events out are the same, and every byte is searched for an event's end
// a bounded number of times: an event that arrives in many chunks is not
// rescanned from its start on each.
func TestSSETranslatorChunking(t *testing.T) {
	stream := "event: message\r\ndata: {\"a\":1}\r\n\r\n: comment\n\ndata: {\"b\":\n" + "data: 2}\n\nid: 7\ndata: " + strings.Repeat("x", 3000) + "\n\ndata: tail"
	upper := func(b []byte) []byte { return bytes.ToUpper(b) }
	whole, err := New(upper, 0, 0).Feed([]byte(stream), true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(whole, []byte(`data: {"B":`+"\ndata: 2}\n\n")) || !bytes.HasSuffix(whole, []byte("data: TAIL\n\n")) {
		t.Fatalf("whole stream translated to %q", whole)
	}
	for _, size := range []int{1, 2, 3, 5, 64} {
		tr := New(upper, 0, 0)
		var out []byte
		for i := 0; i < len(stream); i += size {
			b, err := tr.Feed([]byte(stream[i:min(i+size, len(stream))]), i+size >= len(stream))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
		if !bytes.Equal(out, whole) {
			t.Errorf("chunks of %d: %q, want %q", size, out, whole)
		}
		chunks := (len(stream) + size - 1) / size
		if limit := len(stream) + 4*(chunks+6); tr.split.searched > limit {
			t.Errorf("chunks of %d: searched %d bytes for %d received (limit %d)", size, tr.split.searched, len(stream), limit)
		}
	}
}

// TestSSETranslatorBounds: an event that never ends is cut at the event
// bound, a stream at the total bound; the events before pass, nothing
// after does, and nothing is held.
func TestSSETranslatorBounds(t *testing.T) {
	id := func(b []byte) []byte { return b }
	tr := New(id, 1024, 1<<20)
	out, err := tr.Feed([]byte("data: ok\n\ndata: "), false)
	if err != nil || string(out) != "data: ok\n\n" {
		t.Fatalf("first chunk: %q %v", out, err)
	}
	var total int
	for i := 0; err == nil && i < 100; i++ {
		out, err = tr.Feed(bytes.Repeat([]byte("y"), 100), false)
		total += len(out)
	}
	if !errors.Is(err, ErrEventTooLarge) || total != 0 || len(tr.split.buf) != 0 {
		t.Fatalf("endless event: %v, %d bytes out, %d held", err, total, len(tr.split.buf))
	}
	if out, err := tr.Feed([]byte("\n\ndata: late\n\n"), true); out != nil || err != nil {
		t.Errorf("after the bound: %q %v", out, err)
	}

	tr = New(id, 1024, 4096)
	for i := 0; ; i++ {
		if _, err := tr.Feed([]byte("data: 0123456789\n\n"), false); err != nil {
			if !errors.Is(err, ErrStreamTooLarge) || i*18 > 4096 {
				t.Fatalf("after %d events: %v", i, err)
			}
			break
		}
	}
}
