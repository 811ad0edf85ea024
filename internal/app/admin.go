package app

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// component is one part of the process as the admin endpoints see it.
type component struct {
	name  string
	state func() (ready bool, state string)
}

// healthDoc is the /health answer.
type healthDoc struct {
	Status     string            `json:"status"` // "ready", "not ready" or "stopping"
	Version    string            `json:"version"`
	Mode       string            `json:"mode"`
	Components map[string]string `json:"components"`
	Registry   registry.Health   `json:"registry"`
	XDS        *xdsHealth        `json:"xds,omitempty"`
}

// xdsHealth is the xDS part of /health: snapshot groups, every node's last
// pushed, ACKed and NACKed version, and the SRE override file's state.
type xdsHealth struct {
	Groups    []xds.GroupStatus    `json:"groups"`
	Nodes     []xds.NodeStatus     `json:"nodes"`
	Overrides *xds.OverridesStatus `json:"overrides,omitempty"`
}

// newMetricsRegistry is the process's own Prometheus registry (not the global
// one, so nothing registers behind its back), with Go and process metrics.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "toolmesh_build_info",
			Help:        "Always 1; the version label says which toolmesh is running.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	return reg
}

// adminHandler serves the admin endpoints:
//
//	/healthz   200 "ok" while the process runs (liveness)
//	/readyz    200 when every component is ready, else 503 (readiness)
//	/health    the health detail, JSON
//	/metrics   Prometheus metrics
//	/console/  the operator console, a read-only page (console.go)
//
// With an admin token, everything but /healthz and /readyz needs it.
func (a *app) adminHandler(metrics *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	a.consoleRoutes(mux)
	a.surfaceRoutes(mux) // /admin/surface/ (surface.go)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		doc := a.health()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if doc.Status != "ready" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = io.WriteString(w, doc.Status+"\n")
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.health())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{Registry: metrics}))
	return requireAdminToken(a.adminToken, mux)
}

// minAdminTokenLen keeps a guessable token out: 16 characters is 64 bits
// of hex.
const minAdminTokenLen = 16

// readAdminToken reads the admin token from its source, once at start;
// nil means no token.
func readAdminToken(src *config.CredentialSource) (string, error) {
	if src == nil {
		return "", nil
	}
	tok, err := src.Read()
	if err != nil {
		return "", fmt.Errorf("admin token (adminToken, --admin-token-file): %w", err)
	}
	if len(tok) < minAdminTokenLen {
		return "", fmt.Errorf("admin token (adminToken, --admin-token-file): %d characters is too short to resist guessing; use at least %d, e.g. the output of `openssl rand -hex 32`",
			len(tok), minAdminTokenLen)
	}
	return tok, nil
}

// openAdminPaths answer without the token: probes (kubelet, load
// balancers) cannot send one, and they reveal nothing but up and ready.
var openAdminPaths = map[string]bool{"/healthz": true, "/readyz": true}

// adminRealm is the realm of the 401 challenges.
const adminRealm = `realm="toolmesh admin"`

// requireAdminToken lets a request through next only when it carries token,
// as "Authorization: Bearer TOKEN" (RFC 6750) or, for a browser, as the
// password of HTTP Basic authentication with any user name (RFC 7617),
// which the browser asks for on the 401 and then sends with the console's
// own requests. An empty token lets everything through.
func requireAdminToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	// Comparing digests keeps the comparison constant-time whatever the
	// length of what the client sent.
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openAdminPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		got, presented := presentedToken(r)
		if presented {
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
				next.ServeHTTP(w, r)
				return
			}
		}
		bearer := "Bearer " + adminRealm
		if presented {
			bearer += `, error="invalid_token"`
		}
		w.Header().Add("WWW-Authenticate", bearer)
		w.Header().Add("WWW-Authenticate", "Basic "+adminRealm+`, charset="UTF-8"`)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		msg := "missing"
		if presented {
			msg = "wrong"
		}
		_, _ = fmt.Fprintf(w, "401 Unauthorized: the admin token is %s; send it as \"Authorization: Bearer TOKEN\" (adminToken in the toolmesh config)\n", msg)
	})
}

// presentedToken returns the token of the Authorization header, Bearer or
// Basic (the password); presented is false when there is none.
func presentedToken(r *http.Request) (token string, presented bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	switch strings.ToLower(scheme) { // schemes are case-insensitive (RFC 9110 §11.1)
	case "bearer":
		return cred, true
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			return "", true
		}
		_, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return "", true
		}
		return pass, true
	}
	return "", true
}

// health collects the state of every component.
func (a *app) health() healthDoc {
	doc := healthDoc{
		Status:     "ready",
		Version:    version,
		Mode:       a.mode.String(),
		Components: make(map[string]string, len(a.components)),
		Registry:   a.reg.Health(),
	}
	if a.xdsServer != nil {
		doc.XDS = &xdsHealth{Groups: a.xdsServer.Groups(), Nodes: a.xdsServer.NodeStatus()}
		if a.cfg.Overrides != "" {
			st := a.xdsServer.OverridesStatus()
			doc.XDS.Overrides = &st
		}
	}
	for _, c := range a.components {
		ok, state := c.state()
		doc.Components[c.name] = state
		if !ok {
			doc.Status = "not ready"
		}
	}
	if a.stopping.Load() {
		doc.Status = "stopping"
	}
	return doc
}
