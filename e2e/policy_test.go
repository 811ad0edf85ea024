package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolmesh/toolmesh/internal/authtest"
)

// TestGoSDKClientsWithRoles: two official go-sdk clients, one with an
// admin's token and one with a developer's, use a route with the worked
// example's policies (docs/authorization.md: staff may use the route, only
// admins a destructive tool), in both eras. The developer's list lacks the
// tools only admins may call, and calling one fails exactly as calling a
// tool that does not exist; the admin sees and calls it.
func TestGoSDKClientsWithRoles(t *testing.T) {
	key := authtest.NewECKey(t, "e2e-roles")
	issuer := authtest.NewIssuer(t, "/realms/tools", key).URL

	// standardTools: add is read-only; the others declare no hints, so
	// they are destructive as the MCP specification says to assume.
	core := newToolService(t, "alpha", standardTools(""))
	portal := writePortal(t, portalRoute{Key: "core", Services: []*toolService{core}})
	cfg := filepath.Join(t.TempDir(), "toolmesh.yaml")
	doc := `resourceBase: https://mcp.example.com
auth:
  default:
    issuers: [{issuer: ` + issuer + `}]
    scopes: [mcp:tools]
policies:
  routes:
    core:
      - name: staff-only
        effect: allow
        when: '"dev" in caller.claims.roles || "admin" in caller.claims.roles'
      - name: admins-only-destructive
        effect: deny
        when: 'tool.annotations.destructiveHint && !("admin" in caller.claims.roles)'
`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg)

	token := func(sub, role string) string {
		return key.Sign(t, map[string]any{"iss": issuer, "sub": sub, "aud": "https://mcp.example.com/mcp/core",
			"exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools", "roles": []string{role}})
	}
	adminTok, devTok := token("ann", "admin"), token("dan", "dev")

	for _, era := range []struct{ name, pin, want string }{
		{"stateless", "", "2026-07-28"},
		{"legacy", "2025-11-25", "2025-11-25"},
	} {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			connect := func(tok string) *sdk.ClientSession {
				t.Helper()
				c := sdk.NewClient(&sdk.Implementation{Name: "e2e-roles", Version: "1.0.0"}, nil)
				cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
					Endpoint: gw.URL + "/mcp/core", DisableStandaloneSSE: true, MaxRetries: -1,
					HTTPClient: &http.Client{Transport: &bearerTransport{token: tok, base: http.DefaultTransport}},
				}, &sdk.ClientSessionOptions{ProtocolVersion: era.pin})
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				t.Cleanup(func() { cs.Close() })
				if got := cs.InitializeResult().ProtocolVersion; got != era.want {
					t.Fatalf("version = %q, want %q", got, era.want)
				}
				return cs
			}
			admin, dev := connect(adminTok), connect(devTok)
			names := func(cs *sdk.ClientSession) []string {
				t.Helper()
				var out []string
				for tl, err := range cs.Tools(ctx, nil) {
					if err != nil {
						t.Fatalf("tools/list: %v", err)
					}
					out = append(out, tl.Name)
				}
				slices.Sort(out)
				return out
			}
			adminTools, devTools := names(admin), names(dev)
			if !slices.Contains(adminTools, "echo") || len(adminTools) != 7 {
				t.Fatalf("the admin lists %v, want the 7 tools", adminTools)
			}
			if !slices.Equal(devTools, []string{"add"}) {
				t.Fatalf("the developer lists %v, want only the read-only add", devTools)
			}

			// The admin-only tool: the admin calls it, the developer gets
			// what a tool that does not exist gets.
			res, err := admin.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
			if err != nil || res.IsError {
				t.Fatalf("the admin's echo: %v %+v", err, res)
			}
			_, hiddenErr := dev.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
			_, unknownErr := dev.CallTool(ctx, &sdk.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{"message": "hi"}})
			if hiddenErr == nil || unknownErr == nil ||
				hiddenErr.Error() != strings.ReplaceAll(unknownErr.Error(), "no_such_tool", "echo") ||
				!strings.Contains(hiddenErr.Error(), "unknown tool: echo") {
				t.Fatalf("the developer's echo: %v\nan unknown tool: %v", hiddenErr, unknownErr)
			}
			res, err = dev.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
			if err != nil || res.IsError || textOf(t, res) != "5" {
				t.Fatalf("the developer's add: %v %+v", err, res)
			}
		})
	}
}
