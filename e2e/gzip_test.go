package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// compressionRecorder counts the answers net/http's transport received
// gzip-coded and decompressed for the client.
type compressionRecorder struct {
	base         http.RoundTripper
	uncompressed atomic.Int64
}

func (c *compressionRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil && resp.Uncompressed {
		c.uncompressed.Add(1)
	}
	return resp, err
}

// TestGoSDKLargeListGzip: the official go-sdk client, over net/http's
// default transport (which asks for gzip and decompresses transparently),
// lists a route of 600 tools, in both eras; the gateway answers its
// tools/list gzip-coded, and the client sees the same tools as a client
// whose transport asks for no coding.
func TestGoSDKLargeListGzip(t *testing.T) {
	var tools []map[string]any
	for i := range 600 {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("tool_%04d", i), "version": "1",
			"description": fmt.Sprintf("Looks up things of kind %d and returns them as JSON.", i),
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}})
	}
	svc := newToolService(t, "big", tools)
	gw := startGateway(t, writePortal(t, portalRoute{Key: "big", Services: []*toolService{svc}}))

	for _, tc := range []struct{ name, pin string }{{"stateless-default", ""}, {"legacy-pinned", "2025-11-25"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			list := func(tr *http.Transport) ([]string, int64) {
				t.Helper()
				rec := &compressionRecorder{base: tr}
				t.Cleanup(tr.CloseIdleConnections)
				c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
				cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{
					Endpoint: gw.URL + "/mcp/big", DisableStandaloneSSE: true, MaxRetries: -1,
					HTTPClient: &http.Client{Transport: rec},
				}, &sdk.ClientSessionOptions{ProtocolVersion: tc.pin})
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				defer cs.Close()
				before := rec.uncompressed.Load()
				var names []string
				for tool, err := range cs.Tools(ctx, nil) { // every page
					if err != nil {
						t.Fatalf("tools/list: %v", err)
					}
					names = append(names, tool.Name)
				}
				return names, rec.uncompressed.Load() - before
			}
			plain, plainGzip := list(&http.Transport{DisableCompression: true})
			names, gzipped := list(http.DefaultTransport.(*http.Transport).Clone())
			if len(names) != len(tools) || !slices.Equal(names, plain) {
				t.Fatalf("gzip client listed %d tools, identity client %d; equal %v", len(names), len(plain), slices.Equal(names, plain))
			}
			if plainGzip != 0 {
				t.Fatalf("a client asking for no coding got %d gzip-coded answers", plainGzip)
			}
			if gzipped == 0 {
				t.Fatal("no tools/list answer was gzip-coded for net/http's default transport")
			}
		})
	}
}
