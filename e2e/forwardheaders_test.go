package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestClientHeadersAllowList: through the local data plane, a client of
// either era sends Cookie, X-Api-Key, Proxy-Authorization, its own
// X-Forwarded-Client-Cert and two custom headers with every call. A native
// Tool Service, a 2026-07-28 and a legacy MCP server see none of the
// credentials; the custom header a service's forwardHeaders names reaches
// it, the other custom header reaches none; tracing and the request id do.
func TestClientHeadersAllowList(t *testing.T) {
	native := newToolService(t, "native", standardTools(""))
	up := newFedUpstream(t)
	dir := t.TempDir()
	listing := map[string]any{"routes": []any{map[string]any{"key": "fed", "toolServices": []any{
		map[string]any{"name": "native", "url": native.srv.URL, "forwardHeaders": []string{"x-tenant"}},
		map[string]any{"name": "new", "protocol": "mcp", "url": up.URL + "/new", "toolPrefix": "n_", "forwardHeaders": []string{"x-tenant"}},
		map[string]any{"name": "old", "protocol": "mcp", "url": up.URL + "/old", "toolPrefix": "o_", "forwardHeaders": []string{"x-tenant"}},
	}}}}
	b, _ := json.Marshal(listing)
	portal := filepath.Join(dir, "portal.json")
	if err := os.WriteFile(portal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, portal)
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Cookie", "session=client-cookie")
		r.Header.Set("X-Api-Key", "client-api-key")
		r.Header.Set("Proxy-Authorization", "Basic Y2xpZW50OnByb3h5")
		r.Header.Set("X-Forwarded-Client-Cert", "By=spiffe://evil/gw;URI=spiffe://example.org/ns/admin/sa/root")
		r.Header.Set("X-Tenant", "acme")
		r.Header.Set("X-Other", "not-forwarded")
		r.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		return http.DefaultTransport.RoundTrip(r)
	})}

	for _, tc := range []struct{ name, pin string }{{"client-2026", ""}, {"client-legacy", "2025-11-25"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: gw.URL + "/mcp/fed", DisableStandaloneSSE: true,
				MaxRetries: -1, HTTPClient: client}, &sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			seen := map[string]func() http.Header{
				"native": func() http.Header { return *native.lastHeaders.Load() },
				"new":    func() http.Header { return up.headers("/new") },
				"old":    func() http.Header { return up.headers("/old") },
			}
			for svc, call := range map[string]sdk.CallToolParams{
				"native": {Name: "echo", Arguments: map[string]any{"message": "hi"}},
				"new":    {Name: "n_whoami", Arguments: map[string]any{"word": "x"}},
				"old":    {Name: "o_whoami", Arguments: map[string]any{"word": "x"}},
			} {
				res, err := cs.CallTool(ctx, &call)
				if err != nil || res.IsError {
					t.Fatalf("%s: tools/call %s: %v %+v", svc, call.Name, err, res)
				}
				h := seen[svc]()
				for _, k := range []string{"Cookie", "X-Api-Key", "Proxy-Authorization", "X-Forwarded-Client-Cert", "X-Other"} {
					if v := h.Get(k); v != "" {
						t.Errorf("%s received the client's %s: %q", svc, k, v)
					}
				}
				if h.Get("X-Tenant") != "acme" {
					t.Errorf("%s: X-Tenant = %q, want the client's (its forwardHeaders)", svc, h.Get("X-Tenant"))
				}
				if h.Get("Traceparent") == "" || h.Get("X-Request-Id") == "" {
					t.Errorf("%s: traceparent %q, x-request-id %q: tracing and the request id must pass", svc, h.Get("Traceparent"), h.Get("X-Request-Id"))
				}
			}
		})
	}
}
