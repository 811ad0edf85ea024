package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// routeHealth is the part of a route's /health line this test reads.
type routeHealth struct {
	Key             string `json:"key"`
	SnapshotVersion string `json:"snapshotVersion"`
	LastError       string `json:"lastError"`
	Tools           int    `json:"tools"`
}

// healthRoutes reads /health; the registry detail may be at the top level or
// under "registry".
func healthRoutes(t *testing.T, g *gateway) map[string]routeHealth {
	t.Helper()
	_, body := g.get(t, "/health")
	var doc struct {
		Routes   []routeHealth `json:"routes"`
		Registry *struct {
			Routes []routeHealth `json:"routes"`
		} `json:"registry"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("/health is not JSON: %v: %s", err, body)
	}
	routes := doc.Routes
	if doc.Registry != nil && len(doc.Registry.Routes) > 0 {
		routes = doc.Registry.Routes
	}
	out := map[string]routeHealth{}
	for _, r := range routes {
		out[r.Key] = r
	}
	return out
}

// listTools posts a legacy tools/list to a route and returns the tool names.
func listTools(t *testing.T, g *gateway, route string) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/mcp/"+route,
		bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("mcp-protocol-version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("tools/list %s: %v", route, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Result struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil {
		t.Fatalf("tools/list %s: %d %s", route, resp.StatusCode, b)
	}
	var names []string
	for _, tool := range out.Result.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestFailureIsolation breaks one route's Tool Service during refresh and
// changes the other's: the broken route keeps its snapshot and serves it, the
// other refreshes, readiness stays up and /health names the failing route.
func TestFailureIsolation(t *testing.T) {
	a := newToolService(t, "svc-a", standardTools("a_"))
	b := newToolService(t, "svc-b", standardTools("b_"))
	gw := startGateway(t, writePortal(t,
		portalRoute{Key: "alpha", Services: []*toolService{a}},
		portalRoute{Key: "beta", Services: []*toolService{b}},
	), "--refresh-interval", "200ms")

	before := healthRoutes(t, gw)
	if before["alpha"].SnapshotVersion == "" || before["beta"].SnapshotVersion == "" {
		t.Fatalf("routes without snapshots at start: %+v", before)
	}

	a.broken.Store(true)
	b.setTools(append(standardTools("b_"), map[string]any{
		"name": "b_new", "version": "1", "description": "Added while alpha is broken.", "inputSchema": objectSchema,
	}))

	eventually(t, 20*time.Second, "alpha to record an error and beta to refresh", func() bool {
		h := healthRoutes(t, gw)
		return h["alpha"].LastError != "" && h["beta"].SnapshotVersion != before["beta"].SnapshotVersion
	})
	after := healthRoutes(t, gw)
	if after["alpha"].SnapshotVersion != before["alpha"].SnapshotVersion {
		t.Errorf("alpha snapshot changed from %s to %s although its refresh failed",
			before["alpha"].SnapshotVersion, after["alpha"].SnapshotVersion)
	}
	if !strings.Contains(after["alpha"].LastError, "500") && !strings.Contains(strings.ToLower(after["alpha"].LastError), "manifest") {
		t.Errorf("alpha lastError %q does not say what failed", after["alpha"].LastError)
	}
	if code, body := gw.get(t, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d %s, want 200 while routes have snapshots", code, body)
	}
	if names := listTools(t, gw, "alpha"); len(names) != 7 {
		t.Errorf("alpha serves %v after its refresh failed, want its 7 tools", names)
	}
	eventually(t, 10*time.Second, "beta to list the new tool", func() bool {
		return slices.Contains(listTools(t, gw, "beta"), "b_new")
	})
}

// TestHealthShowsXDSNodes: /health reports the local data plane's node with
// the version last pushed to it and acknowledged.
func TestHealthShowsXDSNodes(t *testing.T) {
	a := newToolService(t, "svc-a", standardTools("a_"))
	gw := startGateway(t, writePortal(t, portalRoute{Key: "alpha", Services: []*toolService{a}}))
	var doc struct {
		XDS struct {
			Nodes []struct {
				NodeID         string `json:"nodeId"`
				Version        string `json:"version"`
				LastACKVersion string `json:"lastAckVersion"`
				Connected      bool   `json:"connected"`
			} `json:"nodes"`
		} `json:"xds"`
	}
	eventually(t, 10*time.Second, "the node to ACK its version", func() bool {
		_, body := gw.get(t, "/health")
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("/health: %v", err)
		}
		return len(doc.XDS.Nodes) == 1 && doc.XDS.Nodes[0].LastACKVersion != ""
	})
	n := doc.XDS.Nodes[0]
	if n.NodeID != "toolmesh-local" || !n.Connected || n.Version != n.LastACKVersion {
		t.Errorf("node status = %+v", n)
	}
}
