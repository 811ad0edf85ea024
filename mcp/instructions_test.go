package mcp

import (
	"encoding/json"
	"testing"
)

// instructedCatalog is a route with instructions of its own and nothing
// else beyond tools.
type instructedCatalog struct {
	*fakeCatalog
	instructions string
}

func (c instructedCatalog) Offers() Offers { return Offers{Instructions: c.instructions} }

func (c instructedCatalog) ItemsPage(ItemKind, string) ([]byte, string, bool) {
	return []byte("[]"), "", true
}

// TestRouteInstructions: a route's instructions follow the gateway's in
// initialize (legacy era) and server/discover (2026-07-28), and a route
// without any keeps the answers serialized at start.
func TestRouteInstructions(t *testing.T) {
	route := "Route rules.\n## MCP server \"gh\"\nUse \"quotes\" <and> ü."
	for _, tc := range []struct {
		name, gateway, route, want string
	}{
		{"route only", "", route, route},
		{"gateway and route", "Gateway rules.", route, "Gateway rules.\n\n" + route},
		{"gateway only", "Gateway rules.", "", "Gateway rules."},
		{"none", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(Config{Instructions: tc.gateway})
			cat := instructedCatalog{testCatalog(t), tc.route}
			check := func(era string, out Outcome) {
				t.Helper()
				d := checkReply(t, out.Reply, 200, 0, "1")
				raw, ok := d.result["instructions"]
				if tc.want == "" {
					if ok {
						t.Fatalf("%s: instructions %s, want none", era, raw)
					}
					return
				}
				var got string
				if err := json.Unmarshal(raw, &got); err != nil || got != tc.want {
					t.Fatalf("%s: instructions %q (%v), want %q", era, got, err, tc.want)
				}
				if string(d.result["capabilities"]) == "" {
					t.Fatalf("%s: no capabilities", era)
				}
			}
			legacy := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
			check("initialize", s.Handle(legacyReq(), []byte(legacy), cat))
			check("server/discover", s.Handle(modernReq("server/discover", ""), []byte(modernBody("1", "server/discover", "")), cat))
		})
	}
}
