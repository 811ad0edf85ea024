// Package eventstream reads and rewrites the server-sent events of a
// federated MCP server's answer, bounded per event and per stream, in time
// linear in the bytes received.
package eventstream

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/toolmesh/toolmesh/mcp"
)

// Server-sent events of a federated server's answer (the event stream
// format of the HTML Living Standard, as the MCP Streamable HTTP transport
// uses it).

// ErrEventTooLarge: an event grew past the bound without ending.
var ErrEventTooLarge = errors.New("an event of the MCP server's stream is larger than the limit")

// ErrStreamTooLarge: the stream grew past the response bound.
var ErrStreamTooLarge = errors.New("the MCP server's stream is larger than the limit")

// Splitter cuts a stream that arrives in arbitrary chunks into events.
// Every byte is searched for an event's end once, however the chunks fall
// (an incomplete event is not rescanned from its start on every chunk), and
// an incomplete event may hold at most Max bytes (0: no bound).
type Splitter struct {
	buf  []byte
	from int // bytes of buf already searched for an event's end
	Max  int
	// searched counts the bytes searched, which tests hold to the bytes
	// received.
	searched int
}

// Next returns the next complete event, its blank line included, or nil.
// The event is valid until the next Write.
func (s *Splitter) Next() ([]byte, int) {
	// A blank line is at most 4 bytes ("\r\n\r\n"): one that straddles
	// the bytes searched before starts at most 3 bytes back.
	start := max(s.from-3, 0)
	end, sep := eventEnd(s.buf[start:])
	if end < 0 {
		s.searched += len(s.buf) - start
		s.from = len(s.buf)
		return nil, 0
	}
	s.searched += end + sep
	end += start
	ev := s.buf[:end+sep]
	s.buf, s.from = s.buf[end+sep:], 0
	return ev, end
}

func (s *Splitter) Write(chunk []byte) { s.buf = append(s.buf, chunk...) }

// Over reports whether the incomplete event is past the bound (call Next
// until it returns nil first: complete events do not count).
func (s *Splitter) Over() bool { return s.Max > 0 && len(s.buf) > s.Max }

// Rest returns and forgets what is left.
func (s *Splitter) Rest() []byte {
	b := s.buf
	s.buf, s.from = nil, 0
	return b
}

// Translator rewrites the data of each complete event of a stream that
// arrives in arbitrary chunks; an incomplete event waits for its end. It
// bounds an event and the whole stream (MaxTotal; 0: no bound).
type Translator struct {
	split    Splitter
	Fn       func(data []byte) []byte
	MaxTotal int64
	total    int64
	passed   int64 // bytes of the events let through, at most maxTotal
	failed   bool  // a bound was crossed: everything after is dropped
}

// New returns a Translator that rewrites each event's data with fn and
// bounds an incomplete event to maxEvent bytes and the stream to maxTotal
// (0: no bound).
func New(fn func(data []byte) []byte, maxEvent int, maxTotal int64) *Translator {
	return &Translator{Fn: fn, split: Splitter{Max: maxEvent}, MaxTotal: maxTotal}
}

// Feed takes the next chunk and returns the translated complete events
// (possibly none). At the end of the stream a final event without its
// blank line is flushed too. Past a bound it returns the events before it
// and the bound's error, and nothing from then on.
func (t *Translator) Feed(chunk []byte, eos bool) ([]byte, error) {
	if t.failed {
		return nil, nil
	}
	t.total += int64(len(chunk))
	over := t.MaxTotal > 0 && t.total > t.MaxTotal
	t.split.Write(chunk)
	var out []byte
	for {
		ev, end := t.split.Next()
		if ev == nil {
			break
		}
		if t.passed += int64(len(ev)); over && t.passed > t.MaxTotal {
			break
		}
		out = append(out, t.Event(ev[:end])...)
		out = append(out, '\n', '\n')
	}
	if over {
		// The chunk's events within the bound still go (the response
		// may be among them); nothing after them does.
		t.failed = true
		t.split.Rest()
		return out, ErrStreamTooLarge
	}
	if t.split.Over() {
		t.failed = true
		t.split.Rest()
		return out, ErrEventTooLarge
	}
	if eos {
		if rest := t.split.Rest(); len(bytes.TrimSpace(rest)) > 0 {
			out = append(out, t.Event(rest)...)
			out = append(out, '\n', '\n')
		}
	}
	return out, nil
}

// eventEnd returns where the first event of b ends and the length of the
// blank line that ends it, or -1.
// It reads b up to the blank line only (once per byte).
func eventEnd(b []byte) (int, int) {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1, 0
		}
		j += i
		switch {
		case j+1 < len(b) && b[j+1] == '\n':
			return j, 2
		case j >= 1 && b[j-1] == '\r' && j+2 < len(b) && b[j+1] == '\r' && b[j+2] == '\n':
			return j - 1, 4
		}
		i = j + 1
	}
}

// Event rewrites one event: its data lines are joined, translated, and
// written back as data lines after the event's other fields.
func (t *Translator) Event(ev []byte) []byte {
	var other [][]byte
	var data []byte
	hasData := false
	for _, line := range bytes.Split(ev, []byte("\n")) {
		if v, ok := dataLine(line); ok {
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, v...), true
			continue
		}
		other = append(other, bytes.TrimSuffix(line, []byte("\r")))
	}
	var out []byte
	for _, l := range other {
		out = append(out, l...)
		out = append(out, '\n')
	}
	if hasData {
		for i, l := range bytes.Split(t.Fn(data), []byte("\n")) {
			if i > 0 {
				out = append(out, '\n')
			}
			out = append(out, "data: "...)
			out = append(out, l...)
		}
	} else if len(out) > 0 {
		out = out[:len(out)-1]
	}
	return out
}

// FinalEvent returns the response to the request id from a whole event
// stream, nil when it holds none.
func FinalEvent(body []byte, id json.RawMessage) *mcp.ClientResponse {
	var found *mcp.ClientResponse
	t := &Translator{Fn: func(data []byte) []byte {
		if found == nil && IsResponse(data, id) {
			found, _ = mcp.DecodeClientResponse(data)
		}
		return data
	}}
	_, _ = t.Feed(body, true) // unbounded: body is whole, within MaxResponseBytes
	return found
}
