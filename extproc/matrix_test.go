package extproc

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolmesh/toolmesh/extproc/approval"
	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/internal/wire"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/search/embed/embedtest"
)

// matrixRoutes are the route kinds: native Tool Services only, federated
// MCP servers only, both (mixed), and search mode over a federated server.
func matrixRoutes(t *testing.T) testRoutes {
	t.Helper()
	routes := federatedRoutes(t, "http://127.0.0.1:1")
	routes["/mcp/core"] = testRoute{key: "core", snap: coreSnapshot(t)}
	_, man, _ := routes["/mcp/fed"].snap.MCPService("gh")
	// A route of the federated server "gh" alone, offering tools.
	ghRoute := func(key string, catalog *registry.Catalog, tools ...string) testRoute {
		def := registry.Route{Key: key, Catalog: catalog, ToolServices: []registry.ToolService{
			{Name: "gh", URL: "https://gh.example/v1/mcp", Protocol: registry.ProtocolMCP, ToolPrefix: "gh_"}}}
		m := &registry.Manifest{MCP: man}
		for _, name := range tools {
			m.Tools = append(m.Tools, registry.ManifestTool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)})
		}
		return testRoute{key: key, snap: buildSnapshot(t, def, map[string]*registry.Manifest{"gh": m})}
	}
	routes["/mcp/gh"] = ghRoute("gh", nil, "search")
	// Search mode with two tools that search_tools "search" shortlists, so
	// that its ranking asks the route's embedding service, if any
	// (embeddings). Of two candidates the fused order is the lexical one (a
	// tie keeps the lexical order, search.Lexical.Fuse): no answer changes.
	routes["/mcp/search"] = ghRoute("search", &registry.Catalog{Mode: registry.ModeSearch}, "search", "search_issues")
	return routes
}

var matrixPaths = []string{"/mcp/core", "/mcp/gh", "/mcp/fed", "/mcp/search"}

// matrixRequest is one request of every method, in either era.
type matrixRequest struct {
	body  string
	extra []string
}

func matrixRequests() []matrixRequest {
	legacy := func(id, method, params string) matrixRequest {
		b := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
		if params != "" {
			b += `,"params":` + params
		}
		return matrixRequest{body: b + "}"}
	}
	modern := func(id, method, name, params string) matrixRequest {
		extra := stateless(method)
		if name != "" {
			extra = stateless(method, name)
		}
		return matrixRequest{body: `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params + meta2026 + `}}`,
			extra: extra}
	}
	return []matrixRequest{
		legacy("1", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`),
		{body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		legacy("2", "ping", ""),
		legacy("3", "tools/list", ""),
		legacy("4", "tools/call", `{"name":"echo","arguments":{}}`),
		legacy("5", "tools/call", `{"name":"gh_search","arguments":{"q":"x"}}`),
		legacy("6", "tools/call", `{"name":"search_tools","arguments":{"query":"search"}}`),
		legacy("7", "tools/call", `{"name":"call_tool","arguments":{"name":"gh_search","arguments":{}}}`),
		legacy("8", "tools/call", `{"name":"nope","arguments":{}}`),
		legacy("9", "resources/list", ""),
		legacy("10", "resources/templates/list", ""),
		legacy("11", "resources/read", `{"uri":"gh://readme"}`),
		legacy("12", "prompts/list", ""),
		legacy("13", "prompts/get", `{"name":"gh_review"}`),
		legacy("14", "completion/complete", `{"ref":{"type":"ref/prompt","name":"gh_review"},"argument":{"name":"a","value":"b"}}`),
		legacy("15", "subscriptions/listen", ""),
		legacy("16", "no/such/method", ""),
		modern(`"d"`, "server/discover", "", ""),
		modern(`"l"`, "tools/list", "", ""),
		modern(`"c"`, "tools/call", "gh_search", `"name":"gh_search","arguments":{},`),
		modern(`"n"`, "tools/call", "echo", `"name":"echo","arguments":{},`),
		modern(`"r"`, "resources/read", "gh://readme", `"uri":"gh://readme",`),
		modern(`"p"`, "prompts/get", "gh_review", `"name":"gh_review",`),
		modern(`"s"`, "subscriptions/listen", "", `"notifications":{"toolsListChanged":true},`),
	}
}

// matrixFeature is an optional feature turned on so that it should change
// no answer: what it adds to the configuration, to the server once it
// runs, and to each request's headers.
type matrixFeature struct {
	name    string
	config  func(t *testing.T, cfg *Config)
	server  func(t *testing.T, s *Server)
	headers func(t *testing.T) []string
	// routes changes the route kinds' snapshots before the server runs.
	routes func(t *testing.T, routes testRoutes)
	// expect is the answer to body with the feature on, given the answer
	// without it, for a feature whose purpose changes some answers (nil:
	// every answer stays as it is).
	expect func(body, answer string) string
}

func matrixFeatures() []matrixFeature {
	tracer := func(sampler sdktrace.Sampler) func(*testing.T, *Config) {
		return func(t *testing.T, cfg *Config) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
			t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
			cfg.TracerProvider = tp
		}
	}
	var idp *authIDP
	return []matrixFeature{
		{name: "tracing sampled", config: tracer(sdktrace.AlwaysSample())},
		{name: "tracing unsampled", config: tracer(sdktrace.NeverSample())},
		{name: "auth", config: func(t *testing.T, cfg *Config) {
			idp = newAuthIDP(t)
			a := authn.New(authn.Options{})
			if err := a.Apply("https://mcp.example.com", &authn.Config{
				Default: &authn.Profile{Issuers: []authn.Issuer{{Issuer: idp.issuer}}, Scopes: []string{"mcp:tools"}},
			}); err != nil {
				t.Fatal(err)
			}
			runtimeOf(cfg).Auth = a.Current()
		}, headers: func(t *testing.T) []string {
			return []string{"authorization", "Bearer " + idp.token(t, jose.ES256, func(c map[string]any) {
				c["aud"] = []string{"https://mcp.example.com/mcp/core", "https://mcp.example.com/mcp/gh",
					"https://mcp.example.com/mcp/fed", "https://mcp.example.com/mcp/search"}
			})}
		}},
		{name: "policies", server: func(t *testing.T, s *Server) {
			never := authz.Policy{Name: "never", Effect: authz.EffectDeny, When: `era == "1999-01-01"`}
			set, err := authz.Compile(&authz.Config{Routes: map[string][]authz.Policy{
				"core": {never}, "gh": {never}, "fed": {never}, "search": {never}}})
			if err != nil {
				t.Fatal(err)
			}
			s.SetPolicies(set)
		}},
		{name: "approval", server: func(t *testing.T, s *Server) {
			rule := approval.Rule{Tools: []string{"no_such_tool"}}
			a, err := approval.New(approval.Config{Keys: []approval.Key{approvalKey1}, TTL: time.Minute,
				Routes: map[string]approval.Rule{"core": rule, "gh": rule, "fed": rule, "search": rule}})
			if err != nil {
				t.Fatal(err)
			}
			s.SetApproval(a)
		}},
		{name: "filters", config: func(t *testing.T, cfg *Config) {
			runtimeOf(cfg).Filters = buildFilters(t, `
definitions:
  - {name: acl, type: tool_acl, config: {deny: ["no_such_*"]}}
  - {name: ssn, type: redact, config: {patterns: ['\bno-such-secret\b']}}
defaults: [acl, ssn]
`)
		}},
		{name: "gzip", headers: func(*testing.T) []string { return []string{"accept-encoding", "gzip, br"} }},
		// The search route ranked by an embedding service (on 127.0.0.1).
		{name: "embeddings", routes: embedSearchRoute},
		// Change-notification streams served: the capabilities declare
		// listChanged true and subscriptions/listen is routed to the
		// notifications cluster; nothing else changes.
		{name: "notifications", config: func(_ *testing.T, cfg *Config) { cfg.MCP.ListChanged = true },
			expect: func(body, answer string) string {
				switch {
				case strings.Contains(body, `"method":"subscriptions/listen"`) && strings.Contains(body, `"_meta"`):
					return "routed to " + wire.NotificationsCluster + " "
				case strings.Contains(body, `"method":"initialize"`), strings.Contains(body, `"method":"server/discover"`):
					return listChangedOff.ReplaceAllString(answer, `${1}"listChanged":true}`)
				}
				return answer
			}},
	}
}

// listChangedOff is a capability that declares no change notifications:
// {"listChanged":false} in the legacy era, {} in 2026-07-28's.
var listChangedOff = regexp.MustCompile(`("(?:tools|resources|prompts)":\{(?:"subscribe":true,)?)(?:"listChanged":false)?\}`)

// embedSearchRoute gives the search route's snapshot the tool embeddings of
// an embedding service, and waits until its ranking uses them; at the end
// it checks that search_tools asked the service.
func embedSearchRoute(t *testing.T, routes testRoutes) {
	emb, err := embedtest.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	es := registry.NewEmbedders(map[string]registry.EmbeddingService{"e": {URL: emb.URL, Model: "m1"}}, "e", nil, nil,
		prometheus.NewRegistry(), slog.New(slog.DiscardHandler), 10*time.Second)
	snap := routes["/mcp/search"].snap
	es.Embed([]*registry.Snapshot{snap}, nil, func(context.Context, *registry.Snapshot) {})
	es.Wait()
	if _, ok := snap.SemanticReady(); !ok {
		t.Fatal("the search route is not ranked by the embedding service")
	}
	// The tools are embedded; what the service sees from now on are the
	// requests of search_tools, which the matrix must have sent.
	tools := len(emb.Requests())
	t.Cleanup(func() {
		if len(emb.Requests()) == tools {
			t.Error("no search_tools request was ranked with the embedding service")
		}
	})
}

// traceMembers are the trace context members a traced request adds to the
// _meta of what it sends a federated server: what tracing is for, not a
// change of the answer.
var traceMembers = regexp.MustCompile(`,?"(traceparent|tracestate|baggage)":"[^"]*"`)

// TestFeatureMatrix: each optional feature, turned on so that it should
// change nothing, leaves the answer to every method on every route kind as
// it is without it: answered the same, or routed to the same cluster with
// the same body.
func TestFeatureMatrix(t *testing.T) {
	plain := newTestEnv(t, Config{}, matrixRoutes(t))
	want := map[string]string{}
	for _, path := range matrixPaths {
		for _, rq := range matrixRequests() {
			want[path+" "+rq.body] = answerOf(t, plain, path, rq.body, rq.extra...)
		}
	}
	for _, f := range matrixFeatures() {
		t.Run(f.name, func(t *testing.T) {
			var cfg Config
			if f.config != nil {
				f.config(t, &cfg)
			}
			routes := matrixRoutes(t)
			if f.routes != nil {
				f.routes(t, routes)
			}
			env := newTestEnv(t, cfg, routes)
			if f.server != nil {
				f.server(t, env.srv)
			}
			for _, path := range matrixPaths {
				for _, rq := range matrixRequests() {
					extra := rq.extra
					if f.headers != nil {
						extra = append(f.headers(t), extra...)
					}
					got := traceMembers.ReplaceAllString(answerOf(t, env, path, rq.body, extra...), "")
					w := want[path+" "+rq.body]
					if f.expect != nil {
						w = f.expect(rq.body, w)
					}
					if got != w {
						t.Errorf("%s %s\n got %s\nwant %s", path, rq.body, got, w)
					}
				}
			}
		})
	}
}
