package procmsg

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/toolmesh/toolmesh/mcp"
)

func TestEncodedHead(t *testing.T) {
	tests := []struct {
		name   string
		reply  *mcp.Reply
		cached bool
	}{
		{"list page", &mcp.Reply{Status: 200, Headers: []mcp.Header{{Key: "Content-Type", Value: "application/json"}}}, true},
		{"gzip page", &mcp.Reply{Status: 200, Headers: []mcp.Header{{Key: "Content-Type", Value: "application/json"},
			{Key: "Content-Encoding", Value: "gzip"}, {Key: "Vary", Value: "Accept-Encoding"}}}, true},
		// Heads equal to a kept one but for a key's case or a value are
		// their own entries, each encoded as it is.
		{"list page, key in lower case", &mcp.Reply{Status: 200, Headers: []mcp.Header{{Key: "content-type", Value: "application/json"}}}, true},
		{"another content type", &mcp.Reply{Status: 200, Headers: []mcp.Header{{Key: "Content-Type", Value: "text/event-stream"}}}, true},
		{"error", &mcp.Reply{Status: 404, Headers: []mcp.Header{{Key: "Content-Type", Value: "application/json"}}}, true},
		{"no headers", &mcp.Reply{Status: 202}, true},
		{"session header", &mcp.Reply{Status: 200, Headers: []mcp.Header{{Key: "Content-Type", Value: "application/json"},
			{Key: "Mcp-Session-Id", Value: "s-1"}}}, false},
		{"too many headers", &mcp.Reply{Status: 200, Headers: []mcp.Header{{Key: "Vary", Value: "a"}, {Key: "Vary", Value: "b"},
			{Key: "Vary", Value: "c"}, {Key: "Vary", Value: "d"}, {Key: "Vary", Value: "e"}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := proto.Marshal(ImmediateHead(tt.reply, true, ""))
			if err != nil {
				t.Fatal(err)
			}
			first, err := EncodedHead(tt.reply, true)
			if err != nil {
				t.Fatal(err)
			}
			second, err := EncodedHead(tt.reply, true)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, want) || !bytes.Equal(second, want) {
				t.Fatalf("encoded head differs from proto.Marshal(ImmediateHead)")
			}
			if shared := &first[0] == &second[0]; shared != tt.cached {
				t.Errorf("second call shares the first's encoding: %v, want %v", shared, tt.cached)
			}
		})
	}
	// A head that differs only in having a body (which adds a
	// content-type), or in its status, is another entry.
	r := &mcp.Reply{Status: 200}
	a, _ := EncodedHead(r, true)
	b, _ := EncodedHead(&mcp.Reply{Status: 404}, true)
	c, _ := EncodedHead(r, false)
	if bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Errorf("heads with another status or without a body share an encoding")
	}
}
