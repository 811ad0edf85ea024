package mcp

import (
	"strings"
	"testing"
)

// statefulCatalog is a route whose legacy servers keep per-client state.
type statefulCatalog struct {
	*fakeCatalog
	off Offers
}

func (c statefulCatalog) Offers() Offers { return c.off }

// TestClientStateMethods: logging/setLevel and resources/(un)subscribe
// are forwarded, and declared in initialize, only to legacy clients of a
// route with a server that takes them (ADR 0022); otherwise, and in the
// 2026-07-28 era, they do not exist.
func TestClientStateMethods(t *testing.T) {
	s := NewServer(Config{})
	full := statefulCatalog{testCatalog(t), Offers{Resources: true, Logging: true, Subscribe: true}}
	none := statefulCatalog{testCatalog(t), Offers{Resources: true}}
	setLevel := `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`
	subscribe := `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"test://x"}}`
	for _, tc := range []struct {
		name    string
		cat     Catalog
		body    string
		forward string // the Forward's name, "-" for none
		code    int
	}{
		{"setLevel offered", full, setLevel, "", 0},
		{"subscribe offered", full, subscribe, "test://x", 0},
		{"unsubscribe offered", full, strings.Replace(subscribe, "resources/subscribe", "resources/unsubscribe", 1), "test://x", 0},
		{"setLevel without a level", full, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{}}`, "-", CodeInvalidParams},
		{"subscribe without a uri", full, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{}}`, "-", CodeInvalidParams},
		{"setLevel not offered", none, setLevel, "-", CodeMethodNotFound},
		{"subscribe not offered", none, subscribe, "-", CodeMethodNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := s.Handle(legacyReq(), []byte(tc.body), tc.cat)
			if tc.forward != "-" {
				if out.Forward == nil || out.Forward.Name != tc.forward || out.Forward.Era != EraLegacy {
					t.Fatalf("outcome %+v, want a legacy Forward of %q", out, tc.forward)
				}
				return
			}
			checkReply(t, out.Reply, 200, tc.code, "1")
		})
	}
	// The 2026-07-28 era has no such methods.
	out := s.Handle(modernReq("logging/setLevel", ""), []byte(modernBody("1", "logging/setLevel", `"level":"debug"`)), full)
	if out.Forward != nil {
		t.Fatalf("a 2026-07-28 setLevel was forwarded")
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	d := checkReply(t, s.Handle(legacyReq(), []byte(init), full).Reply, 200, 0, "1")
	if caps := string(d.result["capabilities"]); !strings.Contains(caps, `"logging":{}`) || !strings.Contains(caps, `"resources":{"subscribe":true,"listChanged":false}`) {
		t.Errorf("capabilities %s", caps)
	}
	d = checkReply(t, s.Handle(legacyReq(), []byte(init), none).Reply, 200, 0, "1")
	if caps := string(d.result["capabilities"]); strings.Contains(caps, "logging") || strings.Contains(caps, "subscribe") {
		t.Errorf("capabilities %s on a route without per-client state", caps)
	}
}
