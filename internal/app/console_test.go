package app

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/xds"
)

// adminToken is the token of the tests; long enough for readAdminToken.
const adminToken = "console-test-token-0123456789abcdef"

// writeFile writes body to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// adminGet sends GET path to the admin listener with the Authorization
// header auth ("" for none).
func adminGet(t *testing.T, addr, path, auth string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	// No redirect following: /console answers one.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestAdminToken runs the admin listener with a token read from a file
// (flag), from a file (config) and from an environment variable (config),
// and checks who gets through where.
func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := writeFile(t, dir, "token", adminToken+"\n") // the line break is dropped
	t.Setenv("TOOLMESH_CONSOLE_TEST_TOKEN", adminToken)
	sources := []struct {
		name string
		args []string
	}{
		{"flag file", []string{"--admin-token-file", tokenFile}},
		{"config file", []string{"--config", writeFile(t, dir, "file.yaml", "adminToken: {file: "+tokenFile+"}\n")}},
		{"config env", []string{"--config", writeFile(t, dir, "env.yaml", "adminToken: {env: TOOLMESH_CONSOLE_TEST_TOKEN}\n")}},
	}
	bearer := "Bearer " + adminToken
	tests := []struct {
		name, path, auth string
		want             int
		challenge        string // a WWW-Authenticate value that must be there on 401
	}{
		{"liveness needs no token", "/healthz", "", http.StatusOK, ""},
		{"readiness needs no token", "/readyz", "", http.StatusOK, ""},
		{"liveness ignores a wrong token", "/healthz", "Bearer nope", http.StatusOK, ""},
		{"health without token", "/health", "", http.StatusUnauthorized, `Bearer realm="toolmesh admin"`},
		{"health with wrong token", "/health", "Bearer wrong-token-0123456789", http.StatusUnauthorized, `Bearer realm="toolmesh admin", error="invalid_token"`},
		{"health with a prefix of the token", "/health", "Bearer " + adminToken[:20], http.StatusUnauthorized, `error="invalid_token"`},
		{"health with the token and more", "/health", bearer + "x", http.StatusUnauthorized, `error="invalid_token"`},
		{"health with token", "/health", bearer, http.StatusOK, ""},
		{"scheme is case-insensitive", "/health", "bearer " + adminToken, http.StatusOK, ""},
		{"metrics without token", "/metrics", "", http.StatusUnauthorized, `Basic realm="toolmesh admin", charset="UTF-8"`},
		{"metrics with token", "/metrics", bearer, http.StatusOK, ""},
		{"console page without token", "/console/", "", http.StatusUnauthorized, "Basic"},
		{"console page, token as Basic password", "/console/", basic("ops", adminToken), http.StatusOK, ""},
		{"console page, Basic with wrong password", "/console/", basic("ops", "nope"), http.StatusUnauthorized, `error="invalid_token"`},
		{"console page, token as Basic user", "/console/", basic(adminToken, ""), http.StatusUnauthorized, "Bearer"},
		{"console state without token", "/console/api/state", "", http.StatusUnauthorized, "Bearer"},
		{"console state with token", "/console/api/state", bearer, http.StatusOK, ""},
		{"unknown scheme", "/console/api/state", "Token " + adminToken, http.StatusUnauthorized, "Bearer"},
		{"unknown path still needs the token", "/nothing", "", http.StatusUnauthorized, "Bearer"},
		{"unknown path with token", "/nothing", bearer, http.StatusNotFound, ""},
		{"an unclean path is not an open one", "/./healthz", "", http.StatusUnauthorized, "Bearer"},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			p := startProcess(t, append([]string{"run"}, src.args...)...)
			admin := p.addrs["admin"]
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp := adminGet(t, admin, tt.path, tt.auth)
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != tt.want {
						t.Fatalf("GET %s = %d, want %d: %s", tt.path, resp.StatusCode, tt.want, body)
					}
					got := resp.Header.Values("WWW-Authenticate")
					if tt.want != http.StatusUnauthorized {
						if len(got) != 0 {
							t.Errorf("WWW-Authenticate %q on %d", got, resp.StatusCode)
						}
						return
					}
					if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tt.challenge) }) {
						t.Errorf("WWW-Authenticate %q lacks %q", got, tt.challenge)
					}
					if strings.Contains(string(body), adminToken) {
						t.Errorf("401 body shows the token: %s", body)
					}
				})
			}
		})
	}
}

// TestAdminWithoutToken: with no token configured every admin endpoint
// answers without one, as before the token existed.
func TestAdminWithoutToken(t *testing.T) {
	p := startProcess(t, "run")
	for _, path := range []string{"/healthz", "/readyz", "/health", "/metrics", "/console/", "/console/api/state", "/console/console.js"} {
		resp := adminGet(t, p.addrs["admin"], path, "")
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, resp.StatusCode)
		}
	}
}

// TestAdminTokenStartErrors: a token that cannot be read, or is too short,
// stops the start before anything listens, with a message naming the key
// and the flag.
func TestAdminTokenStartErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"--admin-token-file", filepath.Join(dir, "absent")}, "read credential file"},
		{"empty file", []string{"--admin-token-file", writeFile(t, dir, "empty", "\n")}, "empty value"},
		{"short token", []string{"--admin-token-file", writeFile(t, dir, "short", "abc123\n")}, "6 characters is too short"},
		{"unset env", []string{"--config", writeFile(t, dir, "env.yaml", "adminToken: {env: TOOLMESH_CONSOLE_TEST_UNSET}\n")}, "TOOLMESH_CONSOLE_TEST_UNSET is not set"},
		{"both file and env", []string{"--config", writeFile(t, dir, "both.yaml", "adminToken: {env: X, file: /y}\n")}, "adminToken: file and env are exclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			listened := false
			h := hooks{listening: func(string, string) { listened = true }}
			args := append([]string{"run", "--listen", "127.0.0.1:0", "--extproc-listen", "127.0.0.1:0",
				"--xds-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, tt.args...)
			var stderr lockedBuffer
			if code := execute(t.Context(), args, &stderr, &stderr, h); code == exitOK {
				t.Errorf("exit code 0")
			}
			if listened {
				t.Errorf("toolmesh listened with a bad admin token")
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr.String())
			}
			if tt.name != "both file and env" && !strings.Contains(stderr.String(), "adminToken, --admin-token-file") {
				t.Errorf("stderr does not name the key and the flag:\n%s", stderr.String())
			}
		})
	}
}

// consoleFixture is a gateway with one healthy route in search mode, one
// route whose native Tool Service's manifest answers 500 and whose
// federated MCP server answers 500, an SRE override, a Redis URL with a
// password (nothing listens there) and a credential from the environment.
type consoleFixture struct {
	p          *process
	redisPW    string
	credential string
	sawCred    *atomic.Bool // the MCP server was sent the credential
}

func startConsoleFixture(t *testing.T) *consoleFixture {
	t.Helper()
	f := &consoleFixture{redisPW: "s3cret-redis-pw-Zq7", credential: "s3cret-credential-Xk9", sawCred: &atomic.Bool{}}
	good := http.NewServeMux()
	good.HandleFunc("GET /manifest", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[
			{"name":"lookup","version":"1","description":"Looks a thing up.","inputSchema":{"type":"object"}},
			{"name":"fetch","version":"1","description":"Fetches a thing.","inputSchema":{"type":"object"}},
			{"name":"Bad Name!","version":"1","description":"Not a valid tool name.","inputSchema":{"type":"object"}}]}`)
	})
	goodSrv := httptest.NewServer(good)
	t.Cleanup(goodSrv.Close)
	// twin, listed after good, offers lookup too: it is shadowed on the route.
	twin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"lookup","version":"1","description":"Looks it up too.","inputSchema":{"type":"object"}}]}`)
	}))
	t.Cleanup(twin.Close)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "manifest store down", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)
	mcpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+f.credential {
			f.sawCred.Store(true)
		}
		http.Error(w, "upstream MCP server failing", http.StatusInternalServerError)
	}))
	t.Cleanup(mcpSrv.Close)

	// A port with nothing listening: the store's operations fail.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	redisAddr := ln.Addr().String()
	ln.Close()

	t.Setenv("TOOLMESH_CONSOLE_TEST_CRED", f.credential)
	dir := t.TempDir()
	portal := writeFile(t, dir, "portal.yaml", `routes:
- key: healthy
  catalog: {mode: search, shortlist: 3}
  toolServices:
  - name: good
    url: `+goodSrv.URL+`
    cluster: {maxRetries: 1}
  - name: twin
    url: `+twin.URL+`
- key: failing
  toolServices:
  - name: broken
    url: `+broken.URL+`
  - name: remote
    protocol: mcp
    url: `+mcpSrv.URL+`/mcp
    headers:
      Authorization: {credential: remote, prefix: "Bearer "}
`)
	overrides := writeFile(t, dir, "overrides.yaml", "services:\n  good: {connectTimeout: 4s}\n")
	cfg := writeFile(t, dir, "config.yaml", `redis: redis://ops:`+f.redisPW+`@`+redisAddr+`/0
redisTimeout: 100ms
overrides: `+overrides+`
credentials:
  remote: {env: TOOLMESH_CONSOLE_TEST_CRED}
`)
	tokenFile := writeFile(t, dir, "token", adminToken)
	f.p = startProcess(t, "run", "--portal", portal, "--config", cfg, "--admin-token-file", tokenFile)
	return f
}

// TestConsoleState checks the data endpoint against the fixture: routes
// with their catalog and filter chain, the failing services' errors, the
// rejected tool, the effective cluster settings with their origin, the
// Redis store without its password.
func TestConsoleState(t *testing.T) {
	f := startConsoleFixture(t)
	var doc struct {
		Status   string `json:"status"`
		Registry struct {
			Routes []struct {
				Key             string   `json:"key"`
				SnapshotVersion string   `json:"snapshotVersion"`
				Tools           int      `json:"tools"`
				Ambiguous       []string `json:"ambiguous"`
				Shadowed        []struct{ Kind, Name, Service, Winner string }
				Rejected        []struct{ Service, Name, Reason string }
				Services        []struct {
					Name      string `json:"name"`
					Protocol  string `json:"protocol"`
					LastError string `json:"lastError"`
				} `json:"services"`
			} `json:"routes"`
			Store *struct {
				Target    string `json:"target"`
				Reachable bool   `json:"reachable"`
				LastError string `json:"lastError"`
			} `json:"store"`
		} `json:"registry"`
		XDS *struct {
			Nodes []xds.NodeStatus `json:"nodes"`
		} `json:"xds"`
		Routes map[string]struct {
			Catalog struct {
				Mode      string `json:"mode"`
				Shortlist int    `json:"shortlist"`
			} `json:"catalog"`
			Filters []string `json:"filters"`
		} `json:"routes"`
		Clusters   []xds.ClusterView `json:"clusters"`
		Store      string            `json:"store"`
		AdminToken bool              `json:"adminToken"`
	}
	get := func() {
		resp := adminGet(t, f.p.addrs["admin"], "/console/api/state", "Bearer "+adminToken)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("state: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
	}
	errorsOf := func() map[string]string {
		out := map[string]string{}
		for _, rt := range doc.Registry.Routes {
			for _, s := range rt.Services {
				out[s.Name] = s.LastError
			}
		}
		return out
	}
	waitFor(t, "both failing services to report an error", func() bool {
		get()
		e := errorsOf()
		return e["broken"] != "" && e["remote"] != ""
	})
	if doc.Status != "ready" || doc.Store != "redis" || !doc.AdminToken {
		t.Errorf("status %q, store %q, adminToken %v", doc.Status, doc.Store, doc.AdminToken)
	}
	e := errorsOf()
	if !strings.Contains(e["broken"], "500") || !strings.Contains(e["remote"], "500") || e["good"] != "" {
		t.Errorf("service errors = %q", e)
	}
	var healthy bool
	for _, rt := range doc.Registry.Routes {
		if rt.Key == "healthy" {
			healthy = rt.SnapshotVersion != "" && rt.Tools == 2 && len(rt.Rejected) == 1 && rt.Rejected[0].Name == "Bad Name!" &&
				len(rt.Ambiguous) == 0 && len(rt.Shadowed) == 1 && rt.Shadowed[0].Name == "lookup" &&
				rt.Shadowed[0].Service == "twin" && rt.Shadowed[0].Winner == "good"
		}
	}
	if !healthy {
		t.Errorf("route healthy = %+v, want a snapshot with 2 tools (fetch, good's lookup), 1 rejected and twin's lookup shadowed", doc.Registry.Routes)
	}
	if c := doc.Routes["healthy"].Catalog; c.Mode != "search" || c.Shortlist != 3 {
		t.Errorf("healthy catalog = %+v, want search mode, shortlist 3", c)
	}
	if c := doc.Routes["failing"].Catalog; c.Mode != "full" || c.Shortlist != 0 {
		t.Errorf("failing catalog = %+v, want full", c)
	}
	if fl := doc.Routes["healthy"].Filters; len(fl) == 0 {
		t.Errorf("healthy has no filter chain; the input-schema filter runs on every route")
	}
	var goodView *xds.ClusterView
	for i := range doc.Clusters {
		if doc.Clusters[i].Service == "good" {
			goodView = &doc.Clusters[i]
		}
	}
	switch {
	case goodView == nil:
		t.Errorf("no cluster view for good: %+v", doc.Clusters)
	case goodView.Settings.ConnectTimeout.D() != 4*time.Second || goodView.Origins["connectTimeout"] != "overrides services.good" ||
		goodView.Settings.MaxRetries != 1 || goodView.Origins["maxRetries"] != "the Portal cluster object":
		t.Errorf("good cluster = %+v", *goodView)
	}
	if len(doc.Clusters) != 4 {
		t.Errorf("%d cluster views, want 4 (good, twin, broken, remote)", len(doc.Clusters))
	}
	if doc.XDS == nil || len(doc.XDS.Nodes) == 0 {
		t.Errorf("no xDS node in the state")
	}
	if st := doc.Registry.Store; st == nil || !strings.Contains(st.Target, "redis://") || st.Reachable {
		t.Errorf("store = %+v, want the unreachable redis target", st)
	}
}

// TestConsoleShowsNoSecret fetches every console response, /health and
// /metrics of the fixture and looks for the Redis password, the credential
// and the admin token. The credential was sent to the MCP server and the
// Redis store was in use, so the secrets were live in the process.
func TestConsoleShowsNoSecret(t *testing.T) {
	f := startConsoleFixture(t)
	waitFor(t, "the MCP server to be sent the credential", f.sawCred.Load)
	admin := f.p.addrs["admin"]
	waitFor(t, "the Redis store to report an error", func() bool {
		resp := adminGet(t, admin, "/console/api/state", "Bearer "+adminToken)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"lastError"`) && strings.Contains(string(b), `"backend":"redis"`)
	})
	secrets := map[string]string{"redis password": f.redisPW, "credential": f.credential, "admin token": adminToken}
	paths := []string{"/console", "/console/", "/console/index.html", "/console/console.js", "/console/console.css",
		"/console/api/state", "/health", "/metrics", "/readyz", "/healthz", "/console/absent"}
	for _, auth := range []string{"", "Bearer " + adminToken, "Bearer wrong-token-0123456789"} {
		for _, path := range paths {
			resp := adminGet(t, admin, path, auth)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			all := string(body)
			for k, vs := range resp.Header {
				all += "\n" + k + ": " + strings.Join(vs, ", ")
			}
			for what, secret := range secrets {
				if strings.Contains(all, secret) {
					t.Errorf("GET %s (auth %.12q) shows the %s:\n%s", path, auth, what, all)
				}
			}
		}
	}
}

// TestConsoleAssets checks the embedded page and its headers.
func TestConsoleAssets(t *testing.T) {
	p := startProcess(t, "run")
	admin := p.addrs["admin"]
	tests := []struct {
		path, wantType, wantBody string
		want                     int
	}{
		{"/console/", "text/html", `<script src="console.js" defer></script>`, http.StatusOK},
		{"/console/console.js", "text/javascript", "api/state", http.StatusOK},
		{"/console/console.css", "text/css", ":root", http.StatusOK},
		{"/console/nothing.js", "", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp := adminGet(t, admin, tt.path, "")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want != http.StatusOK {
				return
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("Content-Type %q, want %s", ct, tt.wantType)
			}
			if !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("body lacks %q", tt.wantBody)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("no nosniff")
			}
		})
	}
	resp := adminGet(t, admin, "/console", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Errorf("/console = %d to %q, want a redirect to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The page loads nothing from elsewhere: every URL in it is relative.
	for _, path := range []string{"/console/", "/console/console.js", "/console/console.css"} {
		resp := adminGet(t, admin, path, "")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "http://") || strings.Contains(string(body), "https://") || strings.Contains(string(body), "//cdn") {
			t.Errorf("%s names an absolute URL", path)
		}
	}
}

// TestScrubUserinfo checks the console's last line of defence against a
// password in a URL inside an error text.
func TestScrubUserinfo(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"get http://u:pw@host/x: 500"`, `"get http://REDACTED@host/x: 500"`},
		{`redis://:pw@127.0.0.1:6379/0 and rediss+sentinel://a:b@h:1`, `redis://REDACTED@127.0.0.1:6379/0 and rediss+sentinel://REDACTED@h:1`},
		{`http://host:8080/path`, `http://host:8080/path`},
		{`user@example.com: mail`, `user@example.com: mail`},
		{`http://only-user@host/`, `http://only-user@host/`},
	}
	for _, tt := range tests {
		if got := string(scrubUserinfo([]byte(tt.in))); got != tt.want {
			t.Errorf("scrubUserinfo(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// waitFor polls cond every 50ms; the 30s limit only bounds a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestConsoleStateModes: each command fills in what it has: filter chains
// and access rules where an ext_proc server runs, cluster settings and nodes where an xDS
// server runs.
func TestConsoleStateModes(t *testing.T) {
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tools":[{"name":"ping","version":"1","description":"Pings.","inputSchema":{"type":"object"}}]}`)
	}))
	t.Cleanup(svc.Close)
	portal := writeFile(t, t.TempDir(), "portal.yaml", "routes:\n- key: core\n  toolServices:\n  - {name: ping, url: "+svc.URL+"}\n")
	tests := []struct {
		mode                 string
		filters, clusters, x bool
	}{
		{"run", true, true, true},
		{"extproc", true, false, false},
		{"xds", false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			p := startProcess(t, tt.mode, "--portal", portal)
			resp := adminGet(t, p.addrs["admin"], "/console/api/state", "")
			defer resp.Body.Close()
			var doc struct {
				Mode   string `json:"mode"`
				Routes map[string]struct {
					Filters []string        `json:"filters"`
					Access  json.RawMessage `json:"access"`
				} `json:"routes"`
				Clusters []xds.ClusterView `json:"clusters"`
				XDS      json.RawMessage   `json:"xds"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			if doc.Mode != tt.mode {
				t.Errorf("mode %q", doc.Mode)
			}
			if got := len(doc.Routes["core"].Filters) > 0; got != tt.filters {
				t.Errorf("filters %v, want present: %v", doc.Routes["core"].Filters, tt.filters)
			}
			// The access rules are the ext_proc server's: where it runs.
			if got := len(doc.Routes["core"].Access) > 0; got != tt.filters {
				t.Errorf("access %s, want present: %v", doc.Routes["core"].Access, tt.filters)
			}
			if got := len(doc.Clusters) == 1 && doc.Clusters[0].Service == "ping"; got != tt.clusters {
				t.Errorf("clusters %+v, want ping's: %v", doc.Clusters, tt.clusters)
			}
			if got := len(doc.XDS) > 0; got != tt.x {
				t.Errorf("xds %s, want present: %v", doc.XDS, tt.x)
			}
		})
	}
}
