package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestListingBoundsExample runs the listingBounds example of
// docs/config.md: in every serving command that lists federated servers,
// a server listing 2,001 tools (under the built-in 10,000) is refused at
// the example's 2,000, and /health names the bound; the same server under
// a Portal entry whose listingBounds raises tools to 3,000 is listed.
func TestListingBoundsExample(t *testing.T) {
	up := manyToolsServer(t, 2001)
	for _, cmd := range []string{"run", "extproc"} {
		t.Run(cmd, func(t *testing.T) {
			dir, native := t.TempDir(), searchToolService(t)
			portal := writeFile(t, dir, "portal.yaml", `routes:
- key: capped
  toolServices:
  - {name: native, url: `+native+`}
  - {name: many, protocol: mcp, url: `+up+`}
- key: raised
  toolServices:
  - {name: native, url: `+native+`}
  - {name: many-raised, protocol: mcp, url: `+up+`, listingBounds: {tools: 3000}}
`)
			cfg := writeFile(t, dir, "toolmesh.yaml", docExample(t, "config.md", "listingBounds:", strings.NewReplacer()))
			p := startProcess(t, cmd, "--config", cfg, "--portal", portal)
			want := "tools/list: the server lists more than 2000 tools (toolmesh's listing bound listingBounds.tools; the listing is refused)"
			deadline := time.Now().Add(30 * time.Second)
			for {
				capped, raised := listedService(t, p, "capped", "many"), listedService(t, p, "raised", "many-raised")
				if strings.Contains(capped.LastError, want) && capped.Tools == 0 && raised.LastError == "" && raised.Tools == 2001 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("/health: capped service %+v, raised service %+v; want %q and 2001 tools", capped, raised, want)
				}
				select {
				case <-p.done:
					t.Fatal("toolmesh exited")
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
}

// listedService is /health's line of service svc in route.
func listedService(t *testing.T, p *process, route, svc string) (s struct {
	LastError string
	Tools     int
}) {
	t.Helper()
	code, body := httpGet(t, "http://"+p.addrs["admin"]+"/health")
	var doc healthDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil || code != http.StatusOK {
		t.Fatalf("/health = %d %s", code, body)
	}
	for _, r := range doc.Registry.Routes {
		for _, ss := range r.Services {
			if r.Key == route && ss.Name == svc {
				s.LastError, s.Tools = ss.LastError, ss.Tools
			}
		}
	}
	return s
}

// manyToolsServer is a 2026-07-28 MCP server on 127.0.0.1 that lists n
// tools on one page.
func manyToolsServer(t *testing.T, n int) string {
	t.Helper()
	var tools strings.Builder
	for i := range n {
		if i > 0 {
			tools.WriteByte(',')
		}
		fmt.Fprintf(&tools, `{"name":"t%d","inputSchema":{"type":"object"}}`, i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		result := `{}`
		switch m.Method {
		case "server/discover":
			result = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`
		case "tools/list":
			result = `{"resultType":"complete","tools":[` + tools.String() + `]}`
		default:
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}
