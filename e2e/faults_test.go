package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFaults injects, one after another, the faults a mesh throws at the
// registry — a Portal that fails, answers garbage or lists no routes, and
// Tool Services whose manifests hang, turn to garbage, grow huge or vanish —
// into a running gateway with a Redis store, and checks each time what
// clients see (the same tools, calls still answered), what /health says (the
// error, on the right route) and that no snapshot was lost. Then it heals the
// fault and checks the route refreshes again.
func TestFaults(t *testing.T) {
	redisURL := startRedis(t).url
	a := newToolService(t, "svc-a", standardTools("a_"))
	b := newToolService(t, "svc-b", standardTools("b_"))
	listing := writePortal(t,
		portalRoute{Key: "alpha", Services: []*toolService{a}},
		portalRoute{Key: "beta", Services: []*toolService{b}},
	)
	portal := newSwitchablePortal(t, listing)
	gw := startGateway(t, "", "--portal", portal.url, "--redis", redisURL,
		"--refresh-interval", "150ms", "--fetch-timeout", "400ms")

	wantA, wantB := listTools(t, gw, "alpha"), listTools(t, gw, "beta")
	before := healthRoutes(t, gw)

	check := func(t *testing.T) {
		t.Helper()
		if got := listTools(t, gw, "alpha"); !slices.Equal(got, wantA) {
			t.Errorf("alpha lists %v, want %v", got, wantA)
		}
		if got := listTools(t, gw, "beta"); !slices.Equal(got, wantB) {
			t.Errorf("beta lists %v, want %v", got, wantB)
		}
		if code, body := gw.get(t, "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz = %d %s", code, body)
		}
		h := healthRoutes(t, gw)
		for _, k := range []string{"alpha", "beta"} {
			if h[k].SnapshotVersion != before[k].SnapshotVersion {
				t.Errorf("%s snapshot changed from %s to %s during the fault", k, before[k].SnapshotVersion, h[k].SnapshotVersion)
			}
		}
		// Calls are unaffected by a broken manifest.
		res := postJSON(t, gw.URL+"/mcp/beta", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"b_add","arguments":{"a":20,"b":22}}}`)
		if !strings.Contains(res, `"text":"42"`) {
			t.Errorf("call during the fault = %s", res)
		}
	}

	for _, tc := range []struct {
		name   string
		route  string // the route whose health must name the error; "" = the Portal's
		inject func()
		heal   func()
	}{
		{"portal 503", "", func() { portal.setMode("down") }, func() { portal.setMode("") }},
		{"portal garbage", "", func() { portal.setMode("garbage") }, func() { portal.setMode("") }},
		{"portal lists no routes", "", func() { portal.setMode("empty") }, func() { portal.setMode("") }},
		{"manifest hangs", "alpha", func() { a.setFault("hang") }, func() { a.setFault("") }},
		{"manifest garbage", "alpha", func() { a.setFault("garbage") }, func() { a.setFault("") }},
		{"manifest huge", "beta", func() { b.setFault("huge") }, func() { b.setFault("") }},
		{"manifest 500", "beta", func() { b.broken.Store(true) }, func() { b.broken.Store(false) }},
		{"tool service gone", "alpha", func() { a.setFault("gone") }, func() { a.setFault("") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.inject()
			eventually(t, 15*time.Second, "the fault to show in /health", func() bool {
				if tc.route == "" {
					return portalError(t, gw) != ""
				}
				return healthRoutes(t, gw)[tc.route].LastError != ""
			})
			check(t)
			tc.heal()
			eventually(t, 15*time.Second, "the route to recover", func() bool {
				if tc.route == "" {
					return portalError(t, gw) == ""
				}
				return healthRoutes(t, gw)[tc.route].LastError == ""
			})
			check(t)
		})
	}
}

// portalError reads /health's Portal error.
func portalError(t *testing.T, g *gateway) string {
	t.Helper()
	_, body := g.get(t, "/health")
	var doc struct {
		Registry struct {
			PortalError string `json:"portalError"`
		} `json:"registry"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("/health: %v", err)
	}
	return doc.Registry.PortalError
}

// switchablePortal is an HTTP Portal that can fail in several ways.
type switchablePortal struct {
	url  string
	mode atomic.Pointer[string] // "", "down", "garbage" or "empty"
}

func newSwitchablePortal(t *testing.T, listingFile string) *switchablePortal {
	t.Helper()
	listing, err := os.ReadFile(filepath.Clean(listingFile))
	if err != nil {
		t.Fatal(err)
	}
	p := &switchablePortal{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/routes", func(w http.ResponseWriter, r *http.Request) {
		mode := ""
		if m := p.mode.Load(); m != nil {
			mode = *m
		}
		w.Header().Set("content-type", "application/json")
		switch mode {
		case "down":
			http.Error(w, "portal down", http.StatusServiceUnavailable)
		case "garbage":
			w.Write([]byte(`{"routes": [ {"key": `))
		case "empty":
			w.Write([]byte(`{"routes":[]}`))
		default:
			w.Write(listing)
		}
	})
	p.url = newLoopbackServer(t, mux).URL
	return p
}

func (p *switchablePortal) setMode(m string) { p.mode.Store(&m) }
