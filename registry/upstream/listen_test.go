package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/registry/upstream"
)

// TestListen: the GET stream's messages come one per event (data lines
// joined, comments and other event types skipped), with the session's
// headers; each returning false ends it; 405 is ErrNoStream, another
// status a StatusError; an event past the bound ends the stream with an
// error naming the bound.
func TestListen(t *testing.T) {
	big := strings.Repeat("x", 2048)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method != http.MethodGet || r.Header.Get("Accept") != "text/event-stream":
			http.Error(w, "bad request", http.StatusBadRequest)
		case r.URL.Path == "/none":
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Header.Get("Mcp-Session-Id") != "s1":
			http.Error(w, "session not found", http.StatusNotFound)
		case r.URL.Path == "/big":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: " + big + "\n\n"))
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(": keep-alive\n\nevent: message\ndata: {\"a\":\ndata: 1}\n\nevent: other\ndata: {\"skip\":1}\n\ndata: {\"b\":2}\n\ndata: {\"c\":3}\n\n"))
		}
	}))
	defer srv.Close()
	c := upstream.New(upstream.Options{})
	h := http.Header{"Mcp-Session-Id": {"s1"}}

	var got []string
	err := c.Listen(context.Background(), srv.URL+"/mcp", h, 1024, func(msg []byte) bool {
		got = append(got, string(msg))
		return len(got) < 2
	})
	if err != nil || strings.Join(got, "|") != "{\"a\":\n1}|{\"b\":2}" {
		t.Errorf("messages %q, error %v; want the two first, then stop", got, err)
	}
	if err := c.Listen(context.Background(), srv.URL+"/none", h, 1024, nil); !errors.Is(err, upstream.ErrNoStream) {
		t.Errorf("405: %v, want ErrNoStream", err)
	}
	var se *upstream.StatusError
	if err := c.Listen(context.Background(), srv.URL+"/mcp", http.Header{"Mcp-Session-Id": {"gone"}}, 1024, nil); !errors.As(err, &se) || se.Status != 404 {
		t.Errorf("unknown session: %v, want a 404 StatusError", err)
	}
	if err := c.Listen(context.Background(), srv.URL+"/big", h, 1024, func([]byte) bool { return true }); err == nil || !strings.Contains(err.Error(), "larger than 1024 bytes") {
		t.Errorf("big event: %v, want the bound named", err)
	}
}
