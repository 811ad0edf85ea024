package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/toolmesh/toolmesh/mcp"
)

// The Streamable HTTP GET stream of a legacy session: the server's
// messages that answer no request (notifications/resources/updated, log
// messages outside a call) come on it
// (docs/decisions/0025-legacy-get-stream.md).

// ErrNoStream is Listen's error when the server offers no GET stream
// (405, as the transport lets it answer).
var ErrNoStream = errors.New("the server offers no stream for its messages (GET answered 405)")

// Listen opens the GET stream of the session that headers name
// (Mcp-Session-Id, MCP-Protocol-Version and the credentials) at endpoint
// and passes each message the server sends, a JSON-RPC object as written,
// to each, until the stream ends (nil), ctx ends, or each returns false
// (nil). A non-2xx answer is a *StatusError (405: ErrNoStream); an event
// larger than maxEvent bytes ends the stream with an error, so a server
// cannot grow the gateway's memory with one endless event. Only the
// per-event bound applies over time: the stream may live for hours.
func (c *Client) Listen(ctx context.Context, endpoint string, headers http.Header, maxEvent int, each func(msg []byte) bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header = headers.Clone()
	req.Header.Set("Accept", "text/event-stream")
	// The client's timeout bounds whole requests; a stream has none.
	hc := *c.opts.HTTP
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return &transportError{fmt.Errorf("GET stream: %w", err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusMethodNotAllowed {
		return ErrNoStream
	}
	if resp.StatusCode/100 != 2 {
		s := &session{c: c, endpoint: endpoint, id: headers.Get(mcp.HeaderSessionID)}
		return s.statusError("GET stream", resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("GET stream: content type %q, want text/event-stream", resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxEvent+1)
	var data bytes.Buffer
	event := ""
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data.Len() > 0 && (event == "" || event == "message") && !each(bytes.Clone(data.Bytes())) {
				return nil
			}
			data.Reset()
			event = ""
			continue
		case line[0] == ':':
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if data.Len()+len(value)+1 > maxEvent {
				return fmt.Errorf("GET stream: an event larger than %d bytes", maxEvent)
			}
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(value)
		case "event":
			event = strings.Clone(string(value))
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("GET stream: an event larger than %d bytes", maxEvent)
		}
		if ctx.Err() != nil {
			return nil
		}
		return &transportError{fmt.Errorf("GET stream: %w", err)}
	}
	return nil
}
