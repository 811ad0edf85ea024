package extproc

import (
	"bytes"
	"encoding/json"

	"github.com/toolmesh/toolmesh/mcp"
)

// Server-sent events of a federated server's answer (the event stream
// format of the HTML Living Standard, as the MCP Streamable HTTP transport
// uses it).

// sseTranslator rewrites the data of each complete event of a stream that
// arrives in arbitrary chunks; an incomplete event waits for its end.
type sseTranslator struct {
	buf []byte
	fn  func(data []byte) []byte
}

// feed takes the next chunk and returns the translated complete events
// (possibly none). At the end of the stream a final event without its
// blank line is flushed too.
func (t *sseTranslator) feed(chunk []byte, eos bool) []byte {
	t.buf = append(t.buf, chunk...)
	var out []byte
	for {
		end, sep := eventEnd(t.buf)
		if end < 0 {
			break
		}
		out = append(out, t.event(t.buf[:end])...)
		out = append(out, '\n', '\n')
		t.buf = t.buf[end+sep:]
	}
	if eos && len(bytes.TrimSpace(t.buf)) > 0 {
		out = append(out, t.event(t.buf)...)
		out = append(out, '\n', '\n')
		t.buf = nil
	}
	if len(t.buf) == 0 {
		t.buf = nil
	}
	return out
}

// eventEnd returns where the first event of b ends and the length of the
// blank line that ends it, or -1.
func eventEnd(b []byte) (int, int) {
	n, rn := bytes.Index(b, []byte("\n\n")), bytes.Index(b, []byte("\r\n\r\n"))
	switch {
	case rn >= 0 && (n < 0 || rn < n):
		return rn, 4
	case n >= 0:
		return n, 2
	}
	return -1, 0
}

// event rewrites one event: its data lines are joined, translated, and
// written back as data lines after the event's other fields.
func (t *sseTranslator) event(ev []byte) []byte {
	var other [][]byte
	var data []byte
	hasData := false
	for _, line := range bytes.Split(ev, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, v...), true
			continue
		}
		other = append(other, line)
	}
	var out []byte
	for _, l := range other {
		out = append(out, l...)
		out = append(out, '\n')
	}
	if hasData {
		for i, l := range bytes.Split(t.fn(data), []byte("\n")) {
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

// finalEvent returns the response to the request id from a whole event
// stream, nil when it holds none.
func finalEvent(body []byte, id json.RawMessage) *mcp.ClientResponse {
	var found *mcp.ClientResponse
	t := &sseTranslator{fn: func(data []byte) []byte {
		if found == nil {
			if m, err := mcp.DecodeClientResponse(data); err == nil && m.IsResponseTo(id) {
				found = m
			}
		}
		return data
	}}
	t.feed(body, true)
	return found
}
