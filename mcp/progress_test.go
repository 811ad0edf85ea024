package mcp

import (
	"encoding/json"
	"testing"
)

func TestProgressEvents(t *testing.T) {
	msg := "line\n\"two\" ✓"
	c := &Call{ID: json.RawMessage(`1`), ProgressToken: json.RawMessage(`"tok"`)}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{name: "progress with total and message", got: ProgressEvent(c, Progress{Progress: []byte("1"), Total: []byte("3"), Message: &msg}),
			want: "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tok\",\"progress\":1,\"total\":3,\"message\":\"line\\n\\\"two\\\" ✓\"}}\n\n"},
		{name: "progress only", got: ProgressEvent(c, Progress{Progress: []byte("0.5")}),
			want: "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tok\",\"progress\":0.5}}\n\n"},
		{name: "one-line result", got: ResultEvent([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)),
			want: "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"},
		{name: "result over several lines", got: ResultEvent([]byte("{\"jsonrpc\":\"2.0\",\r\n\"id\":1,\n\"result\":{}}\n")),
			want: "event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\ndata: \"result\":{}}\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if string(tc.got) != tc.want {
				t.Errorf("got %q\nwant %q", tc.got, tc.want)
			}
		})
	}
}
