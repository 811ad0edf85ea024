package mcp

import (
	"encoding/json"
	"strings"
	"testing"
)

const listenMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func listenRequest(accept string) *HTTPRequest {
	return &HTTPRequest{Method: "POST", ContentType: "application/json", Accept: accept, HasAccept: accept != "",
		ProtocolVersion: Version20260728, HasProtocolVersion: true, McpMethod: "subscriptions/listen", HasMcpMethod: true}
}

// TestListChangedCapabilities: listChanged is true only with ListChanged,
// in initialize and server/discover alike.
func TestListChangedCapabilities(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := NewServer(Config{ListChanged: on})
		init := s.Handle(&HTTPRequest{Method: "POST", ContentType: "application/json"},
			[]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`), nil)
		disc := s.Handle(&HTTPRequest{Method: "POST", ContentType: "application/json"},
			[]byte(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`), nil)
		for name, out := range map[string]Outcome{"initialize": init, "server/discover": disc} {
			var r struct {
				Result struct {
					Capabilities struct {
						Tools struct {
							ListChanged *bool `json:"listChanged"`
						} `json:"tools"`
					} `json:"capabilities"`
				} `json:"result"`
			}
			if err := json.Unmarshal(out.Reply.Body, &r); err != nil {
				t.Fatal(err)
			}
			got := r.Result.Capabilities.Tools.ListChanged
			if (got != nil && *got) != on {
				t.Errorf("ListChanged %v: %s tools.listChanged = %v", on, name, got)
			}
		}
	}
}

// TestListen: subscriptions/listen becomes a Listen with the opted-in
// kinds the route serves, or an error.
func TestListen(t *testing.T) {
	s := NewServer(Config{ListChanged: true})
	tests := []struct {
		name, params, accept string
		want                 *Listen
		status, code         int
	}{
		{"tools", `"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["x:/y"]}`,
			"application/json, text/event-stream", &Listen{ID: json.RawMessage(`3`), Tools: true}, 0, 0},
		{"no filter", ``, "", &Listen{ID: json.RawMessage(`3`)}, 0, 0},
		{"false is off", `"notifications":{"toolsListChanged":false}`, "text/event-stream", &Listen{ID: json.RawMessage(`3`)}, 0, 0},
		{"filter not an object", `"notifications":[1]`, "", nil, 200, CodeInvalidParams},
		{"accept without event streams", `"notifications":{}`, "application/json", nil, 406, CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			params := listenMeta
			if tc.params != "" {
				params += "," + tc.params
			}
			out := s.Handle(listenRequest(tc.accept), []byte(`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{`+params+`}}`), nil)
			if tc.want != nil {
				if out.Listen == nil || string(out.Listen.ID) != string(tc.want.ID) || out.Listen.Tools != tc.want.Tools ||
					out.Listen.Prompts != tc.want.Prompts || out.Listen.Resources != tc.want.Resources {
					t.Fatalf("got %+v %+v, want %+v", out.Listen, out.Reply, tc.want)
				}
				return
			}
			if out.Reply == nil || out.Reply.Status != tc.status || !strings.Contains(string(out.Reply.Body), `"code":`+itoa(tc.code)) {
				t.Fatalf("got %+v, want %d with code %d", out.Reply, tc.status, tc.code)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestCheckStream: the legacy GET rules.
func TestCheckStream(t *testing.T) {
	on, off := NewServer(Config{ListChanged: true}), NewServer(Config{})
	tests := []struct {
		name   string
		s      *Server
		r      HTTPRequest
		status int // 0: a Listen
	}{
		{"open", on, HTTPRequest{Method: "GET", Accept: "text/event-stream", HasAccept: true}, 0},
		{"off", off, HTTPRequest{Method: "GET", Accept: "text/event-stream", HasAccept: true}, 405},
		{"2026 client", on, HTTPRequest{Method: "GET", Accept: "text/event-stream", HasAccept: true,
			ProtocolVersion: Version20260728, HasProtocolVersion: true}, 405},
		{"no accept", on, HTTPRequest{Method: "GET"}, 406},
		{"json only", on, HTTPRequest{Method: "GET", Accept: "application/json", HasAccept: true}, 406},
		{"bad origin", on, HTTPRequest{Method: "GET", Accept: "text/event-stream", HasAccept: true,
			Origin: "https://evil.example", HasOrigin: true}, 403},
		{"unknown version", on, HTTPRequest{Method: "GET", Accept: "text/event-stream", HasAccept: true,
			ProtocolVersion: "1999-01-01", HasProtocolVersion: true}, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, r := tc.s.CheckStream(&tc.r, nil)
			switch {
			case tc.status == 0 && (l == nil || !l.Tools || l.ID != nil):
				t.Fatalf("got %+v %+v, want a legacy Listen with tools", l, r)
			case tc.status != 0 && (r == nil || r.Status != tc.status):
				t.Fatalf("got %+v %+v, want %d", l, r, tc.status)
			}
		})
	}
}
