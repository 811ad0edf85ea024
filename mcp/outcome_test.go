package mcp

import "testing"

// TestOutcomeKind: each request gets the kind of outcome its member holds.
func TestOutcomeKind(t *testing.T) {
	s := NewServer(Config{ListChanged: true})
	for _, tc := range []struct {
		req  *HTTPRequest
		body string
		want OutcomeKind
	}{
		{legacyReq(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, OutcomeReply},
		{legacyReq(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, OutcomeCall},
		{legacyReq(), `{"jsonrpc":"2.0","id":"s1","result":{}}`, OutcomeAnswer},
		{legacyReq(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, OutcomeReply},
		{modernReq("subscriptions/listen", ""), `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"_meta":{"` +
			MetaProtocolVersion + `":"2026-07-28","` + MetaClientCapabilities + `":{}}}}`, OutcomeListen},
	} {
		out := s.Handle(tc.req, []byte(tc.body), testCatalog(t))
		if got := out.Kind(); got != tc.want {
			t.Errorf("%s: kind %d, want %d (%+v)", tc.body, got, tc.want, out)
		}
	}
}
