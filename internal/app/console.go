package app

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"regexp"
	"time"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/mcp"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/xds"
)

// The operator console: a read-only page on the admin listener, plain
// HTML, CSS and JavaScript embedded in the binary (no build step, nothing
// loaded from elsewhere, so it works offline). The page polls
// /console/api/state, which is the /health detail plus what /health leaves
// out: each route's catalog, filter chain and access rules in force
// (authentication, authorization policies, approval, limits), and each
// Tool Service's effective cluster settings (xds.Server.Clusters). Access
// rules are read from the ext_proc server's runtime, never from the file,
// so the page shows what a SIGHUP put in force; they carry names, URLs,
// patterns and expressions, never a key, token or credential.
//
//go:embed console
var consoleFiles embed.FS

// consolePolicy keeps the page to its own files: no inline script, no
// other origin, no framing (the console must not be clickjacked).
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleDoc is the /console/api/state answer.
type consoleDoc struct {
	healthDoc
	// GeneratedAt is when this answer was put together.
	GeneratedAt time.Time `json:"generatedAt"`
	// Routes holds, by route key, what the registry's health detail does
	// not: the catalog settings in force and the filter chain.
	Routes map[string]consoleRoute `json:"routes"`
	// Clusters are the Tool Services' effective cluster settings (nil
	// without an xDS server: the extproc command).
	Clusters []xds.ClusterView `json:"clusters,omitempty"`
	// Store is "memory" or "redis": the snapshot store in use.
	Store string `json:"store"`
	// AdminToken is true when the admin listener needs the token.
	AdminToken bool `json:"adminToken"`
	// RateLimits are the rate and concurrency limits in force, one row per
	// limit and route scope (docs/ratelimit.md).
	RateLimits []ratelimit.InForce `json:"rateLimits,omitempty"`
}

// consoleRoute is a route's catalog and filter chain.
type consoleRoute struct {
	Catalog consoleCatalog `json:"catalog"`
	// Filters are the route's filter names in execution order (nil without
	// an ext_proc server: the xds command).
	Filters []string `json:"filters,omitempty"`
	// Access is what the route asks of a caller (nil without an ext_proc
	// server: the xds command).
	Access *consoleAccess `json:"access,omitempty"`
	// Quarantined are the route's tools held back until an operator accepts
	// their changed definition (pinned definitions, surface.go).
	Quarantined []consoleQuarantined `json:"quarantined,omitempty"`
}

// consoleAccess is a route's authentication, authorization, approval and
// limits in force.
type consoleAccess struct {
	Auth authn.RouteView `json:"auth"`
	// Policies are the authorization policies in configured order; empty:
	// everything is allowed.
	Policies []authz.PolicyView `json:"policies"`
	// Approval is the route's approval rule; nil: no call needs approval.
	Approval *consoleApproval `json:"approval,omitempty"`
	// RateLimits are the rate and concurrency limits in force on the
	// route: its own rateLimits entry, else the default (docs/ratelimit.md).
	RateLimits []ratelimit.InForce `json:"rateLimits"`
}

// consoleApproval is a route's approval rule and the tools it selects.
type consoleApproval struct {
	approval.RuleView
	// TTL is how long an approval request can be answered.
	TTL string `json:"ttl"`
	// Selected are the route's current tools the rule selects (by name or
	// annotation, before any when condition), at most
	// maxConsoleApprovalTools of SelectedTotal.
	Selected      []consoleApprovalTool `json:"selected"`
	SelectedTotal int                   `json:"selectedTotal"`
}

// consoleApprovalTool is one tool that needs approval, and why.
type consoleApprovalTool struct {
	Name string `json:"name"`
	Why  string `json:"why"`
	// Conditional: the rule's when condition decides per call.
	Conditional bool `json:"conditional,omitempty"`
}

// consoleQuarantined is a tool held back, by name, with its hashes and
// both definitions (canonical JSON), which the page shows as a diff.
type consoleQuarantined struct {
	Name     string `json:"name"`
	Service  string `json:"service"`
	Tool     string `json:"tool"`               // its name on the service
	Accepted string `json:"accepted,omitempty"` // the hash last accepted
	Current  string `json:"current"`            // the hash the upstream lists now
	// The definitions, from the pin store (absent when it does not answer).
	AcceptedDefinition json.RawMessage `json:"acceptedDefinition,omitempty"`
	CurrentDefinition  json.RawMessage `json:"currentDefinition,omitempty"`
	// Rejected: an operator rejected it; it stays held back.
	Rejected bool `json:"rejected,omitempty"`
}

// maxConsoleApprovalTools bounds the tools listed per route, so a route of
// thousands of tools keeps the state document small.
const maxConsoleApprovalTools = 100

// consoleCatalog is a route's catalog object with its defaults filled in.
type consoleCatalog struct {
	Mode      string `json:"mode"`      // full or search
	PageSize  int    `json:"pageSize"`  // 0: no paging
	Shortlist int    `json:"shortlist"` // search mode only
	Synonyms  int    `json:"synonyms"`  // synonym groups
}

// consoleRoutes adds the console's endpoints to mux.
func (a *app) consoleRoutes(mux *http.ServeMux) {
	files, err := fs.Sub(consoleFiles, "console")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	static := http.StripPrefix("/console/", http.FileServerFS(files))
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /console/", func(w http.ResponseWriter, r *http.Request) {
		consoleHeaders(w)
		w.Header().Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /console/api/state", func(w http.ResponseWriter, _ *http.Request) {
		body, err := json.Marshal(a.consoleState())
		if err != nil {
			http.Error(w, "encode console state: "+err.Error(), http.StatusInternalServerError)
			return
		}
		consoleHeaders(w)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(scrubUserinfo(body))
	})
}

func consoleHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", consolePolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// consoleState collects the console's view. Every part is read from
// atomically published state, so a poll never waits for a refresh or an
// xDS build.
func (a *app) consoleState() consoleDoc {
	doc := consoleDoc{
		healthDoc:   a.health(),
		GeneratedAt: time.Now().UTC(),
		Routes:      map[string]consoleRoute{},
		Store:       "memory",
		AdminToken:  a.adminToken != "",
	}
	if a.cfg.Redis != "" {
		doc.Store = "redis"
	}
	for _, rt := range a.reg.Routes() {
		cr := consoleRoute{Catalog: consoleCatalog{Mode: registry.ModeFull}}
		if c := rt.Catalog; c != nil {
			if c.Mode != "" {
				cr.Catalog.Mode = c.Mode
			}
			cr.Catalog.PageSize = c.PageSize
			cr.Catalog.Synonyms = len(c.Synonyms)
			if cr.Catalog.Mode == registry.ModeSearch {
				cr.Catalog.Shortlist = c.Shortlist
				if cr.Catalog.Shortlist <= 0 {
					cr.Catalog.Shortlist = mcp.DefaultShortlist
				}
			}
		}
		if a.filters != nil {
			cr.Filters = a.filters.Chain(rt.Key).Names()
		}
		if a.extprocServer != nil {
			cr.Access = a.consoleAccess(rt)
		}
		cr.Quarantined = a.consoleQuarantine(rt.Key)
		doc.Routes[rt.Key] = cr
	}
	if a.xdsServer != nil {
		doc.Clusters = a.xdsServer.Clusters()
	}
	if a.extprocServer != nil {
		doc.RateLimits = a.extprocServer.Runtime().RateLimits.InForce()
	}
	return doc
}

// consoleAccess reads rt's access rules from the runtime in force.
func (a *app) consoleAccess(rt registry.Route) *consoleAccess {
	in := a.extprocServer.Runtime() // one generation for the whole page
	acc := &consoleAccess{
		Auth:       in.Auth.View(rt.Key, rt.Path()),
		Policies:   in.Policies.View(rt.Key),
		RateLimits: in.RateLimits.Route(rt.Key),
	}
	if acc.Policies == nil {
		acc.Policies = []authz.PolicyView{}
	}
	ap := in.Approval
	rule, ok := ap.View(rt.Key)
	if !ok {
		return acc
	}
	acc.Approval = &consoleApproval{RuleView: rule, TTL: ap.TTL().String(), Selected: []consoleApprovalTool{}}
	snap := a.reg.Snapshot(rt.Key)
	if snap == nil {
		return acc
	}
	for _, t := range snap.Tools {
		why, cond := ap.Selects(rt.Key, approval.Tool{Name: t.Name, Service: t.Service, Title: t.Title,
			Annotations: t.Annotations, Untrusted: t.UntrustedAnnotations})
		if why == "" {
			continue
		}
		acc.Approval.SelectedTotal++
		if len(acc.Approval.Selected) < maxConsoleApprovalTools {
			acc.Approval.Selected = append(acc.Approval.Selected, consoleApprovalTool{Name: t.Name, Why: why, Conditional: cond})
		}
	}
	return acc
}

// userinfoRE matches the user information of a URL in text: scheme://
// then user:password@. Errors seldom carry one (net/http and the Redis
// store redact theirs), but whatever an upstream's error text says, the
// console shows no password.
var userinfoRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/@"]*:[^\s/@"]*@`)

// scrubUserinfo replaces the user information of URLs in b.
func scrubUserinfo(b []byte) []byte {
	return userinfoRE.ReplaceAll(b, []byte("${1}REDACTED@"))
}
