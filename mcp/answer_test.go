package mcp

import "testing"

// TestClientAnswer: a client's response with a string id comes back as an
// Answer (with the 202 Reply a caller that does not deliver it sends); any
// other response or notification is a plain 202.
func TestClientAnswer(t *testing.T) {
	s := NewServer(Config{})
	for _, tc := range []struct {
		name, body string
		answer     string // the Answer's id, "" for none
	}{
		{"result, string id", `{"jsonrpc":"2.0","id":"tmr1.k.p.m","result":{"action":"accept"}}`, `"tmr1.k.p.m"`},
		{"error, string id", `{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"no"}}`, `"x"`},
		{"result, number id", `{"jsonrpc":"2.0","id":3,"result":{}}`, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := s.HandleShared(legacyReq(), []byte(tc.body), nil)
			if out.Reply == nil || out.Reply.Status != 202 || out.Call != nil || out.Forward != nil || out.Listen != nil {
				t.Fatalf("outcome %+v, want a 202 Reply", out)
			}
			switch {
			case tc.answer == "" && out.Answer != nil:
				t.Errorf("Answer %s, want none", out.Answer.ID)
			case tc.answer != "" && (out.Answer == nil || string(out.Answer.ID) != tc.answer):
				t.Errorf("Answer %+v, want id %s", out.Answer, tc.answer)
			}
		})
	}
}
