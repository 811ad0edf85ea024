package mcp

import (
	"bytes"
	"strconv"
	"testing"
)

// TestHandleSharedParts checks that HandleShared answers a list page in
// parts that join to Handle's body, that the items part is the catalog's
// own page (shared, not copied), and that Handle never returns parts.
func TestHandleSharedParts(t *testing.T) {
	s := NewServer(Config{})
	tools := make([]Tool, 30)
	for i := range tools {
		tools[i] = testTool("t" + strconv.Itoa(i))
	}
	cat := newFakeCatalog(t, 10, tools...)
	meta := `"_meta":{"` + MetaProtocolVersion + `":"2026-07-28","` + MetaClientCapabilities + `":{}}`
	stateless := &HTTPRequest{Method: "POST", Path: "/mcp/core", ContentType: "application/json",
		Accept: "application/json, text/event-stream", HasAccept: true, ContentLength: -1,
		ProtocolVersion: Version20260728, HasProtocolVersion: true, McpMethod: "tools/list", HasMcpMethod: true}
	for _, tc := range []struct {
		name string
		req  *HTTPRequest
		body string
		page int
	}{
		{"legacy first page", legacyReq(), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0},
		{"legacy last page", legacyReq(), `{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{"cursor":"p2"}}`, 2},
		{"stateless", stateless, `{"jsonrpc":"2.0","id":"\u00e9","method":"tools/list","params":{` + meta + `}}`, 0},
		{"stateless middle page", stateless, `{"jsonrpc":"2.0","id":-3,"method":"tools/list","params":{"cursor":"p1",` + meta + `}}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := s.HandleShared(tc.req, []byte(tc.body), cat)
			whole := s.Handle(tc.req, []byte(tc.body), cat)
			if whole.Reply == nil || whole.Reply.Parts != nil || whole.Reply.Status != 200 {
				t.Fatalf("Handle: %+v", whole.Reply)
			}
			r := shared.Reply
			if r == nil || r.Parts == nil || r.Body != nil {
				t.Fatalf("HandleShared: %+v", r)
			}
			if r.BodyLen() != len(whole.Reply.Body) {
				t.Fatalf("BodyLen %d, body %d bytes", r.BodyLen(), len(whole.Reply.Body))
			}
			shares := false
			for _, p := range r.Parts {
				shares = shares || (len(p) > 0 && &p[0] == &cat.pages[tc.page][0])
			}
			if !shares {
				t.Fatal("no part is the catalog's page")
			}
			r.Flatten()
			if !bytes.Equal(r.Body, whole.Reply.Body) || r.Parts != nil {
				t.Fatalf("joined parts\n%s\nHandle\n%s", r.Body, whole.Reply.Body)
			}
		})
	}
}
