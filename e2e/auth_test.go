package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolmesh/toolmesh/internal/authtest"
)

// bearerTransport adds the client's access token to every request, as an
// MCP client does once it holds one.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestGoSDKClientWithBearerToken: the official go-sdk client, given an
// http.Client that sends a bearer token, lists and calls tools on a route
// that requires one, in both eras; without a token it gets 401 with the
// challenge that points at the route's protected-resource metadata, which
// the gateway serves.
func TestGoSDKClientWithBearerToken(t *testing.T) {
	key := authtest.NewECKey(t, "e2e-1")
	issuer := authtest.NewIssuer(t, "/tenant", key).URL

	core := newToolService(t, "alpha", standardTools(""))
	portal := writePortal(t, portalRoute{Key: "core", Services: []*toolService{core}})
	cfg := filepath.Join(t.TempDir(), "toolmesh.yaml")
	doc := "resourceBase: https://mcp.example.com\nauth:\n  default:\n    issuers: [{issuer: " + issuer + "}]\n    scopes: [mcp:tools]\n"
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal, "--config", cfg)

	token := key.Sign(t, map[string]any{"iss": issuer, "sub": "e2e-user", "aud": "https://mcp.example.com/mcp/core",
		"exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools"})

	for _, tc := range []struct{ name, pin, want string }{
		{"stateless-default", "", "2026-07-28"},
		{"legacy-pinned", "2025-11-25", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint: gw.URL + "/mcp/core", DisableStandaloneSSE: true, MaxRetries: -1,
				HTTPClient: &http.Client{Transport: &bearerTransport{token: token, base: http.DefaultTransport}},
			}, &sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tc.want {
				t.Fatalf("version = %q, want %q", got, tc.want)
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
			if err != nil || res.IsError || textOf(t, res) != "5" {
				t.Fatalf("add: %v %+v", err, res)
			}
		})
	}

	t.Run("no token", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
		if cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
			Endpoint: gw.URL + "/mcp/core", DisableStandaloneSSE: true, MaxRetries: -1,
		}, nil); err == nil {
			cs.Close()
			t.Fatal("connected without a token")
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+"/mcp/core",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := `Bearer scope="mcp:tools", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp/core"`
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
			t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		mresp, err := http.Get(gw.URL + "/.well-known/oauth-protected-resource/mcp/core")
		if err != nil {
			t.Fatal(err)
		}
		defer mresp.Body.Close()
		var md map[string]any
		_ = json.NewDecoder(mresp.Body).Decode(&md)
		if code := mresp.StatusCode; code != 200 || md["resource"] != "https://mcp.example.com/mcp/core" || md["authorization_servers"].([]any)[0] != issuer {
			t.Fatalf("metadata: %d %v", code, md)
		}
	})
}
